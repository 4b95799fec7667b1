"""The Colony controller against a real API server, with the harness playing Cluster API."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import yaml

from colony.controllers.colony_children import CAPI_CLUSTER, CLUSTER_PARTS, HELM_CHART_PROXY
from colony.devenv.capi_harness import CapiHarness
from colony.devenv.cluster import LocalCluster
from colony.devenv.process import ManagedProcess
from colony.labels import COLONY_LABEL
from tests.integration.conftest import EXAMPLES, eventually

COLONY_GPUS = 24  # colony_cluster: 2 nodes x 8 A100 + 1 node x 8 H100


def _example(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return document


def _apply(management: LocalCluster, namespace: str, document: dict[str, Any]) -> None:
    management.kubectl("apply", "-n", namespace, "-f", "-", input_text=json.dumps(document))


def _colony(management: LocalCluster, namespace: str, name: str) -> dict[str, Any]:
    colony: dict[str, Any] = management.get_json("colony", name, "-n", namespace)
    return colony


def _phase_is(management: LocalCluster, namespace: str, name: str, phase: str) -> dict[str, Any] | None:
    colony = _colony(management, namespace, name)
    return colony if (colony.get("status") or {}).get("phase") == phase else None


def _owned(management: LocalCluster, namespace: str, colony: str) -> dict[str, list[str]]:
    """Every object labelled for the colony, by kind."""
    found: dict[str, list[str]] = {}
    for api_version, kind in (CAPI_CLUSTER, HELM_CHART_PROXY, *CLUSTER_PARTS):
        resource = f"{kind.lower()}.{api_version.split('/')[0]}"
        items = management.get_json(resource, "-n", namespace, "-l", f"{COLONY_LABEL}={colony}")["items"]
        if items:
            found[kind] = sorted(i["metadata"]["name"] for i in items)
    return found


def test_docker_colony_provisions_scales_prunes_and_deletes(
    management: LocalCluster, namespace: str, capi: CapiHarness, operator_process: ManagedProcess
) -> None:
    colony = _example("colony-docker-ray.yaml")
    name = colony["metadata"]["name"]
    capi.hold(namespace, f"{name}-docker-1", phase="Pending")
    _apply(management, namespace, colony)

    pending = eventually(lambda: _phase_is(management, namespace, name, "Pending"), 60)
    assert pending["status"]["clusters"][0]["phase"] == "Pending"
    capi.hold(namespace, f"{name}-docker-1", phase="Provisioning")
    provisioning = eventually(lambda: _phase_is(management, namespace, name, "Provisioning"), 30)
    assert provisioning["status"]["readyClusters"] == 0
    owned = _owned(management, namespace, name)
    assert owned["Cluster"] == [f"{name}-docker-1"]
    assert owned["K0smotronControlPlane"] and owned["DockerCluster"] and owned["MachineDeployment"]
    assert len(owned["HelmChartProxy"]) == 2  # volcano-sh + kuberay

    capi.release(namespace, f"{name}-docker-1")
    ready = eventually(lambda: _phase_is(management, namespace, name, "Ready"), 30)
    status = ready["status"]
    assert (status["readyClusters"], status["totalClusters"], status["gpus"]) == (1, 1, COLONY_GPUS)
    (cluster,) = status["clusters"]
    assert cluster["readyNodes"] == 3
    assert {g["product"]: g["capacity"] for g in cluster["gpus"]} == {
        "NVIDIA-A100-SXM4-80GB": 16,
        "NVIDIA-H100-80GB-HBM3": 8,
    }
    hosted = cluster["hostedControlPlane"]
    assert hosted["apiPort"] != hosted["konnectivityPort"]

    def addons_ready() -> bool:
        current = _colony(management, namespace, name)["status"]
        return all(a["ready"] for a in current["addons"]) and len(current["addons"]) == 2

    eventually(addons_ready, 30)
    events = management.get_json("events", "-n", namespace, "--field-selector", f"involvedObject.name={name}")
    # creationTimestamp has whole seconds; the resourceVersion orders writes within one second.
    reasons = [
        e["reason"] for e in sorted(events["items"], key=lambda e: int(e["metadata"]["resourceVersion"]))
    ]
    phases = [r for r in reasons if r in ("ColonyPending", "ColonyProvisioning", "ColonyReady")]
    first_seen = list(dict.fromkeys(phases))  # concurrent handlers may post the same change twice
    assert first_seen == ["ColonyPending", "ColonyProvisioning", "ColonyReady"], reasons
    row = management.kubectl("get", "colonies", "-n", namespace, "--no-headers").stdout.split()
    assert row[:5] == [name, "Ready", "1", "1", str(COLONY_GPUS)]

    # Scale 2 -> 3 and add a second cluster: server-side apply updates and creates.
    colony["spec"]["colonyClusters"][0]["docker"]["replicas"] = 3
    colony["spec"]["colonyClusters"].append({"clusterName": "docker-2", "docker": {"replicas": 1}})
    _apply(management, namespace, colony)

    def scaled() -> bool:
        md = management.get_json("machinedeployment.cluster.x-k8s.io", f"{name}-docker-1-md", "-n", namespace)
        return bool(md["spec"]["replicas"] == 3)

    eventually(scaled, 30)
    eventually(
        lambda: (
            (_phase_is(management, namespace, name, "Ready") or {}).get("status", {}).get("readyClusters")
            == 2
        ),
        30,
    )
    assert _colony(management, namespace, name)["status"]["clusters"][0]["hostedControlPlane"] == hosted

    # Remove the second cluster: its Cluster and parts are deleted, the first is untouched.
    colony["spec"]["colonyClusters"].pop()
    _apply(management, namespace, colony)
    eventually(lambda: _owned(management, namespace, name).get("Cluster") == [f"{name}-docker-1"], 30)
    eventually(
        lambda: (
            not any("docker-2" in n for names in _owned(management, namespace, name).values() for n in names)
        ),
        30,
    )

    # Delete the colony: nothing is left behind.
    management.kubectl("delete", "colony", name, "-n", namespace, "--wait=false")
    eventually(
        lambda: management.kubectl("get", "colony", name, "-n", namespace, check=False).returncode != 0, 60
    )
    assert _owned(management, namespace, name) == {}
    secrets = management.get_json("secrets", "-n", namespace)["items"]
    assert not [s for s in secrets if s["metadata"]["name"].endswith("-kubeconfig")]


def test_failed_cluster_degrades_the_colony_with_a_reason(
    management: LocalCluster, namespace: str, capi: CapiHarness, operator_process: ManagedProcess
) -> None:
    colony = _example("colony-aws.yaml")
    colony["spec"]["colonyClusters"].append({"clusterName": "local", "docker": {"replicas": 1}})
    name = colony["metadata"]["name"]
    capi.fail(namespace, f"{name}-aws-cluster", "VcpuLimitExceeded: vCPU quota of 0 for G instances")
    _apply(management, namespace, colony)
    degraded = eventually(lambda: _phase_is(management, namespace, name, "Degraded"), 30)
    clusters = {c["name"]: c for c in degraded["status"]["clusters"]}
    assert clusters["aws-cluster"]["phase"] == "Failed"
    assert "VcpuLimitExceeded" in clusters["aws-cluster"]["message"]
    eventually(
        lambda: (
            {c["name"]: c["phase"] for c in _colony(management, namespace, name)["status"]["clusters"]}[
                "local"
            ]
            == "Ready"
        ),
        30,
    )
    condition = next(
        c
        for c in _colony(management, namespace, name)["status"]["conditions"]
        if c["type"] == "ClustersReady"
    )
    assert condition["status"] == "False" and condition["reason"] == "ClusterFailed"
    assert "aws-cluster" in condition["message"]
    events = management.kubectl(
        "get", "events", "-n", namespace, "--field-selector", f"involvedObject.name={name}"
    ).stdout
    assert "ColonyDegraded" in events


def test_a_refused_instance_profile_keeps_the_running_cluster(
    management: LocalCluster, namespace: str, capi: CapiHarness, operator_process: ManagedProcess
) -> None:
    """An edit to an instance profile the admin does not allow is not applied, and the running
    cluster is kept as it is (no teardown, no surprise loss of a tenant's nodes): the colony says why."""
    colony = _example("colony-aws.yaml")
    name = colony["metadata"]["name"]
    _apply(management, namespace, colony)
    eventually(lambda: _owned(management, namespace, name).get("Cluster") == [f"{name}-aws-cluster"], 30)
    parts_before = _owned(management, namespace, name)

    colony["spec"]["colonyClusters"][0]["aws"]["iamInstanceProfile"] = "admin"
    _apply(management, namespace, colony)

    def refused() -> dict[str, Any] | None:
        (cluster,) = _colony(management, namespace, name)["status"].get("clusters", [{}])
        return cluster if "is not allowed" in cluster.get("message", "") else None

    cluster = eventually(refused, 30)
    assert cluster["phase"] == "Failed" and "'admin'" in cluster["message"]
    time.sleep(3)  # a few more passes: still nothing pruned
    assert _owned(management, namespace, name) == parts_before
    live = management.get_json("cluster.cluster.x-k8s.io", f"{name}-aws-cluster", "-n", namespace)
    assert not live["metadata"].get("deletionTimestamp")
    templates = management.get_json("awsmachinetemplate.infrastructure.cluster.x-k8s.io", "-n", namespace)
    profiles = {t["spec"]["template"]["spec"]["iamInstanceProfile"] for t in templates["items"]}
    assert profiles == {"nodes.cluster-api-provider-aws.sigs.k8s.io"}  # the refused value never applied


def _kubeconfig_secret(management: LocalCluster, namespace: str, name: str, content: str) -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "data": {"value": base64.b64encode(content.encode()).decode()},
    }
    _apply(management, namespace, secret)


