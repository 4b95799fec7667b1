"""The Helm chart lints, templates, and its manifests pass a server-side dry run."""

from __future__ import annotations

import subprocess
from pathlib import Path

from colony.devenv.cluster import LocalCluster
from colony.devenv.tools import Tools

CHART = Path(__file__).resolve().parents[2] / "charts" / "colony-operator"


def _helm(tools: Tools, *args: str) -> str:
    result = subprocess.run(
        [str(tools.binary("helm")), *args], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr + result.stdout
    return result.stdout


def test_chart_lints(tools: Tools) -> None:
    _helm(tools, "lint", "--strict", str(CHART))


def test_chart_templates_apply_in_dry_run(tools: Tools, management: LocalCluster, namespace: str) -> None:
    rendered = _helm(
        tools,
        "template",
        "colony",
        str(CHART),
        "--namespace",
        namespace,
        "--include-crds",
        "--set",
        "watchNamespaces={team-a,team-b}",
    )
    assert "--namespace=team-a" in rendered
    management.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", "-", input_text=rendered)
