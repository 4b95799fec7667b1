"""Node reservations of admitted requests: the reservation label put on (after the operator's
finalizer) and read back before a request is Ready, taken off (or recorded in the colony's ledger
when its colony is unreachable), and admissions finished in the background while the next pass
runs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import aiohttp

from colony.api import COLONY
from colony.controllers.cluster_access import cluster_client
from colony.controllers.gpr.world import CLUSTER_READ_TIMEOUT_S, UNREACHABLE, World
from colony.controllers.gpr.writes import (
    backing_off,
    event_in_background,
    guarded,
    moving,
    newest_known,
    patch,
    set_finalizer,
    write_on_version,
)
from colony.kube.resources import KubeApiError, NotFound
from colony.scheduling.fault_rules import ledger_entry, transition_applies
from colony.scheduling.queueing.objects import RUNNING_PHASES, request_key, reservation_label
from colony.scheduling.queueing.rules import ready_message

if TYPE_CHECKING:
    from colony.controllers.context import OperatorContext

log = logging.getLogger(__name__)


async def label_nodes(world: World, gpr: Mapping[str, Any], add: bool) -> list[str]:
    """Put (or take off) the GPR's reservation label on its nodes; returns the nodes (as
    `cluster/node (why)`) whose label could not be written or, when putting it on, read back (a
    node that is gone has no label left to take off)."""
    status = gpr.get("status") or {}
    label = reservation_label(request_key(gpr))
    not_labelled: list[str] = []
    for allocation in status.get("nodes") or []:
        node = f"{allocation['cluster']}/{allocation['node']}"
        view = world.clusters.get((str(status.get("colony")), allocation["cluster"]))
        if view is None:
            not_labelled.append(f"{node} (cluster not readable)")
            continue
        value = str(allocation["gpus"]) if add else None
        try:
            patched = await view.kube.patch_labels("v1", "Node", allocation["node"], None, {label: value})
        except NotFound:
            if add:
                not_labelled.append(f"{node} (node gone)")
            continue
        except UNREACHABLE as error:
            not_labelled.append(f"{node} ({type(error).__name__})")
            continue
        if add and ((patched.get("metadata") or {}).get("labels") or {}).get(label) != value:
            not_labelled.append(f"{node} (label not read back)")
    return not_labelled


async def unlabel(context: OperatorContext, world: World, gpr: Mapping[str, Any]) -> None:
    """Take the GPR's reservation label off its nodes; what cannot be taken off now (its colony is
    unreachable) is recorded in the colony's ledger, and comes off when the colony is read again
    (by then the request may be gone, and its label key, a hash, would name nobody)."""
    left = await label_nodes(world, gpr, add=False)
    colony = str((gpr.get("status") or {}).get("colony") or "")
    if not left or "/" not in colony:
        return
    left = await _unlabel_unread(context, world, gpr, left)
    if not left:
        return
    nodes = [entry.split(" (", 1)[0] for entry in left]
    key, value = ledger_entry(reservation_label(request_key(gpr)), nodes)
    namespace, name = colony.split("/", 1)
    log.warning(
        "reservation of %s left on %s of colony %s: recorded for later", request_key(gpr), value, colony
    )
    try:
        await context.kube.patch(
            COLONY.api_version, COLONY.kind, name, namespace, {"metadata": {"annotations": {key: value}}}
        )
    except NotFound:
        pass  # the colony is gone: its deletion took its requests' labels off (colony_reservations)
    except (KubeApiError, OSError, TimeoutError, aiohttp.ClientError) as error:
        log.warning(
            "recording the leftover reservation of %s on colony %s failed: %s",
            request_key(gpr),
            colony,
            error,
        )


async def _unlabel_unread(
    context: OperatorContext, world: World, gpr: Mapping[str, Any], left: list[str]
) -> list[str]:
    """Take the label off the nodes of clusters this pass did not read (its colony was not in play:
    being deleted, or its cluster no longer Ready in its status) through the cluster's own client,
    within CLUSTER_READ_TIMEOUT_S; returns what is still left. Without this a request released
    while its colony is being deleted records its label in a ledger that the colony's deletion may
    already have read, and the label stays on the node of an existing cluster for good."""
    status = gpr.get("status") or {}
    colony = str(status.get("colony"))
    namespace, name = colony.split("/", 1)
    label = reservation_label(request_key(gpr))
    still: list[str] = []
    for entry in left:
        node = entry.split(" (", 1)[0]
        if not entry.endswith("(cluster not readable)"):
            still.append(entry)
            continue
        cluster, node_name = node.split("/", 1)
        try:
            async with asyncio.timeout(CLUSTER_READ_TIMEOUT_S):
                kube = await cluster_client(context, namespace, name, cluster, world.colonies.get(colony))
                await kube.patch_labels("v1", "Node", node_name, None, {label: None})
        except NotFound:
            continue  # the node is gone, and its label with it
        except Exception as error:  # any error class: the ledger is the fallback (unlabel)
            still.append(f"{node} ({type(error).__name__})")
    return still


def finish_admissions(context: OperatorContext, world: World, by_key: Mapping[str, dict[str, Any]]) -> None:
    """Admitted (status written) but not yet Ready (labels maybe missing), e.g. after a crash:
    label, then Ready, in the background (`reserve_in_background`); except the admissions still
    being finished by their own task, those of requests backing off (writes.guarded) and those
    being deleted."""
    reserving = context.scheduler.reservations_in_flight
    for key, read in by_key.items():
        gpr = newest_known(context, read)  # an admission finished since the read is not redone
        if (
            (gpr.get("status") or {}).get("phase") == "Admitted"
            and key not in reserving
            and not gpr["metadata"].get("deletionTimestamp")
            and not backing_off(context, gpr)
        ):
            reserve_in_background(context, world, gpr)


def reserve_in_background(context: OperatorContext, world: World, admitted: dict[str, Any]) -> None:
    """Finish an admission (`reserve`) without holding up the pass: its status already says
    Admitted with its nodes, so the next pass counts its GPUs as taken, and a crash before it ends
    leaves it for `finish_admissions` to redo."""
    releases = releases_before(context, admitted)
    in_background(
        context,
        request_key(admitted),
        lambda: guarded(context, admitted, "reserving nodes", reserve(context, world, admitted, releases)),
    )


def in_background(context: OperatorContext, key: str, work: Callable[[], Awaitable[Any]]) -> None:
    """Run a request's admission work as its task in SchedulerState.reservations_in_flight (one per
    request) until it ends; `work` records its own failures (writes.guarded)."""
    tasks = context.scheduler.reservations_in_flight

    async def run() -> None:
        try:
            await work()
        finally:
            if tasks.get(key) is asyncio.current_task():
                del tasks[key]

    tasks[key] = asyncio.create_task(run())


def reserved_nodes(gpr: Mapping[str, Any]) -> frozenset[tuple[str, str, str]]:
    """(colony, cluster, node) of each node the request's status allocates."""
    status = gpr.get("status") or {}
    colony = str(status.get("colony") or "")
    return frozenset((colony, n["cluster"], n["node"]) for n in status.get("nodes") or [])


