"""The GPR scheduling loop keeps its state on the OperatorContext it is given (one SchedulerState per
context, nothing shared between two), takes its settings from the context, and its kopf cleanup
stops everything it started: the loop, the informers, the background writes and the admissions in
flight."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import kopf
import pytest

from colony.controllers.context import OperatorContext, OperatorSettings
from colony.controllers.gpr import loop as gpr_loop
from colony.controllers.gpr import world as gpr_world
from colony.controllers.gpr.report import WRITERS
from colony.controllers.gpr.snapshot import Requests, requests, snapshot
from colony.controllers.gpr.state import wake_scheduler
from colony.controllers.gpr.world import INFORMED, World, informer_task
from colony.scheduling.queueing.rules import NAMESPACE_QUEUE_PREFIX


class _Kube:
    """A management cluster with nothing in it: every list is empty; counts the GPR lists."""

    def __init__(self) -> None:
        self.api = object()
        self.gpr_lists = 0
        self.listed = asyncio.Event()

    async def list(self, api_version: str, kind: str, *args: Any, **kw: Any) -> list[dict[str, Any]]:
        if kind == "GPUProvisioningRequest":
            self.gpr_lists += 1
            self.listed.set()
        return []


def _context(
    kube: Any = None, namespaces: tuple[str, ...] = ("team",), settings: OperatorSettings | None = None
) -> OperatorContext:
    unused: Any = None  # the loop touches no colony client, helm run or expression here
    return OperatorContext(namespaces, settings or OperatorSettings(), kube, unused, (), unused, unused)


def test_each_context_has_its_own_loop_state_and_wake_up() -> None:
    one, other = _context(), _context()
    assert one.scheduler is not other.scheduler
    one.scheduler.seen["team/r"] = {"metadata": {"name": "r", "namespace": "team"}}
    one.scheduler.deleted.append({"metadata": {"name": "gone", "namespace": "team"}})
    assert other.scheduler.seen == {} and other.scheduler.deleted == []
    assert one.scheduler.parse_cache is not other.scheduler.parse_cache
    wake_scheduler(one)
    assert one.scheduler.wakeup.is_set() and not other.scheduler.wakeup.is_set()


def test_a_pass_takes_its_policies_and_offers_from_the_context() -> None:
    settings = OperatorSettings(placement_policy="binpack", queue_policy="shortest", queue_aging_s=60.0)
    core_input = snapshot(_context(settings=settings), World(0.0, [], [], {}, {}), Requests(), (), [])
    assert (core_input.placement_policy, core_input.order, core_input.aging_s) == (
        "binpack",
        "shortest",
        60.0,
    )
    assert core_input.offers == ()  # the context's catalog (empty here)


async def test_a_request_no_queue_lists_waits_only_when_the_context_requires_a_queue() -> None:
    gpr = {
        "metadata": {"name": "r", "namespace": "team", "uid": "u", "generation": 1},
        "spec": {"gpuShape": "H100", "numberOfGPUs": 1},
        "status": {"phase": "Queued"},
    }
    queues = []
    for require_queue in (False, True):
        context = _context(settings=OperatorSettings(require_queue=require_queue))
        (pending,) = (await requests(context, World(0.0, [gpr], [], {}, {}))).pending
        queues.append(pending.queue)
    assert queues == [NAMESPACE_QUEUE_PREFIX + "team", "(no GPUQueue lists namespace team)"]


class _Informer:
    """An informer whose watch runs until cancelled; keeps the callback it was given."""

    def __init__(
        self, api: Any, group: str, version: str, plural: str, kind: str, on_event: Callable[..., None] | None
    ) -> None:
        self.kind, self.on_event = kind, on_event
        self.synced = asyncio.Event()

    async def run(self) -> None:
        await asyncio.Event().wait()


async def test_informers_are_the_contexts_and_a_deleted_request_wakes_that_context(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gpr_world, "Informer", _Informer)
    context, other = _context(_Kube()), _context(_Kube())  # informers also in a namespaced operator
    gpr_world.start_informers(context)
    assert set(context.scheduler.informers) == set(INFORMED) and other.scheduler.informers == {}
    assert {informer_task(name) for name in INFORMED} <= set(context.tasks)
    on_gpr_event = context.scheduler.informers["gpr"].on_event
    gone: Mapping[str, Any] = {"metadata": {"name": "r", "namespace": "team", "resourceVersion": "3"}}
    on_gpr_event("DELETED", gone)
    assert context.scheduler.deleted == [dict(gone)] and context.scheduler.wakeup.is_set()
    assert other.scheduler.deleted == [] and not other.scheduler.wakeup.is_set()
    await gpr_loop.stop_scheduler(kopf.Memo(context=context))
    assert not any(informer_task(name) in context.tasks for name in INFORMED)


async def test_startup_runs_the_loop_on_the_context_and_cleanup_stops_all_it_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gpr_world, "Informer", _Informer)  # never synced: each pass lists
    kube = _Kube()
    context = _context(kube, settings=OperatorSettings(schedule_interval_s=3600.0))
    memo = kopf.Memo(context=context)
    await gpr_loop.start_scheduler(memo)
    await asyncio.wait_for(kube.listed.wait(), 5)  # the first pass runs at once: no wait for a client
    lists = kube.gpr_lists
    await asyncio.sleep(0.2)
    assert kube.gpr_lists == lists  # the next pass waits for the interval, from the context's settings
    wake_scheduler(context)
    await asyncio.wait_for(_until(lambda: kube.gpr_lists > lists), 5)  # or for a wake-up
    loop_task = context.tasks[gpr_loop.SCHEDULER]
    writers = [context.tasks[name] for name in WRITERS]  # each pass starts its status writes
    reserving = asyncio.create_task(asyncio.Event().wait())
    context.scheduler.reservations_in_flight["team/r"] = reserving
    await gpr_loop.stop_scheduler(memo)
    assert loop_task.cancelled() and reserving.cancelled() and all(w.done() for w in writers)
    assert not {gpr_loop.SCHEDULER, *WRITERS} & set(context.tasks)


async def _until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.01)
