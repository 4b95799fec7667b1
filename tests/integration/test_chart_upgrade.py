"""`helm upgrade` keeps the CRDs current: the chart renders them as templates (templates/crds.yaml),
so a new field in a CRD reaches the API server on upgrade instead of being pruned silently, and
`helm uninstall` keeps them (helm.sh/resource-policy: keep)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from colony.devenv.cluster import LocalCluster
from colony.devenv.tools import Tools
from tests.integration.test_chart import CHART, helm

COLONIES_CRD = "colonies.infra.exalsius.ai"
PROBE_FIELD = "upgradeProbe"


@pytest.fixture(scope="module")
def bare(tools: Tools) -> Iterator[LocalCluster]:
    """An API server without any CRD: the chart installs them itself."""
    cluster = LocalCluster("chart-upgrade", tools, scheduler=False, controller_manager=False, kwok=False)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _colony() -> str:
    return json.dumps(
        {
            "apiVersion": "infra.exalsius.ai/v1",
            "kind": "Colony",
            "metadata": {"name": "probe", "namespace": "default"},
            "spec": {
                "k8sVersion": "v1.36.3",
                "colonyClusters": [
                    {"clusterName": "onprem", "existing": {"kubeconfigSecretRef": {"name": "kc"}}}
                ],
                PROBE_FIELD: "kept",
            },
        }
    )


def _served_spec(cluster: LocalCluster) -> dict[str, Any]:
    """The spec the API server stores for a new Colony (server dry run: unknown fields pruned)."""
    out = cluster.kubectl(
        "create", "--dry-run=server", "--validate=ignore", "-o", "json", "-f", "-", input_text=_colony()
    ).stdout
    spec: dict[str, Any] = json.loads(out)["spec"]
    return spec


def test_helm_upgrade_updates_the_crds_and_uninstall_keeps_them(
    tools: Tools, bare: LocalCluster, tmp_path: Path
) -> None:
    chart = tmp_path / "colony-operator"
    shutil.copytree(CHART, chart)
    kube = ("--kubeconfig", str(bare.kubeconfig_path), "--namespace", "colony-system")
    helm(tools, "install", "colony", str(chart), "--create-namespace", *kube)
    crd = bare.get_json("crd", COLONIES_CRD)
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert crd["metadata"]["annotations"]["meta.helm.sh/release-name"] == "colony"
    assert PROBE_FIELD not in _served_spec(bare)  # pruned: the field is not in the schema yet

    # A new version of the chart adds a field to the Colony CRD.
    path = chart / "files" / "crds" / "infra.exalsius.ai_colonies.yaml"
    document = yaml.safe_load(path.read_text())
    schema = document["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["spec"]["properties"][PROBE_FIELD] = {"type": "string", "description": "probe"}
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    helm(tools, "upgrade", "colony", str(chart), *kube)

    assert _served_spec(bare)[PROBE_FIELD] == "kept"
    explained = bare.kubectl("explain", f"colonies.spec.{PROBE_FIELD}").stdout
    assert "probe" in explained

    # Uninstalling keeps the CRDs (and so every colony); the operator's own objects go.
    helm(tools, "uninstall", "colony", *kube)
    assert bare.get_json("crd", COLONIES_CRD)["metadata"]["name"] == COLONIES_CRD
    deployments = bare.get_json("deployments", "-n", "colony-system")["items"]
    assert deployments == []


def test_crds_can_be_left_to_the_platform_team(tools: Tools) -> None:
    """crds.install=false renders no CRD (for clusters where CRDs are applied separately)."""
    text = helm(tools, "template", "colony", str(CHART), "--set", "crds.install=false").stdout
    kinds = {doc["kind"] for doc in yaml.safe_load_all(text) if doc}
    assert "CustomResourceDefinition" not in kinds and "Deployment" in kinds
    kept = helm(tools, "template", "colony", str(CHART), "--set", "crds.keep=false").stdout
    crds = [d for d in yaml.safe_load_all(kept) if d and d["kind"] == "CustomResourceDefinition"]
    assert len(crds) == len(list((CHART / "files" / "crds").glob("*.yaml")))
    assert all("helm.sh/resource-policy" not in d["metadata"].get("annotations", {}) for d in crds)
