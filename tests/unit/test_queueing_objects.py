"""Kubernetes objects -> scheduler inputs: durations, requests, queues, node capacity."""

from __future__ import annotations

from typing import Any

import pytest

from colony.scheduling.queueing.objects import (
    gpu_nodes,
    gpu_request,
    listed_colonies,
    parse_duration,
    queue_quota,
    queues_by_namespace,
    reservation_label,
    running_request,
)


def _gpr(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "r", "namespace": "team", "creationTimestamp": "2026-12-02T10:00:00Z"},
        "spec": {
            "gpuShapes": ["a100 80gb", "H100"],
            "numberOfGPUNodes": 2,
            "numberOfGPUs": 4,
            "priority": 150,
            "exitDuration": "1h30m",
            "enableEviction": True,
        },
        "status": status,
    }


def _node(name: str, gpus: int, product: str = "NVIDIA-A100-SXM4-80GB", **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": product, **labels}},
        "status": {
            "allocatable": {"nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def test_durations() -> None:
    assert parse_duration("1d2h3m4s") == 93784
    assert parse_duration("90s") == 90 and parse_duration(None) is None
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("soon")


def test_a_gpr_becomes_a_request_with_normalised_types() -> None:
    request = gpu_request(_gpr(), "q", frozenset({"team/pool"}))
    assert request.key == "team/r" and request.gpu_types == ("A100-80GB", "H100")
    assert (request.nodes, request.gpus_per_node, request.gpus) == (2, 4, 8)
    assert request.duration_s == 5400 and request.evictable and request.priority == 150
    assert request.submitted_s == 1796205600.0 and request.colonies == frozenset({"team/pool"})


def test_only_recorded_allocations_count_as_running() -> None:
    assert running_request(_gpr(phase="Queued"), "q") is None
    status = {
        "phase": "Ready",
        "colony": "team/pool",
        "gpuType": "H100",
        "admittedAt": "2026-12-02T10:05:00Z",
        "nodes": [{"cluster": "c", "node": "n1", "gpus": 4}, {"cluster": "c", "node": "n2", "gpus": 4}],
    }
    running = running_request(_gpr(**status), "q")
    assert running is not None
    assert running.placement.colony == "team/pool" and [a.node for a in running.placement.nodes] == [
        "c/n1",
        "c/n2",
    ]


def test_queues_and_namespace_mapping() -> None:
    queue = {
        "metadata": {"name": "a"},
        "spec": {
            "namespaces": ["team"],
            "cohort": "co",
            "quotas": [
                {"gpuType": "a100-80gb", "nominal": 8, "borrowingLimit": 4},
                {"gpuType": "*", "nominal": 16},
            ],
            "fairSharingWeight": 2,
        },
    }
    quota = queue_quota(queue)
    assert quota.nominal == {"A100-80GB": 8, "*": 16} and quota.borrowing_limit == {"A100-80GB": 4}
    assert quota.cohort == "co" and quota.weight == 2.0 and quota.strategy == ""
    shortest = {**queue, "spec": {**queue["spec"], "queueingStrategy": "ShortestFirst"}}
    fifo = {**queue, "spec": {**queue["spec"], "queueingStrategy": "BestEffortFIFO"}}
    assert (queue_quota(shortest).strategy, queue_quota(fifo).strategy) == ("shortest", "fifo")
    other = {"metadata": {"name": "b"}, "spec": {"namespaces": ["team", "x"], "quotas": []}}
    assert queues_by_namespace([other, queue]) == {"team": "a", "x": "b"}


def test_node_capacity_subtracts_foreign_pods_and_unknown_reservations() -> None:
    mine, theirs = reservation_label("team/r"), reservation_label("other/q")
    nodes = [
        _node("n1", 8, **{mine: "4"}),
        _node("n2", 8, **{theirs: "6"}),
        _node("n3", 8, product="NVIDIA-H100-80GB-HBM3"),
        {**_node("n4", 8), "spec": {"unschedulable": True}},
    ]
    pods = [
        {
            "spec": {"nodeName": "n3", "containers": [{"resources": {"limits": {"nvidia.com/gpu": "3"}}}]},
            "status": {"phase": "Running"},
        },
        {
            "spec": {
                "nodeName": "n1",
                "nodeSelector": {mine: "4"},
                "containers": [{"resources": {"limits": {"nvidia.com/gpu": "4"}}}],
            },
            "status": {"phase": "Running"},
        },
        {
            "spec": {"nodeName": "n3", "containers": [{"resources": {"limits": {"nvidia.com/gpu": "5"}}}]},
            "status": {"phase": "Succeeded"},
        },
    ]
    found = {n.name: (n.gpu_type, n.capacity) for n in gpu_nodes("team/pool", "c", nodes, pods, {mine})}
    assert found == {"c/n1": ("A100-80GB", 8), "c/n2": ("A100-80GB", 2), "c/n3": ("H100", 5)}


def test_listed_colonies_become_keys_and_with_fill_and_spill_the_requests_own_order() -> None:
    gpr = _gpr()
    assert listed_colonies(gpr) is None
    assert gpu_request(gpr, "q", None).colony_order == ()
    gpr["spec"]["colonies"] = ["onprem", "shared/cloud", "onprem"]
    assert listed_colonies(gpr) == ("team/onprem", "shared/cloud")
    assert gpu_request(gpr, "q", None).colony_order == ()  # an allow list only
    gpr["spec"]["fillAndSpill"] = True
    assert gpu_request(gpr, "q", None).colony_order == ("team/onprem", "shared/cloud")
    gpr["spec"]["colonies"] = []
    assert listed_colonies(gpr) == ()


def test_a_star_among_the_gpu_shapes_accepts_any_type() -> None:
    gpr = _gpr()
    gpr["spec"]["gpuShapes"] = ["*"]
    assert gpu_request(gpr, "q", None).gpu_types == ()
