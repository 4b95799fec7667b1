"""The GPR scheduling loop: one pass once a second or on a change (kopf startup/cleanup handlers
run it; a GPUQueue event, or a GPR created or deleted, wakes it). `run_pass` is the whole pass,
one call per step."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Any

import kopf

from colony import metrics, settings
from colony.api import GPR, GPUQUEUE
from colony.controllers.gpr.accept import accept
from colony.controllers.gpr.apply import apply
from colony.controllers.gpr.reconcile import reconcile_colonies
from colony.controllers.gpr.release import release_deleted, release_due
from colony.controllers.gpr.report import export_metrics, write_queue_status
from colony.controllers.gpr.reservations import finish_admissions
from colony.controllers.gpr.snapshot import free_nodes, queue_quotas, requests, snapshot
from colony.controllers.gpr.state import reservations_in_flight, wake_scheduler
from colony.controllers.gpr.world import INFORMED, read, start_informers
from colony.scheduling.queueing.core import schedule
from colony.scheduling.queueing.model import Decisions, GpuNode, GpuRequest, RunningRequest

PASS_INTERVAL_S = settings.positive_seconds("COLONY_SCHEDULE_INTERVAL_SECONDS", 1.0)
SETTLE_S = 0.05
"""Pause after a pass before the next may start: wake-ups of a burst of new requests coalesce."""

log = logging.getLogger(__name__)


@kopf.on.startup()
async def start_scheduler(memo: kopf.Memo, **_: Any) -> None:
    """Run the scheduling loop for the operator's lifetime."""
    memo.scheduler_wakeup = asyncio.Event()
    memo.scheduler_task = asyncio.create_task(_loop(memo))


@kopf.on.cleanup()
async def stop_scheduler(memo: kopf.Memo, **_: Any) -> None:
    """Stop the loop."""
    background = ("estimate_writes", "queue_usage_writes")
    for name in ("scheduler_task", *background, *(f"{i}_informer_task" for i in INFORMED)):
        task: asyncio.Task[None] | None = getattr(memo, name, None)
        if task is not None:
            task.cancel()
    for reservation in list(reservations_in_flight(memo).values()):
        reservation.cancel()


@kopf.on.event(GPUQUEUE.group, GPUQUEUE.version, GPUQUEUE.plural)
async def queue_changed(memo: kopf.Memo, **_: Any) -> None:
    """A GPUQueue changed: quotas may admit or require preemption now."""
    wake_scheduler(memo)


async def _loop(memo: kopf.Memo) -> None:
    """Once the management client is up: start the informers, then pass after pass (a failed pass
    is logged, the next one retries), each after a change or PASS_INTERVAL_S at the latest."""
    while getattr(memo, "kube", None) is None:
        await asyncio.sleep(0.1)
    start_informers(memo)
    while True:
        started = time.monotonic()
        try:
            with metrics.observe_handler(GPR.kind, "scheduling_pass"):
                await run_pass(memo)
        except asyncio.CancelledError:
            raise
        except Exception:  # one bad pass must not stop scheduling; the next one retries
            log.exception("scheduling pass failed")
        await asyncio.sleep(SETTLE_S)
        memo.scheduler_wakeup.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(memo.scheduler_wakeup.wait(), PASS_INTERVAL_S)
        log.debug("scheduling pass took %.3fs", time.monotonic() - started)


async def run_pass(memo: kopf.Memo) -> Decisions | None:
    """One scheduling pass; returns the core's decisions (None when nothing was pending).

    1. read: GPRs, GPUQueues, Colonies and ColonyShares, then the nodes and pods of the colony
       clusters in play (world.read);
    2. release the requests deleted since the last pass and let go of finalizers no longer needed
       (release.release_deleted; then read again: the freed GPUs are free for this very pass);
    3. accept new specs in bulk (accept.accept);
    4. release what is due: exitDuration elapsed, idle for idleTimeOutDuration
       (release.release_due; then read again);
    5. reconcile the colonies: reachability, reservation labels, orphaned ephemeral colonies
       (reconcile.reconcile_colonies);
    6. snapshot: the running and pending requests (requeueing failed provisions), finishing
       interrupted admissions (Admitted -> labels -> Ready), queues and free nodes (snapshot);
    7. `schedule()`, the pure core, in a thread (it is CPU work); its decisions are logged and
       exported as metrics (report.export_metrics);
    8. apply its decisions: preempt, admit, provision (apply.apply);
    9. write, in the background, each GPUQueue's usage and the positions and wait estimates of
       waiting requests (report.write_queue_status).

    With nothing pending, steps 7 and 8 are skipped (metrics and queue usage are still written).
    """
    world = await read(memo)  # 1.
    if await release_deleted(memo, world):  # 2.
        world = await read(memo)
    await accept(memo, world)  # 3.
    if await release_due(memo, world):  # 4.
        world = await read(memo)
    await reconcile_colonies(memo, world)  # 5.
    found = await requests(memo, world)  # 6.
    await finish_admissions(memo, world, found.by_key)
    queues = queue_quotas(world, found)
    nodes = free_nodes(world, found)
    if not found.pending:
        export_metrics(world, queues, nodes, found.running, found.pending, Decisions())
        write_queue_status(memo, world, queues, found.running, found.pending, Decisions())
        return None
    core_input = snapshot(memo, world, found, queues, nodes)
    decisions = await asyncio.to_thread(schedule, core_input)  # 7.
    _log_pass(found.pending, found.running, nodes, decisions)
    export_metrics(world, core_input.queues, nodes, found.running, found.pending, decisions)
    await apply(memo, world, found.by_key, decisions)  # 8.
    write_queue_status(memo, world, core_input.queues, found.running, found.pending, decisions)  # 9.
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