def _existing_colony(name: str, secret: str) -> dict[str, Any]:
    return {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "Colony",
        "metadata": {"name": name},
        "spec": {
            "k8sVersion": "v1.36.3",
            "colonyClusters": [
                {"clusterName": "onprem", "existing": {"kubeconfigSecretRef": {"name": secret}}}
            ],
        },
    }


def test_existing_clusters_ready_or_clearly_broken(
    management: LocalCluster, colony_cluster: LocalCluster, namespace: str, operator_process: ManagedProcess
) -> None:
    _kubeconfig_secret(management, namespace, "good-kubeconfig", colony_cluster.kubeconfig())
    _kubeconfig_secret(management, namespace, "bad-kubeconfig", "this: is: not a kubeconfig")
    _apply(management, namespace, _existing_colony("broken", "bad-kubeconfig"))
    _apply(management, namespace, _existing_colony("registered", "good-kubeconfig"))

    ready = eventually(lambda: _phase_is(management, namespace, "registered", "Ready"), 30)
    assert ready["status"]["gpus"] == COLONY_GPUS
    assert _owned(management, namespace, "registered") == {}  # no Cluster API objects

    broken = eventually(lambda: _phase_is(management, namespace, "broken", "Degraded"), 30)
    (cluster,) = broken["status"]["clusters"]
    assert cluster["phase"] == "Unreachable"
    assert "bad-kubeconfig" in cluster["message"] and "invalid" in cluster["message"]

    # A missing Secret is named too, and the operator keeps serving the healthy colony.
    _apply(management, namespace, _existing_colony("orphan", "no-such-secret"))
    orphan = eventually(lambda: _phase_is(management, namespace, "orphan", "Degraded"), 30)
    assert "does not exist" in orphan["status"]["clusters"][0]["message"]
    assert _phase_is(management, namespace, "registered", "Ready")


def test_unknown_dependency_is_a_condition_not_a_crash(
    management: LocalCluster, namespace: str, capi: CapiHarness, operator_process: ManagedProcess
) -> None:
    colony = _example("colony-docker-ray.yaml")
    colony["metadata"]["name"] = "typo"
    colony["spec"]["workloadDependencies"] = [{"name": "volcano-sh"}, {"name": "nvidia-operatr"}]
    _apply(management, namespace, colony)

    def unresolved() -> dict[str, Any] | None:
        conditions = (_colony(management, namespace, "typo").get("status") or {}).get("conditions", [])
        return next(
            (c for c in conditions if c["type"] == "DependenciesResolved" and c["status"] == "False"), None
        )

    condition = eventually(unresolved, 30)
    assert "nvidia-operatr" in condition["message"]
    eventually(lambda: _phase_is(management, namespace, "typo", "Ready"), 30)
    assert operator_process.running()
