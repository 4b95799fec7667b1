"""Fake GPU nodes: GPU capacity, real scheduling by kube-scheduler, pod phases driven by kwok."""

from __future__ import annotations

import json
from typing import Any

from colony.devenv.cluster import LocalCluster
from colony.devenv.kwok import EXIT_CODE_ANNOTATION, OUTCOME_ANNOTATION
from tests.integration.conftest import eventually


def _pod(name: str, gpus: int, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
            "containers": [
                {
                    "name": "worker",
                    "image": "pytorch/pytorch:latest",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ],
        },
    }


def _create(cluster: LocalCluster, namespace: str, pod: dict[str, Any]) -> None:
    cluster.kubectl("create", "-n", namespace, "-f", "-", input_text=json.dumps(pod))


def _phase(cluster: LocalCluster, namespace: str, name: str) -> str:
    return str(cluster.get_json("pod", name, "-n", namespace)["status"].get("phase"))


def test_nodes_have_gpu_capacity_and_product_labels(colony_cluster: LocalCluster) -> None:
    nodes = colony_cluster.get_json("nodes")["items"]
    products = {n["metadata"]["labels"]["nvidia.com/gpu.product"] for n in nodes}
    assert products == {"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"}
    for node in nodes:
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True"


def test_gpu_pod_is_scheduled_and_runs(colony_cluster: LocalCluster) -> None:
    namespace = "kwok-run"
    colony_cluster.kubectl("create", "namespace", namespace)
    _create(colony_cluster, namespace, _pod("fits", gpus=4))
    eventually(lambda: _phase(colony_cluster, namespace, "fits") == "Running", 30)
    pod = colony_cluster.get_json("pod", "fits", "-n", namespace)
    assert pod["spec"]["nodeName"].startswith("a100-")


def test_pod_asking_more_gpus_than_a_node_has_stays_pending(colony_cluster: LocalCluster) -> None:
    namespace = "kwok-pending"
    colony_cluster.kubectl("create", "namespace", namespace)
    _create(colony_cluster, namespace, _pod("too-big", gpus=9))

    def unschedulable() -> bool:
        conditions = colony_cluster.get_json("pod", "too-big", "-n", namespace)["status"].get(
            "conditions", []
        )
        return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions)

    eventually(unschedulable, 30)
    assert _phase(colony_cluster, namespace, "too-big") == "Pending"


def test_simulated_outcomes(colony_cluster: LocalCluster) -> None:
    namespace = "kwok-outcome"
    colony_cluster.kubectl("create", "namespace", namespace)
    _create(colony_cluster, namespace, _pod("ok", 1, {OUTCOME_ANNOTATION: "Succeeded"}))
    _create(
        colony_cluster, namespace, _pod("boom", 1, {OUTCOME_ANNOTATION: "Failed", EXIT_CODE_ANNOTATION: "3"})
    )
    eventually(lambda: _phase(colony_cluster, namespace, "ok") == "Succeeded", 30)
    eventually(lambda: _phase(colony_cluster, namespace, "boom") == "Failed", 30)
    failed = colony_cluster.get_json("pod", "boom", "-n", namespace)
    assert failed["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3
