"""Giving GPUs back: requests due for release (exitDuration elapsed, idle for
idleTimeOutDuration), requests deleted (reported by the informer, or missing from a read), the
operator's finalizer held exactly while a request may have reservation labels, the usage (GPU-hours,
cost) of requests holding GPUs, and the teardown of an ephemeral colony its last user left."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from colony import metrics
from colony.api import COLONY, GPR
from colony.controllers.gpr.reservations import reservation_finished, reserved_nodes, unlabel
from colony.controllers.gpr.state import ReleaseInFlight, wake_scheduler
from colony.controllers.gpr.world import World, read, read_own_colony, reservation_in_use, unreachable
from colony.controllers.gpr.writes import (
    backing_off,
    event,
    guarded,
    moving,
    newest_known,
    patch,
    set_finalizer,
    write_on_version,
)
from colony.kube.informer import newer
from colony.kube.resources import KubeApiError
from colony.labels import FINALIZER
from colony.scheduling.fault_rules import IdleAction, idle_action
from colony.scheduling.queueing.objects import RUNNING_PHASES, request_key, timestamp
from colony.scheduling.queueing.rules import expired, idle_limit
from colony.status.cost import job_usage
from colony.timefmt import format_time

if TYPE_CHECKING:
    from colony.controllers.context import OperatorContext

USAGE_REFRESH_S = 60.0
"""How often the gpuHours and cost of a request holding GPUs are written."""

log = logging.getLogger(__name__)


def usage(gpr: Mapping[str, Any], end: float) -> dict[str, Any]:
    """The gpuHours and cost of a request's GPUs from its admission until `end`."""
    status = gpr.get("status") or {}
    start = timestamp(status.get("admittedAt"))
    gpus = int(status.get("gpusAllocated") or 0)
    accrued = job_usage(
        gpus,
        datetime.fromtimestamp(start, UTC) if start else None,
        datetime.fromtimestamp(end, UTC),
        status.get("pricePerGpuHour"),
    )
    return {"gpuHours": accrued["gpuHours"], "cost": accrued["cost"]}


async def release(
    context: OperatorContext, world: World, gpr: Mapping[str, Any], phase: str, message: str
) -> None:
    """Give the GPR's GPUs back (labels off), record why, and tear down its colony if it was the
    last user of an ephemeral one."""
    await reservation_finished(context, gpr)
    await unlabel(context, world, gpr)
    meta = gpr["metadata"]
    metrics.record_job_usage(meta["namespace"], GPR.kind, meta["name"], usage(gpr, world.now))
    released = {
        "phase": phase,
        "message": message,
        "releasedAt": format_time(datetime.fromtimestamp(world.now, UTC)),
        "nodes": [],
        **usage(gpr, world.now),
    }
    patched, _ = await write_on_version(
        context, gpr, moving(gpr, released, RUNNING_PHASES, same_allocation=True)
    )
    if patched is None:
        return  # it no longer holds these GPUs (released, deleted or gone meanwhile)
    await event(context, gpr, f"GPR{phase}", message)
    await teardown_if_unused(context, world, gpr, released_at=world.now)


async def teardown_if_unused(
    context: OperatorContext, world: World, gpr: Mapping[str, Any], released_at: float | None = None
) -> None:
    """Delete the GPR's provisioned (ephemeral) colony when no other request uses it; the teardown
    latency is measured from `released_at` (default: the GPR's deletion or release time)."""
    provisioned = (gpr.get("status") or {}).get("provisionedColony")
    if not provisioned:
        return
    namespace = gpr["metadata"]["namespace"]
    key = f"{namespace}/{provisioned}"
    users = [
        g
        for g in world.gprs
        if request_key(g) != request_key(gpr)
        and not g["metadata"].get("deletionTimestamp")
        and (
            (g.get("status") or {}).get("colony") == key
            or (g.get("status") or {}).get("provisionedColony") == provisioned
        )
        and (g.get("status") or {}).get("phase") in (*RUNNING_PHASES, "Provisioning")
    ]
    already_deleting = bool((world.all_colonies.get(key) or {}).get("metadata", {}).get("deletionTimestamp"))
    if not users and await context.kube.delete(COLONY.api_version, COLONY.kind, provisioned, namespace):
        if already_deleting:
            return  # its teardown was requested (and counted) before, e.g. by its job
        status, meta = gpr.get("status") or {}, gpr["metadata"]
        released = (
            released_at
            or timestamp(status.get("releasedAt"))
            or timestamp(meta.get("deletionTimestamp"))
            or world.now
        )
        metrics.observe_teardown(metrics.teardown.GPR, time.time() - released)
        await event(context, gpr, "ColonyTornDown", f"ephemeral colony {provisioned} deletion requested")


