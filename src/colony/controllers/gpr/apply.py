"""Applying the scheduler core's Decisions: preempt (labels off, the victim requeued with
evictedBy), admit (status first; labels and Ready follow in the background), provision (an
ephemeral Colony for the chosen offer, its name recorded in the request first), and requeueing or
failing a request whose provisioned colony failed. Each decision is written to the request's status
before anything else is done for it, so a crash anywhere is finished or redone by a later pass."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import aiohttp

from colony.api import COLONY
from colony.api.gpr import GPRSpec
from colony.controllers.gpr.accept import queued_message, with_acceptance
from colony.controllers.gpr.release import usage
from colony.controllers.gpr.reservations import (
    in_background,
    releases_before,
    reservation_finished,
    reserve,
    unlabel,
)
from colony.controllers.gpr.world import World, gpr_queue
from colony.controllers.gpr.writes import (
    concurrently,
    event,
    event_in_background,
    guarded,
    moving,
    patch,
    record_failure,
    write_on_version,
)
from colony.kube.resources import KubeApiError
from colony.labels import FOR_GPR_LABEL, FOR_GPR_NAME_ANNOTATION
from colony.render.offer_colony import ProviderNotSupported, colony_for_offer, ephemeral_colony_name
from colony.scheduling.queueing.model import Admit, Decisions, Preempt, Provision
from colony.scheduling.queueing.objects import (
    PENDING_PHASES,
    RUNNING_PHASES,
    request_key,
    reservation_label,
    timestamp,
)
from colony.scheduling.queueing.rules import public_queue
from colony.status.cost import price_per_gpu_hour
from colony.timefmt import format_time
from colony.versions import pinned

if TYPE_CHECKING:
    from colony.controllers.context import OperatorContext


async def apply(
    context: OperatorContext, world: World, by_key: Mapping[str, dict[str, Any]], decisions: Decisions
) -> None:
    """Preemptions, then admissions, then provisions; the requests of each step concurrently (each
    request's own writes stay in order; one request's failure is recorded on it and backs it off,
    writes.guarded). Admissions are written in the background (`_admit`): the pass does not wait
    for them."""
    await concurrently(
        guarded(context, by_key[v.victim], "preemption", preempt(context, world, by_key[v.victim], v))
        for v in decisions.preemptions
        if v.victim in by_key
    )
    for a in decisions.admitted:
        if a.key in by_key:
            try:
                _admit(context, world, by_key[a.key], a)
            except Exception as error:  # one request's error stays with that request
                await record_failure(context, by_key[a.key], "admission", error)
    await concurrently(
        guarded(context, by_key[p.key], "provisioning", _provision(context, by_key[p.key], p))
        for p in decisions.provisions
        if p.key in by_key
    )


def _admit(context: OperatorContext, world: World, gpr: dict[str, Any], admit: Admit) -> None:
    """Admit in the background (reservations.in_background): write the admission to status (onto
    a version still pending with the same spec), then labels, Ready and the Events. Until the
    status write ends, the request is assumed admitted (SchedulerState.assumed): a pass running
    meanwhile counts its GPUs and quota as taken, as Kueue's cache assumes an admission before its
    API write. A write that does not land drops the assumption; the next pass decides again."""
    placement = admit.placement
    colony = world.colonies.get(placement.colony) or {}
    label = reservation_label(request_key(gpr))
    queue = gpr_queue(world, gpr, context.settings.require_queue)
    status = {
        "phase": "Admitted",
        "colony": placement.colony,
        "gpuType": placement.gpu_type,
        "gpusAllocated": sum(n.gpus for n in placement.nodes),
        "nodes": [
            {"cluster": n.node.split("/", 1)[0], "node": n.node.split("/", 1)[1], "gpus": n.gpus}
            for n in placement.nodes
        ],
        "borrowed": admit.borrowed,
        "queue": public_queue(queue),
        "admittedAt": format_time(datetime.fromtimestamp(world.now, UTC)),
        "pricePerGpuHour": price_per_gpu_hour(colony.get("status") or {}),
        "reservationLabel": label,
        "positionInQueue": None,
        "estimatedWaitSeconds": None,
        "estimatedStartTime": None,
        "releasedAt": None,
        "idleSince": None,
        "gpuHours": 0.0,
        "cost": 0.0 if price_per_gpu_hour(colony.get("status") or {}) is not None else None,
        "message": "admitted"
        + (" (backfilled)" if admit.backfilled else "")
        + (" on borrowed quota" if admit.borrowed else ""),
    }
    key = request_key(gpr)
    assumed = {**gpr, "status": {**(gpr.get("status") or {}), **status}}
    assumptions = context.scheduler.assumed
    assumptions[key] = assumed
    releases = releases_before(context, assumed)  # taken now: see releases_before

    async def admit_then_reserve() -> None:
        try:
            async with context.scheduler.write_slots:
                writing = _write_admission(context, world, gpr, status, admit)
                admitted = await guarded(context, gpr, "admission", writing)
        finally:
            if assumptions.get(key) is assumed:
                del assumptions[key]
        if admitted is not None:
            await guarded(context, admitted, "reserving nodes", reserve(context, world, admitted, releases))

    in_background(context, key, admit_then_reserve)


async def _write_admission(
    context: OperatorContext, world: World, gpr: dict[str, Any], status: dict[str, Any], admit: Admit
) -> dict[str, Any] | None:
    """The admission's status write, then its Events (in the background); the admitted request,
    or None when it changed meanwhile (spec, phase, deletion)."""
    admitted, _ = await write_on_version(
        context, gpr, with_acceptance(moving(gpr, status, PENDING_PHASES, same_spec=True))
    )
    if admitted is None:
        return None
    if not (gpr.get("status") or {}).get("phase"):  # admitted by the pass that first saw it
        event_in_background(context, gpr, "GPRQueued", queued_message(GPRSpec.model_validate(gpr["spec"])))
    placement = admit.placement
    queue = gpr_queue(world, gpr, context.settings.require_queue)
    waited = max(0, int(world.now - (timestamp(gpr["metadata"].get("creationTimestamp")) or world.now)))
    event_in_background(
        context,
        gpr,
        "GPRAdmitted",
        f"{status['message']} from queue {queue} after "
        f"{waited}s: {status['gpusAllocated']} {placement.gpu_type} GPU(s) on colony {placement.colony}",
    )
    return admitted


async def preempt(context: OperatorContext, world: World, victim: dict[str, Any], decision: Preempt) -> None:
    """Take the victim's labels off, then requeue it (written only onto a version that still holds
    the same GPUs)."""
    await reservation_finished(context, victim)
    await unlabel(context, world, victim)
    status = victim.get("status") or {}
    message = f"evicted for {decision.for_key}: {decision.reason}; requeued"
    evicted = {
        "phase": "Queued",
        "message": message,
        "evictedBy": decision.for_key,
        "retryCount": int(status.get("retryCount") or 0) + 1,
        "nodes": [],
        "colony": None,
        "gpusAllocated": None,
        "releasedAt": format_time(datetime.fromtimestamp(world.now, UTC)),
        **usage(victim, world.now),
    }
    patched, _ = await write_on_version(
        context, victim, moving(victim, evicted, RUNNING_PHASES, same_allocation=True)
    )
    if patched is not None:
        await event(context, victim, "GPREvicted", message, warning=True)


async def _provision(context: OperatorContext, gpr: dict[str, Any], decision: Provision) -> None:
    """Create the ephemeral colony of `decision`: its name (from the request's uid) is recorded in
    the request first, so a crash after the creation leaves a colony the request names (and the
    sweeper finds by its for-gpr label), never an orphan nothing knows of."""
    meta = gpr["metadata"]
    name = ephemeral_colony_name(str(meta["uid"]))
    try:
        manifest = colony_for_offer(
            decision.offer,
            name=name,
            namespace=meta["namespace"],
            k8s_version=pinned("KUBERNETES_VERSION"),
            labels={FOR_GPR_LABEL: str(meta["uid"])},
            annotations={FOR_GPR_NAME_ANNOTATION: str(meta["name"])},
        )
    except ProviderNotSupported as error:
        await patch(context, gpr, {"phase": "Queued", "message": str(error)})
        return
    intent = {"provisionedColony": name, "message": f"creating colony {name}"}
    recorded, _ = await write_on_version(
        context, gpr, moving(gpr, intent, PENDING_PHASES, same_spec=True, provisioned=(None,))
    )
    if recorded is None:
        return  # changed meanwhile: the next pass decides on what it is now
    try:
        await context.kube.apply(manifest)
    except (KubeApiError, OSError, TimeoutError, aiohttp.ClientError) as error:
        failed = {"provisionedColony": None, "message": f"creating colony {name} failed: {error}"}
        await write_on_version(
            context, recorded, moving(recorded, failed, PENDING_PHASES, provisioned=(name,))
        )
        return
    offer = decision.offer
    message = (
        f"provisioning colony {name}: {offer.offer.cloud} {offer.offer.region} {offer.offer.instance_type} "
        f"x{offer.nodes} at ${offer.price_per_hour:.2f}/h"
    )
    provisioning = {"phase": "Provisioning", "message": message}
    written, _ = await write_on_version(
        context, recorded, moving(recorded, provisioning, PENDING_PHASES, provisioned=(name,))
    )
    if written is not None:
        await event(context, gpr, "ColonyProvisioning", message)


async def provisioning_failed(context: OperatorContext, world: World, gpr: dict[str, Any]) -> bool:
    """A GPR whose provisioned colony failed or vanished: requeue it (requeueOnFailure, with the
    failed colony deleted) or fail it. True when the GPR was handled here."""
    status = gpr.get("status") or {}
    provisioned = status.get("provisionedColony")
    if not provisioned:
        return False
    colony = world.all_colonies.get(f"{gpr['metadata']['namespace']}/{provisioned}")
    phase = ((colony or {}).get("status") or {}).get("phase")
    if colony is not None and phase not in ("Failed", "Degraded"):
        return False
    why = f"colony {provisioned} " + ("disappeared" if colony is None else f"is {phase}")
    if colony is not None:
        await context.kube.delete(COLONY.api_version, COLONY.kind, provisioned, gpr["metadata"]["namespace"])
    requeue = gpr["spec"].get("requeueOnFailure", True)
    retries = int(status.get("retryCount") or 0) + 1
    update = (
        {"phase": "Queued", "provisionedColony": None, "retryCount": retries, "message": f"{why}; requeued"}
        if requeue
        else {"phase": "Failed", "message": why}
    )
    written, _ = await write_on_version(
        context, gpr, moving(gpr, update, PENDING_PHASES, provisioned=(provisioned,))
    )
    if written is not None:
        told = f"{why}; requeued (retry {retries})" if requeue else why
        await event(context, gpr, "ProvisioningFailed", told, warning=True)
    return True
