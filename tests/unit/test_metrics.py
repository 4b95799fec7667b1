"""Operator metrics: handler instrumentation, queue and GPU series (and their removal), teardown
latency, and the GPU inventory the scheduling loop exports."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, cast

import kopf
import pytest
from prometheus_client import REGISTRY

from colony import events, metrics
from colony.controllers.gpr.report import gpu_inventory
from colony.controllers.gpr.world import ClusterView
from colony.scheduling.queueing.model import GpuNode, GpuRequest, NodeAllocation, Placement, RunningRequest


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_instrument_counts_results_and_latency_of_sync_and_async_handlers() -> None:
    labels = {"kind": "Thing", "handler": "unit_handler"}

    def ok(**_: Any) -> str:
        return "done"

    async def waiting(**_: Any) -> None:
        raise kopf.TemporaryError("not yet", delay=1)

    def broken(**_: Any) -> None:
        raise ValueError("bad")

    before = {r: _value("colony_reconcile_total", **labels, result=r) for r in ("success", "retry", "error")}
    runs = _value("colony_reconcile_duration_seconds_count", **labels)
    assert metrics.instrument(ok, "Thing", "unit_handler")(spec={}) == "done"
    with pytest.raises(ValueError):
        metrics.instrument(broken, "Thing", "unit_handler")()
    wrapped = metrics.instrument(waiting, "Thing", "unit_handler")
    assert metrics.instrument(wrapped, "Thing", "unit_handler") is wrapped  # never wrapped twice
    assert inspect.iscoroutinefunction(wrapped)
    with pytest.raises(kopf.TemporaryError):
        asyncio.run(wrapped())
    for result in ("success", "retry", "error"):
        assert _value("colony_reconcile_total", **labels, result=result) == before[result] + 1
    assert _value("colony_reconcile_errors_total", **labels, exception="ValueError") >= 1
    assert _value("colony_reconcile_duration_seconds_count", **labels) == runs + 3


def test_instrument_handlers_wraps_every_resource_handler_of_a_registry_once() -> None:
    registry = kopf.OperatorRegistry()

    @kopf.on.startup(registry=registry)
    def startup(**_: Any) -> None: ...

    @kopf.on.create("example.com", "v1", "widgets", registry=registry)
    @kopf.on.update("example.com", "v1", "widgets", registry=registry)
    def reconcile_widget(**_: Any) -> None: ...

    @kopf.timer("example.com", "v1", "widgets", interval=1, registry=registry)
    async def tick_widget(**_: Any) -> None: ...

    assert metrics.instrument_handlers(registry, {"widgets": "Widget"}) == 3
    assert metrics.instrument_handlers(registry, {"widgets": "Widget"}) == 0
    changing = registry._changing.get_all_handlers()
    assert len({id(h.fn) for h in changing}) == 1  # create and update share one wrapper
    before = _value("colony_reconcile_total", kind="Widget", handler="reconcile_widget", result="success")
    next(iter(changing)).fn()
    after = _value("colony_reconcile_total", kind="Widget", handler="reconcile_widget", result="success")
    assert after == before + 1
    # operator activities (startup, cleanup) are not reconciles
    assert any(h.fn is startup for h in registry._activities.get_all_handlers())


def test_the_operators_handlers_are_instrumented_with_their_kinds() -> None:
    import colony.controllers  # noqa: F401 - registers and instruments the handlers

    registry = kopf.get_default_registry()
    handlers = [
        h
        for sub in (registry._changing, registry._spawning, registry._watching)
        for h in sub.get_all_handlers()
    ]
    assert handlers and all(getattr(h.fn, "__colony_instrumented__", False) for h in handlers)
    assert {h.fn.__name__ for h in handlers} >= {"reconcile_colony", "track_ddpjob"}


def test_queue_series_follow_the_queues_and_are_removed_with_them() -> None:
    metrics.record_queues(
        {
            "team-a": metrics.QueueStats(pending=3, admitted=1, waits=(10.0, 30.0, 20.0)),
            "namespace:ns": metrics.QueueStats(pending=1, admitted=0, waits=()),
        }
    )
    assert _value("colony_queue_pending_requests", queue="team-a") == 3
    assert _value("colony_queue_admitted_requests", queue="team-a") == 1
    assert _value("colony_queue_estimated_wait_median_seconds", queue="team-a") == 20
    assert _value("colony_queue_estimated_wait_max_seconds", queue="team-a") == 30
    assert _value("colony_queue_estimated_wait_max_seconds", queue="namespace:ns") == 0
    metrics.record_queues({"team-a": metrics.QueueStats()})
    assert REGISTRY.get_sample_value("colony_queue_pending_requests", {"queue": "namespace:ns"}) is None
    assert _value("colony_queue_pending_requests", queue="team-a") == 0
    metrics.record_queues({})


def test_gpu_series_are_removed_for_colonies_not_read_or_deleted() -> None:
    metrics.record_gpus({("ns", "a", "H100"): (6, 2), ("ns", "b", "A100-80GB"): (0, 16)})
    assert _value("colony_gpus_allocated", namespace="ns", colony="a", gpu_type="H100") == 6
    assert _value("colony_gpus_free", namespace="ns", colony="b", gpu_type="A100-80GB") == 16
    metrics.record_gpus({("ns", "a", "H100"): (8, 0)})
    assert (
        REGISTRY.get_sample_value(
            "colony_gpus_free", {"namespace": "ns", "colony": "b", "gpu_type": "A100-80GB"}
        )
        is None
    )
    metrics.record_colony_cost("ns", "a", {"pricePerHour": 4.0, "costAccrued": 1.5})
    metrics.forget_colony("ns", "a")
    for name in ("colony_gpus_allocated", "colony_gpus_free"):
        assert REGISTRY.get_sample_value(name, {"namespace": "ns", "colony": "a", "gpu_type": "H100"}) is None
    assert REGISTRY.get_sample_value("colony_cost_accrued_usd", {"namespace": "ns", "colony": "a"}) is None


def test_teardown_latency_has_both_triggers_and_counts_observations() -> None:
    before = _value("colony_teardown_latency_seconds_count", trigger="job")
    metrics.observe_teardown("job", 3.2)
    metrics.observe_teardown("job", -1)  # clock skew: counted as 0
    assert _value("colony_teardown_latency_seconds_count", trigger="job") == before + 2
    assert _value("colony_teardown_latency_seconds_bucket", trigger="job", le="5.0") >= before + 2
    assert REGISTRY.get_sample_value("colony_teardown_latency_seconds_count", {"trigger": "gpr"}) is not None


def _node(name: str, product: str, gpus: int, ready: bool = True, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": product}},
        "spec": spec,
        "status": {
            "allocatable": {"nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_gpu_inventory_counts_allocated_and_free_per_colony_and_type() -> None:
    nodes = [
        _node("h1", "NVIDIA-H100-80GB-HBM3", 8),
        _node("a1", "NVIDIA-A100-SXM4-80GB", 8),
        _node("a2", "NVIDIA-A100-SXM4-80GB", 8, ready=False),
        _node("a3", "NVIDIA-A100-SXM4-80GB", 8, unschedulable=True),
    ]
    view = ClusterView("ns/pool", "c", cast(Any, None), nodes, [])
    # What the scheduler may give out: H100 node minus 2 GPUs held by a foreign pod; A100 node whole.
    capacity = [GpuNode("ns/pool", "c/h1", "H100", 6), GpuNode("ns/pool", "c/a1", "A100-80GB", 8)]
    request = GpuRequest("ns/r", "q", 0, 0.0, ("H100",), 1, 4)
    running = [
        RunningRequest(request, Placement("ns/pool", "H100", (NodeAllocation("c/h1", 4),)), 0.0),
        RunningRequest(request, Placement("ns/other", "H100", (NodeAllocation("x/y", 8),)), 0.0),
    ]
    assert gpu_inventory([view], capacity, running) == {
        ("ns/pool", "H100"): (6, 2),
        ("ns/pool", "A100-80GB"): (0, 8),
    }


def test_event_messages_are_scrubbed_and_bounded() -> None:
    assert events.clean("login failed: token=abc123, password: hunter2") == (
        "login failed: token=<redacted>, password: <redacted>"
    )
    assert events.clean("Authorization: Bearer xyz") == "Authorization: Bearer <redacted>"
    assert events.clean("moved into Secret job-wandb") == "moved into Secret job-wandb"
    long = events.clean("x" * 5000)
    assert len(long) == events.MAX_MESSAGE and long.endswith("...")


class _FakeKube:
    """Records deletions and created Events."""

    def __init__(self) -> None:
        self.deleted: list[str] = []
        self.created: list[dict[str, Any]] = []

    async def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        self.deleted.append(name)
        return True

    async def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        self.created.append(manifest)
        return manifest


def test_gpr_release_tears_down_its_colony_once_and_observes_the_latency() -> None:
    import time

    from colony.controllers.context import OperatorContext, OperatorSettings
    from colony.controllers.gpr.release import teardown_if_unused
    from colony.controllers.gpr.world import World

    kube = _FakeKube()
    unused: Any = None
    context = OperatorContext((), OperatorSettings(), cast(Any, kube), unused, (), unused, unused)
    gpr = {
        "metadata": {"name": "burst", "namespace": "ns", "uid": "u-1"},
        "status": {"phase": "Ready", "provisionedColony": "gpr-burst", "colony": "ns/gpr-burst"},
    }
    colony: dict[str, Any] = {"metadata": {"name": "gpr-burst", "namespace": "ns"}}
    world = World(time.time(), [gpr], [], {}, {"ns/gpr-burst": colony})
    count = _value("colony_teardown_latency_seconds_count", trigger="gpr")
    total = _value("colony_teardown_latency_seconds_sum", trigger="gpr")
    asyncio.run(teardown_if_unused(context, world, gpr, released_at=time.time() - 2))
    assert kube.deleted == ["gpr-burst"]
    assert _value("colony_teardown_latency_seconds_count", trigger="gpr") == count + 1
    assert 2 <= _value("colony_teardown_latency_seconds_sum", trigger="gpr") - total < 10
    (event,) = kube.created
    assert event["reason"] == "ColonyTornDown" and event["involvedObject"]["kind"] == "GPUProvisioningRequest"
    assert _value(
        "colony_events_total", kind="GPUProvisioningRequest", reason="ColonyTornDown", type="Normal"
    )

    # Deleting the GPR later asks again for the (already deleting) colony: no second teardown counted.
    colony["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    asyncio.run(teardown_if_unused(context, world, gpr))
    assert _value("colony_teardown_latency_seconds_count", trigger="gpr") == count + 1
    assert len(kube.created) == 1
