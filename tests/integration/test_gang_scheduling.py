"""Volcano's scheduler, built from source, gang-schedules for real: all of a PodGroup or nothing."""

from __future__ import annotations

import json
from typing import Any

from colony.devenv.cluster import LocalCluster
from tests.integration.conftest import eventually


def _gang(cluster: LocalCluster, namespace: str, name: str, members: int, gpus: int) -> None:
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": members, "queue": "default"},
    }
    pods: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{i}",
                "namespace": namespace,
                "annotations": {"scheduling.k8s.io/group-name": name},
            },
            "spec": {
                "schedulerName": "volcano",
                "restartPolicy": "Never",
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
                "containers": [
                    {"name": "w", "image": "trainer", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
                ],
            },
        }
        for i in range(members)
    ]
    cluster.kubectl(
        "create",
        "-f",
        "-",
        input_text=json.dumps({"apiVersion": "v1", "kind": "List", "items": [group, *pods]}),
    )


def _bound(cluster: LocalCluster, namespace: str, name: str) -> list[str]:
    pods = cluster.get_json("pods", "-n", namespace)["items"]
    return [
        p["metadata"]["name"]
        for p in pods
        if p["metadata"]["name"].startswith(f"{name}-") and p["spec"].get("nodeName")
    ]


def test_a_gang_that_cannot_fit_whole_gets_no_pod_at_all(colony_cluster: LocalCluster) -> None:
    namespace = "gang"
    colony_cluster.kubectl("create", "namespace", namespace)
    # Two A100 nodes with 8 GPUs each: three 6-GPU workers can never all run, two could.
    _gang(colony_cluster, namespace, "too-big", members=3, gpus=6)
    _gang(colony_cluster, namespace, "fits", members=2, gpus=2)

    eventually(lambda: len(_bound(colony_cluster, namespace, "fits")) == 2, 30)

    def unschedulable() -> bool:
        group = colony_cluster.get_json("podgroup", "too-big", "-n", namespace)
        conditions = (group.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Unschedulable" and c.get("status") == "True" for c in conditions)

    eventually(unschedulable, 30)
    assert _bound(colony_cluster, namespace, "too-big") == []  # no partial gang
