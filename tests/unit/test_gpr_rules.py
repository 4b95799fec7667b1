"""The pure rules of the GPR scheduling loop (colony.scheduling.queueing.rules) that the loop's
write tests do not already cover: a namespace's queue, release when due, the placement order, the
Ready message and a GPUQueue's usage."""

from __future__ import annotations

from typing import Any

from colony.scheduling.queueing.model import (
    GpuRequest,
    NodeAllocation,
    Placement,
    QueueQuota,
    RunningRequest,
)
from colony.scheduling.queueing.rules import (
    NAMESPACE_QUEUE_PREFIX,
    expired,
    idle_limit,
    placement_order,
    public_queue,
    queue_name,
    queue_usage,
    ready_message,
)

QUEUES = [{"metadata": {"name": "gold"}, "spec": {"namespaces": ["team"]}}]


def test_a_namespace_no_queue_lists_gets_its_own_unless_a_queue_is_required() -> None:
    assert queue_name(QUEUES, {"team": "gold"}, "team", None, require_queue=True) == "gold"
    own = queue_name(QUEUES, {}, "solo", None, require_queue=False)
    assert own == NAMESPACE_QUEUE_PREFIX + "solo" and public_queue(own) is None
    assert queue_name(QUEUES, {}, "solo", None, require_queue=True) == "(no GPUQueue lists namespace solo)"
    assert queue_name(QUEUES, {}, "team", "gold", require_queue=True) == "gold"
    assert "lists namespace other" in queue_name(QUEUES, {}, "other", "gold", require_queue=False)
    assert public_queue("gold") == "gold"


def _running(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "r", "namespace": "team"},
        "spec": spec,
        "status": {"phase": "Ready", "admittedAt": "2026-12-05T00:00:00Z"},
    }


def test_a_request_expires_after_its_exit_duration_and_idles_only_when_ready() -> None:
    admitted = 1_796_428_800.0  # 2026-12-05T00:00:00Z
    gpr = _running(exitDuration="1h", idleTimeOutDuration="10m")
    assert expired(gpr, admitted + 3599) is None
    assert expired(gpr, admitted + 3600) == "exitDuration 1h elapsed"
    assert expired(_running(), admitted + 10**6) is None
    assert idle_limit(gpr) == 600
    gpr["status"]["phase"] = "Admitted"
    assert idle_limit(gpr) is None and idle_limit(_running()) is None


def test_placement_order_is_an_integer_annotation_or_zero() -> None:
    def colony(order: str | None) -> dict[str, Any]:
        annotations = {} if order is None else {"colony.exalsius.ai/placement-order": order}
        return {"metadata": {"annotations": annotations}}

    assert [placement_order(colony(v)) for v in ("3", "-2", "x", None)] == ["3", "-2", "0", "0"]


def test_ready_message_names_the_gpus_nodes_colony_and_label() -> None:
    status = {
        "gpusAllocated": 2,
        "gpuType": "H100",
        "nodes": [{"node": "a"}, {"node": "b"}],
        "colony": "team/pool",
        "reservationLabel": "colony.exalsius.ai/r-1",
    }
    message = ready_message(status)
    assert message.startswith("2 H100 GPU(s) reserved on 2 node(s) of colony team/pool")
    assert message.endswith("colony.exalsius.ai/r-1")


def _request(key: str, queue: str, gpus: int) -> GpuRequest:
    return GpuRequest(key, queue, priority=0, submitted_s=0.0, gpu_types=(), nodes=1, gpus_per_node=gpus)


def test_queue_usage_counts_its_requests_and_what_is_borrowed_beyond_its_quota() -> None:
    def running(key: str, queue: str, gpus: int) -> RunningRequest:
        placement = Placement("team/pool", "H100", (NodeAllocation("c/n", gpus),))
        return RunningRequest(_request(key, queue, gpus), placement, 0.0)

    quota = QueueQuota("gold", {"H100": 4})
    usage = queue_usage(
        quota,
        [running("team/a", "gold", 4), running("team/b", "gold", 2), running("other/c", "silver", 8)],
        [_request("team/d", "gold", 1), _request("other/e", "silver", 1)],
    )
    assert usage == {
        "pending": 1,
        "admitted": 2,
        "usage": [{"gpuType": "H100", "used": 6, "borrowed": 2}],
        "policy": "default",
    }
    assert queue_usage(quota, [], [], "sjf")["policy"] == "sjf"
