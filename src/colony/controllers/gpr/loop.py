"""The GPR scheduling loop: one pass every schedule_interval_s (default a second) or on a change
(kopf startup/cleanup handlers run it on the operator's context, taken once from kopf's memo; a
GPUQueue event, or a GPR created or deleted, wakes it). `run_pass` is the whole pass, one call per
step."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import kopf

from colony.api import GPR, GPUQUEUE
from colony.controllers.context import OperatorContext, context_of
from colony.controllers.gpr.accept import ACCEPT_WRITES, accept
from colony.controllers.gpr.apply import apply
from colony.controllers.gpr.reconcile import reconcile_colonies
from colony.controllers.gpr.release import release_deleted, release_due
from colony.controllers.gpr.report import WRITERS, export_metrics, start_unless_running, write_queue_status
from colony.controllers.gpr.reservations import finish_admissions
from colony.controllers.gpr.snapshot import free_nodes, queue_quotas, requests, snapshot
from colony.controllers.gpr.state import wake_scheduler
from colony.controllers.gpr.world import INFORMED, informer_task, read, start_informers
from colony.controllers.gpr.writes import clock
from colony.controllers.loops import run_passes
from colony.scheduling.queueing.core import schedule
from colony.scheduling.queueing.model import Decisions, GpuNode, GpuRequest, RunningRequest

SCHEDULER = "gpr-scheduler"
"""The name of the loop's task in the context."""
SETTLE_S = 0.05
"""Pause after a pass before the next may start: wake-ups of a burst of new requests coalesce."""

log = logging.getLogger(__name__)


@kopf.on.startup()
async def start_scheduler(memo: kopf.Memo, **_: Any) -> None:
    """Run the scheduling loop for the operator's lifetime."""
    context = context_of(memo)
    context.start(SCHEDULER, _loop(context))


@kopf.on.cleanup()
async def stop_scheduler(memo: kopf.Memo, **_: Any) -> None:
    """Stop the loop, its informers and background writes, and the admissions and releases being
    finished (a later process redoes them); let the Events being posted end (each is bounded by
    the client's request timeout)."""
    context = context_of(memo)
    await context.stop(SCHEDULER, *WRITERS, ACCEPT_WRITES, *(informer_task(name) for name in INFORMED))
    scheduler = context.scheduler
    in_flight = [*scheduler.reservations_in_flight.values()]
    in_flight += [release.task for release in scheduler.releases_in_flight.values()]
    for task in in_flight:
        task.cancel()
    await asyncio.gather(*in_flight, return_exceptions=True)
    await asyncio.gather(*context.scheduler.events_in_flight, return_exceptions=True)


@kopf.on.event(GPUQUEUE.group, GPUQUEUE.version, GPUQUEUE.plural)
async def queue_changed(memo: kopf.Memo, **_: Any) -> None:
    """A GPUQueue changed: quotas may admit or require preemption now."""
    wake_scheduler(context_of(memo))


async def _loop(context: OperatorContext) -> None:
    """Start the informers, then pass after pass (a failed pass is logged, the next one retries),
    each after a change or the context's schedule_interval_s at the latest."""
    start_informers(context)
    await run_passes(
        "scheduling",
        lambda: run_pass(context),
        context.settings.schedule_interval_s,
        wakeup=context.scheduler.wakeup,
        settle_s=SETTLE_S,
        metric_kind=GPR.kind,
    )


async def run_pass(context: OperatorContext) -> Decisions | None:
    """One scheduling pass; returns the core's decisions (None when nothing was pending).

    1. read: GPRs, GPUQueues, Colonies and ColonyShares, then the nodes and pods of the colony
       clusters in play (world.read);
    2. release the requests deleted since the last pass and let go of finalizers no longer needed,
       in the background (release.release_deleted): a request being deleted gives its GPUs to
       this very pass (a new label on one of its nodes waits until its own is off);
    3. accept new specs in bulk (accept.accept), in the background once the decisions are
       applied (a request admitted by this pass is accepted by its admission write);
    4. release what is due: exitDuration elapsed, idle for idleTimeOutDuration
       (release.release_due; then read again);
    5. reconcile the colonies: reachability, reservation labels, orphaned ephemeral colonies
       (reconcile.reconcile_colonies);
    6. snapshot: the running and pending requests (an admission still being written counts as
       admitted; requeueing failed provisions), finishing interrupted admissions in the background
       (Admitted -> labels -> Ready), queues and free nodes (snapshot);
    7. `schedule()`, the pure core, in a thread (it is CPU work); its decisions are logged and
       exported as metrics (report.export_metrics);
    8. apply its decisions: preempt, admit (assumed at once, written in the background),
       provision (apply.apply);
    9. write, in the background, each GPUQueue's usage and the positions and wait estimates of
       waiting requests (report.write_queue_status).

    With nothing pending, steps 7 and 8 are skipped (metrics and queue usage are still written).
    A request whose handling raises in any step is recorded on it (a ProcessingFailed warning
    Event) and backed off, and the pass goes on with the others (writes.guarded); a pass that ends
    forgets the backoffs that were over when it started (those requests did not fail again).
    """
    started = clock()
    decisions = await _steps(context)
    context.scheduler.backoff.end_pass(started)
    return decisions


async def _steps(context: OperatorContext) -> Decisions | None:
    """The steps of `run_pass`."""
    world = await read(context)  # 1.
    release_deleted(context, world)  # 2.
    if await release_due(context, world):  # 4.
        world = await read(context)
    await reconcile_colonies(context, world)  # 5.
    found = await requests(context, world)  # 6.
    finish_admissions(context, world, found.by_key)
    queues = queue_quotas(world, found)
    nodes = free_nodes(world, found)
    if not found.pending:
        export_metrics(world, queues, nodes, found.running, found.pending, Decisions())
        write_queue_status(context, world, queues, found.running, found.pending, Decisions())
        start_unless_running(context, ACCEPT_WRITES, lambda: accept(context, world))  # 3.
        return None
    core_input = snapshot(context, world, found, queues, nodes)
    decisions = await asyncio.to_thread(schedule, core_input)  # 7.
    _log_pass(found.pending, found.running, nodes, decisions)
    export_metrics(world, core_input.queues, nodes, found.running, found.pending, decisions)
    await apply(context, world, found.by_key, decisions)  # 8.
    write_queue_status(context, world, core_input.queues, found.running, found.pending, decisions)  # 9.
    decided = {a.key for a in decisions.admitted} | {p.key for p in decisions.provisions}
    start_unless_running(context, ACCEPT_WRITES, lambda: accept(context, world, decided))  # 3.
    return decisions


def _log_pass(
    pending: Sequence[GpuRequest],
    running: Sequence[RunningRequest],
    nodes: Sequence[GpuNode],
    decisions: Decisions,
) -> None:
    """What a pass decided, in the log (each waiting request at debug level)."""
    log.info(
        "scheduling pass: %d pending, %d running, %d node(s): %d admitted, %d preempted, %d provisioning",
        len(pending),
        len(running),
        len(nodes),
        len(decisions.admitted),
        len(decisions.preemptions),
        len(decisions.provisions),
    )
    for key, estimate in sorted(decisions.estimates.items()):
        log.debug("waiting %s (#%d): %s", key, estimate.position, estimate.reason)
