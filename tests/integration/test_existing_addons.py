"""Add-ons on an existing (kwok) colony cluster: the operator installs, upgrades and uninstalls
them itself with pyhelm3 and the pinned helm, from a chart repository served on 127.0.0.1."""

from __future__ import annotations

import base64
import functools
import http.server
import json
import ssl
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from colony.devenv.cluster import LocalCluster
from colony.devenv.process import ManagedProcess
from colony.devenv.tools import Tools
from tests.integration.conftest import chart_repo_tls, eventually

CHART_TEMPLATE = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  chartVersion: {{ .Chart.Version | quote }}
  greeting: {{ .Values.greeting | quote }}
"""


UNINSTALLABLE_HOOK = """\
---
apiVersion: example.invalid/v1
kind: NoSuchKind
metadata:
  name: {{ .Release.Name }}-goodbye
  annotations:
    helm.sh/hook: pre-delete
"""


def _package(tools: Tools, workdir: Path, out: Path, version: str, extra: str = "") -> None:
    chart = workdir / f"demo-{version}"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(f"apiVersion: v2\nname: demo\nversion: {version}\n")
    (chart / "values.yaml").write_text("greeting: hello\n")
    (chart / "templates" / "configmap.yaml").write_text(CHART_TEMPLATE + extra)
    helm = str(tools.binary("helm"))
    subprocess.run([helm, "package", str(chart), "-d", str(out)], check=True, capture_output=True)


@pytest.fixture(scope="module")
def chart_repo(tools: Tools, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Helm repository on https://127.0.0.1 with chart `demo` 0.1.0 and 0.2.0 (0.2.0 adds a
    Secret), and 0.3.0, which cannot be uninstalled: its pre-delete hook is of a kind no cluster
    serves. Served with the certificate of `chart_repo_tls` (the session operator trusts its CA)."""
    root = tmp_path_factory.mktemp("charts")
    served = root / "repo"
    served.mkdir()
    _package(tools, root, served, "0.1.0")
    _package(tools, root, served, "0.2.0", "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: demo-v2\n")
    _package(tools, root, served, "0.3.0", UNINSTALLABLE_HOOK)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(chart_repo_tls() / "tls.crt", chart_repo_tls() / "tls.key")
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    url = f"https://127.0.0.1:{server.server_address[1]}"
    helm = str(tools.binary("helm"))
    subprocess.run([helm, "repo", "index", str(served), "--url", url], check=True, capture_output=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()


def _apply(management: LocalCluster, namespace: str, document: dict[str, Any]) -> None:
    management.kubectl("apply", "-n", namespace, "-f", "-", input_text=json.dumps(document))


def _colony(repo: str, target: str, dependencies: list[tuple[str, str, str]]) -> dict[str, Any]:
    return {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "Colony",
        "metadata": {"name": "onprem"},
        "spec": {
            "k8sVersion": "v1.36.3",
            "colonyClusters": [
                {"clusterName": "onprem", "existing": {"kubeconfigSecretRef": {"name": "onprem-kubeconfig"}}}
            ],
            "additionalDependencies": [
                {
                    "name": name,
                    "spec": {
                        "repoURL": repo,
                        "chartName": chart,
                        "version": version,
                        "releaseName": name,
                        "namespace": target,
                        "valuesTemplate": "greeting: bonjour\n",
                        "options": {"wait": True, "timeout": "60s"},
                    },
                }
                for name, chart, version in dependencies
            ],
        },
    }


def _addons(management: LocalCluster, namespace: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    status = management.get_json("colony", "onprem", "-n", namespace).get("status") or {}
    condition = next((c for c in status.get("conditions", []) if c["type"] == "AddonsReady"), {})
    return condition, status.get("addons", [])


def _configmap(cluster: LocalCluster, namespace: str, name: str) -> dict[str, Any] | None:
    result = cluster.kubectl("get", "configmap", name, "-n", namespace, "-o", "json", check=False)
    return json.loads(result.stdout) if result.returncode == 0 else None


def _releases(tools: Tools, cluster: LocalCluster) -> list[dict[str, Any]]:
    out = subprocess.run(
        [
            str(tools.binary("helm")),
            "list",
            "-A",
            "-a",
            "-o",
            "json",
            f"--kubeconfig={cluster.kubeconfig_path}",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    releases: list[dict[str, Any]] = json.loads(out)
    return releases


def test_existing_cluster_addons_install_upgrade_and_uninstall(
    tools: Tools,
    management: LocalCluster,
    colony_cluster: LocalCluster,
    namespace: str,
    operator_process: ManagedProcess,
    chart_repo: str,
) -> None:
    target = f"addons-{uuid.uuid4().hex[:6]}"
    kubeconfig = base64.b64encode(colony_cluster.kubeconfig().encode()).decode()
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "onprem-kubeconfig"}}
    _apply(management, namespace, {**secret, "data": {"value": kubeconfig}})
    # A release somebody else installed on that cluster: the operator must never touch it.
    helm = str(tools.binary("helm"))
    manual = [helm, "install", "manual", "demo", "--repo", chart_repo, "--version", "0.1.0", "-n", target]
    manual.append(f"--ca-file={chart_repo_tls() / 'ca.crt'}")
    subprocess.run(
        [*manual, "--create-namespace", f"--kubeconfig={colony_cluster.kubeconfig_path}"],
        check=True,
        capture_output=True,
    )
    deps = [("demo", "demo", "0.1.0"), ("extra", "demo", "0.1.0"), ("evil", "../../etc", "0.1.0")]
    _apply(management, namespace, _colony(chart_repo, target, deps))

    # Installed: the release's objects exist in the colony cluster with the colony's values; the
    # hostile chart name is refused with a reason, never handed to helm.
    installed = eventually(lambda: _configmap(colony_cluster, target, "demo-settings"), 90)
    assert installed["data"] == {"chartVersion": "0.1.0", "greeting": "bonjour"}
    eventually(lambda: _configmap(colony_cluster, target, "extra-settings"), 60)

    def reported() -> list[dict[str, Any]] | None:
        _, addons = _addons(management, namespace)
        ready = {a["name"]: a["ready"] for a in addons}
        return addons if ready == {"demo": True, "extra": True, "evil": False} else None

    addons = eventually(reported, 60)
    evil = next(a for a in addons if a["name"] == "evil")
    assert "chartName" in evil["message"] and "../../etc" in evil["message"]
    condition, _ = _addons(management, namespace)
    assert condition["status"] == "False" and "evil" in condition["message"]

    # A version change upgrades the release (0.2.0 adds a Secret); a removed dependency and the
    # hostile one are gone, and AddonsReady turns True.
    _apply(management, namespace, _colony(chart_repo, target, [("demo", "demo", "0.2.0")]))
    eventually(
        lambda: (
            (_configmap(colony_cluster, target, "demo-settings") or {}).get("data", {}).get("chartVersion")
            == "0.2.0"
        ),
        90,
    )
    assert colony_cluster.kubectl("get", "secret", "demo-v2", "-n", target, check=False).returncode == 0
    eventually(lambda: _configmap(colony_cluster, target, "extra-settings") is None, 90)
    eventually(lambda: _addons(management, namespace)[0].get("status") == "True", 60)
    releases = {r["name"]: r for r in _releases(tools, colony_cluster) if r["namespace"] == target}
    assert set(releases) == {"demo", "manual"}
    assert (releases["demo"]["chart"], releases["demo"]["status"]) == ("demo-0.2.0", "deployed")
    assert int(releases["demo"]["revision"]) == 2

    # Deleting the colony uninstalls what the operator installed before the finalizer goes.
    management.kubectl("delete", "colony", "onprem", "-n", namespace, "--wait=true", "--timeout=120s")
    assert _configmap(colony_cluster, target, "demo-settings") is None
    assert [r["name"] for r in _releases(tools, colony_cluster) if r["namespace"] == target] == ["manual"]
    assert _configmap(colony_cluster, target, "manual-settings") is not None


def test_an_addon_that_cannot_be_uninstalled_is_abandoned_and_the_colony_deletion_ends(
    tools: Tools,
    management: LocalCluster,
    colony_cluster: LocalCluster,
    namespace: str,
    operator_process: ManagedProcess,
    chart_repo: str,
) -> None:
    """Issue 17, point 6: a release whose uninstall keeps failing (its pre-delete hook cannot be
    built) is tried a bounded number of times; then a CleanupAbandoned Event names it, with helm's
    message, and the Colony's finalizer goes."""
    target = f"addons-{uuid.uuid4().hex[:6]}"
    kubeconfig = base64.b64encode(colony_cluster.kubeconfig().encode()).decode()
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "onprem-kubeconfig"}}
    _apply(management, namespace, {**secret, "data": {"value": kubeconfig}})
    _apply(management, namespace, _colony(chart_repo, target, [("stuck", "demo", "0.3.0")]))
    eventually(lambda: _configmap(colony_cluster, target, "stuck-settings"), 90)
    eventually(lambda: _addons(management, namespace)[0].get("status") == "True", 60)

    management.kubectl("delete", "colony", "onprem", "-n", namespace, "--wait=true", "--timeout=120s")

    def abandoned() -> list[dict[str, Any]]:
        found = management.get_json("events", "-n", namespace)["items"]
        return [e for e in found if e.get("reason") == "CleanupAbandoned"]

    (event,) = eventually(abandoned, 20)
    assert f"HelmRelease/onprem/{target}/stuck" in event["message"], event["message"]
    assert "after 3 tries" in event["message"], event["message"]
    # Left behind, as the Event says: removed here by hand, without its hook.
    helm = str(tools.binary("helm"))
    assert "stuck" in [r["name"] for r in _releases(tools, colony_cluster) if r["namespace"] == target]
    subprocess.run(
        [
            helm,
            "uninstall",
            "stuck",
            "-n",
            target,
            "--no-hooks",
            f"--kubeconfig={colony_cluster.kubeconfig_path}",
        ],
        check=True,
        capture_output=True,
    )