def releases_before(context: OperatorContext, gpr: Mapping[str, Any]) -> list[asyncio.Task[None]]:
    """The releases in flight that labelling this request must wait for: its own, and those of
    requests whose labels are on one of its nodes (until they are off, both labels would count
    against the node's GPUs, which the pass already gave to this request). Taken when the
    admission is started, so a reservation only ever waits for releases started before it (and a
    release only for the reservation of its own request, started before it too): no cycle."""
    key, nodes = request_key(gpr), reserved_nodes(gpr)
    return [
        release.task
        for other, release in context.scheduler.releases_in_flight.items()
        if other == key or release.nodes & nodes
    ]


async def reservation_finished(context: OperatorContext, gpr: Mapping[str, Any]) -> None:
    """Wait for the request's admission being finished in the background, if any: taking its GPUs
    back before its labels and Ready are written would leave them on."""
    task = context.scheduler.reservations_in_flight.get(request_key(gpr))
    if task is not None:
        await asyncio.wait([task])


async def reserve(
    context: OperatorContext,
    world: World,
    admitted: dict[str, Any],
    releases: list[asyncio.Task[None]] | None = None,
) -> None:
    """Label the nodes of an Admitted request, then mark it Ready once every label is written and
    read back (else it stays Admitted, saying which nodes wait); its Events are posted in the
    background, so a release waiting for this admission (sync_finalizers) does not wait for them. A
    request deleted meanwhile may have had its labels taken off by its delete handler before they
    were put on: they are taken off again, else they would hold the GPUs forever. No label is put on
    before the request holds the operator's finalizer, so a request deleted while the operator is
    down still has its labels taken off (`release.sync_finalizers`). No label is put on before the
    releases that must come first (`releases_before`, taken now unless given) are over."""
    releases = releases_before(context, admitted) if releases is None else releases
    if releases:
        await asyncio.wait(releases)
    async with context.scheduler.write_slots:
        await _label_then_ready(context, world, admitted)


async def _label_then_ready(context: OperatorContext, world: World, admitted: dict[str, Any]) -> None:
    """`reserve` once no release holds it back: finalizer, labels, Ready."""
    held = await set_finalizer(context, admitted, hold=True)
    if held is None or not transition_applies(admitted, held, ("Admitted",), same_allocation=True):
        return  # gone, being deleted or moved on: the next pass decides on what it is now
    not_labelled = await label_nodes(world, held, add=True)
    admitted = held
    status = admitted.get("status") or {}
    ready = ready_message(status)
    if not status.get("nodes"):
        not_labelled = ["(no nodes recorded)"]
    if not_labelled:  # Ready only once every label is on: the next pass tries again
        waiting = f"admitted; waiting to label node(s) {', '.join(not_labelled)}"
        if status.get("message") != waiting:
            await patch(context, admitted, {"message": waiting})
        return
    patched, seen = await write_on_version(
        context,
        admitted,
        moving(admitted, {"phase": "Ready", "message": ready}, ("Admitted",), same_allocation=True),
    )
    if patched is not None and not patched["metadata"].get("deletionTimestamp"):
        event_in_background(context, admitted, "GPRReady", ready)
        return
    if not transition_applies(admitted, seen, RUNNING_PHASES, same_allocation=True):
        await unlabel(context, world, admitted)  # deleted or moved on meanwhile: the labels hold nothing
