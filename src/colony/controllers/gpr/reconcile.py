"""What keeps GPUs accounted for across faults, once per pass: each running request says whether
its colony answers (the ColonyReachable condition), the reservation labels on the nodes read are
reconciled with the requests that exist (and the colony's ledger of leftover labels cleared once
settled), and ephemeral colonies whose request is gone are deleted."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from colony import events
from colony.api import COLONY, GPR
from colony.api.conditions import set_condition
from colony.controllers.gpr.reservations import unlabel
from colony.controllers.gpr.world import UNREACHABLE, World, unreachable
from colony.controllers.gpr.writes import backing_off, concurrently, event, guarded, write_on_version
from colony.kube.resources import NotFound
from colony.scheduling.fault_rules import (
    COLONY_REACHABLE,
    Reservations,
    label_fixes,
    ledger_entry,
    orphaned_colonies,
    reachability_condition,
    reservations,
    settled_ledger,
    stale_ledger,
    transition_applies,
)
from colony.scheduling.queueing.objects import RUNNING_PHASES, request_key, reservation_label
from colony.scheduling.queueing.rules import ready_message

if TYPE_CHECKING:
    from colony.controllers.context import OperatorContext

log = logging.getLogger(__name__)


async def reconcile_colonies(context: OperatorContext, world: World) -> None:
    """Reachability of every running request, reservation labels of every colony read, orphaned
    ephemeral colonies (see the module docstring)."""
    await concurrently(
        guarded(context, gpr, "reachability", _write_reachability(context, world, gpr))
        for gpr in world.gprs
        if (gpr.get("status") or {}).get("phase") in RUNNING_PHASES
        and not gpr["metadata"].get("deletionTimestamp")
        and not backing_off(context, gpr)
    )
    if world.clusters:
        known = reservations(world.gprs)
        # labels being taken off by a release in flight are left to it
        releasing = {reservation_label(key) for key in context.scheduler.releases_in_flight}
        known = replace(known, done=known.done - releasing)
        for colony in sorted({key for key, _ in world.clusters}):
            try:  # one colony's failure leaves the others' labels reconciled
                await _reconcile_labels(context, world, colony, known)
            except Exception as error:  # the next pass tries again
                log.warning("reconciling reservation labels of colony %s failed: %s", colony, error)
    await _sweep_orphans(context, world)


async def _write_reachability(context: OperatorContext, world: World, gpr: Mapping[str, Any]) -> None:
    """The ColonyReachable condition (and message) of a running request, when it changed."""
    if (
        gpr["metadata"].get("deletionTimestamp")
        or (gpr.get("status") or {}).get("phase") not in RUNNING_PHASES
    ):
        return
    missing = unreachable(world, gpr)
    colony = str((gpr.get("status") or {}).get("colony"))
    if reachability_condition((gpr.get("status") or {}).get("conditions") or [], colony, missing) is None:
        return  # nothing to say (the common case: no write, no request)

    def update(current: Mapping[str, Any]) -> Mapping[str, Any] | None:
        status = current.get("status") or {}
        if status.get("phase") not in RUNNING_PHASES or status.get("colony") != colony:
            return None
        conditions = status.get("conditions") or []
        wanted = reachability_condition(conditions, colony, missing)
        if wanted is None:
            return None
        state, reason, message = wanted
        written = set_condition(
            conditions,
            type_=COLONY_REACHABLE,
            status=state,
            reason=reason,
            message=message,
            observed_generation=current["metadata"].get("generation"),
        )
        update = {"conditions": written, "message": message}
        if state == "True":
            update["message"] = ready_message(status) if status.get("phase") == "Ready" else "admitted"
        return update

    patched, _ = await write_on_version(context, gpr, update)
    if patched is not None:
        reason = "ColonyUnreachable" if missing else "ColonyReachable"
        await event(
            context,
            gpr,
            reason,
            str(patched.get("status", {}).get("message") or reason),
            warning=bool(missing),
        )


async def _reconcile_labels(context: OperatorContext, world: World, colony: str, known: Reservations) -> None:
    """Make the reservation labels on the nodes of `colony`'s clusters read this pass agree with the
    requests that exist (fault_rules.label_fixes), then clear the colony's ledger entries that are
    settled. A label written back for a request is taken off again if the request turns out to be
    deleted meanwhile (its delete handler may have run between this pass's reads)."""
    views = {cluster: view for (key, cluster), view in world.clusters.items() if key == colony}
    meta = (world.all_colonies.get(colony) or {}).get("metadata") or {}
    ledger = stale_ledger(meta)
    fixes = label_fixes(colony, {c: v.nodes for c, v in views.items()}, known, ledger)
    failed = False
    for fix in fixes:
        try:
            await views[fix.cluster].kube.patch_labels("v1", "Node", fix.node, None, fix.labels)
        except NotFound:
            continue
        except UNREACHABLE as error:
            log.warning(
                "reconciling labels of %s/%s in colony %s failed: %s", fix.cluster, fix.node, colony, error
            )
            failed = True
            continue
        log.info(
            "reservation labels of %s/%s in colony %s reconciled: %s",
            fix.cluster,
            fix.node,
            colony,
            fix.labels,
        )
    await _recheck_rewritten(
        context, world, {k for fix in fixes for k, v in fix.labels.items() if v is not None}
    )
    settled = settled_ledger(ledger, views) if not failed else []
    if settled and meta.get("name"):
        cleared = {ledger_entry(label, [])[0]: None for label in settled}
        with contextlib.suppress(NotFound):
            await context.kube.patch(
                COLONY.api_version,
                COLONY.kind,
                meta["name"],
                meta["namespace"],
                {"metadata": {"annotations": cleared}},
            )


async def _recheck_rewritten(context: OperatorContext, world: World, labels: set[str]) -> None:
    """Read again each request whose label was just written back; one deleted (or no longer Ready)
    meanwhile gets it taken off again."""
    if not labels:
        return
    for gpr in world.gprs:
        if reservation_label(request_key(gpr)) not in labels:
            continue
        meta = gpr["metadata"]
        fresh = await context.kube.get(GPR.api_version, GPR.kind, meta["name"], meta["namespace"])
        if not transition_applies(gpr, fresh, ("Ready",), same_allocation=True):
            await unlabel(context, world, gpr)


async def _sweep_orphans(context: OperatorContext, world: World) -> None:
    """Delete the ephemeral colonies whose owning request is gone (fault_rules.orphaned_colonies):
    e.g. the request was deleted while the operator was down after creating its colony."""
    for key in orphaned_colonies(world.all_colonies, world.gprs):
        namespace, name = key.split("/", 1)
        try:
            deleted = await context.kube.delete(COLONY.api_version, COLONY.kind, name, namespace)
        except Exception as error:  # the next pass tries again; the other orphans go on
            log.warning("deleting orphaned ephemeral colony %s failed: %s", key, error)
            continue
        if deleted:
            message = f"ephemeral colony {name} deleted: the request it was provisioned for is gone"
            log.info("%s (%s)", message, key)
            await events.post_now(
                context.kube,
                COLONY.api_version,
                COLONY.kind,
                world.all_colonies[key]["metadata"],
                "OrphanDeleted",
                message,
            )