async def _bring_usage_forward(context: OperatorContext, world: World, gpr: Mapping[str, Any]) -> None:
    """gpuHours and cost of a request holding GPUs, written every USAGE_REFRESH_S, and exported."""
    status = gpr.get("status") or {}
    accrued = usage(gpr, world.now)
    gpus = int(status.get("gpusAllocated") or 0)
    meta = gpr["metadata"]
    metrics.record_job_usage(meta["namespace"], GPR.kind, meta["name"], accrued)
    if gpus and accrued["gpuHours"] - float(status.get("gpuHours") or 0.0) >= gpus * USAGE_REFRESH_S / 3600:
        await patch(context, gpr, accrued)


async def release_due(context: OperatorContext, world: World) -> bool:
    """Release what is due (scheduling.queueing.rules.expired, fault_rules.idle_action), and bring
    the usage of every running request forward; True when something was released. A request whose
    handling fails is recorded and backed off (writes.guarded); the others go on."""
    released = False
    for gpr in world.gprs:
        status = gpr.get("status") or {}
        if status.get("phase") not in RUNNING_PHASES or gpr["metadata"].get("deletionTimestamp"):
            continue
        if backing_off(context, gpr):
            continue
        released = (
            bool(await guarded(context, gpr, "release", _release_if_due(context, world, gpr))) or released
        )
    return released


async def _release_if_due(context: OperatorContext, world: World, gpr: Mapping[str, Any]) -> bool:
    """One running request of `release_due`: usage brought forward, then released when expired or
    idle too long; True when released."""
    status = gpr.get("status") or {}
    spec = gpr["spec"]
    await _bring_usage_forward(context, world, gpr)
    why = expired(gpr, world.now)
    if why is not None:
        await release(context, world, gpr, "Expired", why)
        return True
    limit = idle_limit(gpr)
    if limit is None:
        return False
    reachable = not unreachable(world, gpr)
    idle_since = timestamp(status.get("idleSince"))
    action = idle_action(
        reachable, reachable and reservation_in_use(world, gpr), idle_since, world.now, limit
    )
    if action is IdleAction.PAUSE and idle_since is not None:
        await patch(context, gpr, {"idleSince": None})  # why: the ColonyReachable condition
    elif action is IdleAction.CLEAR:
        await patch(context, gpr, {"idleSince": None})
    elif action is IdleAction.START:
        await patch(context, gpr, {"idleSince": format_time(datetime.fromtimestamp(world.now, UTC))})
    elif action is IdleAction.RELEASE:
        await release(
            context,
            world,
            gpr,
            "Released",
            f"no pod used the GPUs for idleTimeOutDuration {spec['idleTimeOutDuration']}",
        )
        return True
    return False


async def release_on_delete(context: OperatorContext, gpr: Mapping[str, Any], wake: bool = True) -> None:
    """A GPR is being deleted: free its nodes and tear down its ephemeral colony if unused. Only
    the teardown needs every request and colony read (who else uses that colony); freeing nodes
    needs only the clients of the request's own colony (a full read per deletion would make
    deleting n requests cost n full reads)."""
    status = gpr.get("status") or {}
    world = await read(context) if status.get("provisionedColony") else await read_own_colony(context, status)
    await unlabel(context, world, gpr)
    await teardown_if_unused(context, world, gpr)
    if wake:
        wake_scheduler(context)


def release_deleted(context: OperatorContext, world: World) -> None:
    """Free the reservations (and unused ephemeral colony) of the requests deleted since the last
    pass, in the background (`release_in_background`): those the informer reported deleted and
    those missing from this read that the last one had (requests that never held GPUs, so had no
    finalizer; an ephemeral colony that a crash makes this miss is found by the orphan sweeper). A
    label such a request may have left counts as another's until it is off: the pass never gives
    those GPUs away twice. Then `sync_finalizers`."""
    known = context.scheduler.seen
    current = {request_key(g): g for g in world.gprs}
    gone = {k: g for k, g in known.items() if k not in current}
    for last in context.scheduler.deleted:  # the informer's last state of a deleted request
        key = request_key(last)
        if key not in gone or newer(last, gone[key]):
            gone[key] = last
    context.scheduler.deleted = []
    # the informer's (trimmed, compact) copy unless this process wrote a strictly newer version
    context.scheduler.seen = {
        k: known[k] if k in known and not newer(g, known[k]) else g for k, g in current.items()
    }
    released_before = context.scheduler.released
    for key, gpr in sorted(gone.items()):
        if key in current:
            continue  # deleted and created again under the same name: the new one is live
        if gpr["metadata"].get("uid") in released_before:
            released_before.discard(gpr["metadata"]["uid"])
            continue  # released by sync_finalizers before its finalizer was let go
        if key not in context.scheduler.releases_in_flight:
            release_in_background(context, gpr, gone=True)
    sync_finalizers(context, world)


def sync_finalizers(context: OperatorContext, world: World) -> None:
    """A request holds the operator's finalizer exactly while it may have reservation labels on
    nodes (it is put on by `reservations.reserve` before any label): one being deleted is released,
    then let go; one that stopped holding GPUs (released, expired, preempted, requeued) is let go.
    Both in the background (`release_in_background`): a request being deleted gives its GPUs back
    to this very pass (rules.known_reservations), and a label put on one of its nodes waits for its
    release (reservations.releases_before). A request whose admission is being finished in the
    background is left to that task, unless it is being deleted (its release waits for it)."""
    reserving = context.scheduler.reservations_in_flight
    releasing = context.scheduler.releases_in_flight
    for listed in world.gprs:
        gpr = newest_known(context, listed)  # not again when this process let go since the read
        key = request_key(gpr)
        if (
            FINALIZER not in (gpr["metadata"].get("finalizers") or [])
            or key in releasing
            or backing_off(context, gpr)
        ):
            continue
        if gpr["metadata"].get("deletionTimestamp") or (
            (gpr.get("status") or {}).get("phase") not in RUNNING_PHASES and key not in reserving
        ):
            release_in_background(context, gpr)


def release_in_background(context: OperatorContext, gpr: dict[str, Any], gone: bool = False) -> None:
    """Take a request's labels off if it is being deleted (or `gone`), then its finalizer (a gone
    one has none left), without holding up the pass; kept in SchedulerState.releases_in_flight
    until done. It first waits for the request's admission being finished in the background, if
    any (taken now: see reservations.releases_before). A failure is recorded on the request and
    backed off; a later pass tries again (the finalizer is still on)."""
    key = request_key(gpr)
    releasing = context.scheduler.releases_in_flight
    reserving = context.scheduler.reservations_in_flight.get(key)

    async def run() -> None:
        try:
            if reserving is not None:
                await asyncio.wait([reserving])
            async with context.scheduler.write_slots:
                if gone:
                    await guarded(context, gpr, "release on deletion", _release_gone(context, gpr))
                else:
                    newest = newest_known(context, gpr)  # the admission may have finished since
                    await guarded(context, newest, "releasing the finalizer", _let_go(context, newest))
        finally:
            if key in releasing and releasing[key].task is asyncio.current_task():
                del releasing[key]

    releasing[key] = ReleaseInFlight(asyncio.create_task(run()), reserved_nodes(gpr))


async def _release_gone(context: OperatorContext, gpr: dict[str, Any]) -> None:
    """A request deleted or gone from the read (`release_in_background`): labels off, unused
    colony down, its metrics forgotten."""
    await release_on_delete(context, gpr, wake=False)
    metrics.forget_job(gpr["metadata"]["namespace"], GPR.kind, gpr["metadata"]["name"])


async def _let_go(context: OperatorContext, gpr: dict[str, Any]) -> None:
    """One request still listed, of `release_in_background`: released first if it is being
    deleted, then its finalizer off."""
    if gpr["metadata"].get("deletionTimestamp"):
        await _release_gone(context, gpr)
        if gpr["metadata"].get("uid"):
            context.scheduler.released.add(gpr["metadata"]["uid"])
    try:
        await set_finalizer(context, gpr, hold=False)
    except KubeApiError as error:  # the next pass tries again
        log.warning("letting go of %s failed: %s", request_key(gpr), error)
