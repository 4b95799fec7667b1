"""Bulk acceptance of GPR specs: each spec not yet accepted at its generation gets
observedGeneration and an Accepted condition (or fails, naming why), and a new valid request a
GPRQueued event; at most ACCEPTS_PER_PASS per pass, oldest first, in the background after the
pass's decisions (a request admitted by the pass is accepted by its admission write)."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

import kopf

from colony.api.gpr import GPRSpec
from colony.controllers.acceptance import accept_spec, accepted
from colony.controllers.gpr.world import World
from colony.controllers.gpr.writes import (
    StatusUpdate,
    backing_off,
    concurrently,
    event_in_background,
    guarded,
    is_accepted,
    patch,
)
from colony.kube.resources import KubeApiError
from colony.scheduling.queueing.objects import request_key

if TYPE_CHECKING:
    from colony.controllers.context import OperatorContext

ACCEPTS_PER_PASS = 500
"""Most new specs a pass accepts (status and Event); the rest follow in the next passes."""
ACCEPT_WRITES = "gpr-accept-writes"
"""The context's task writing a pass's acceptances in the background (one at a time)."""

log = logging.getLogger(__name__)


def queued_message(spec: GPRSpec) -> str:
    """The GPRQueued event's message: what a new request waits for."""
    shapes = ", ".join(spec.gpu_shapes or [spec.gpu_shape or "any"])
    return f"queued for {spec.number_of_gpu_nodes} node(s) x {spec.number_of_gpus} GPU(s) ({shapes})"


def with_acceptance(update: StatusUpdate) -> StatusUpdate:
    """`update`, accepting the spec of the version it is applied to when that version's
    generation was not accepted yet (the scheduler decides only on valid specs): a request
    admitted in the pass that first sees it is accepted by that one write."""

    def apply(current: Mapping[str, Any]) -> Mapping[str, Any] | None:
        status = update(current)
        if status is None:
            return None
        if is_accepted(current):
            return status
        return {**status, **accepted(current.get("status") or {}, current["metadata"].get("generation"))}

    return apply


async def accept(context: OperatorContext, world: World, decided: Collection[str] = ()) -> None:
    """Validate the specs not yet accepted at their generation, in bulk (at most
    ACCEPTS_PER_PASS, oldest first, except the requests in `decided`: the pass's decisions write
    them; scheduling does not wait for it: a pass parses every spec itself): observedGeneration
    and an Accepted condition (an invalid spec fails the request with the reason), and a GPRQueued
    event for a new valid request (posted in the background). Each write applies only to the
    version read: one changed since is accepted by a later pass."""

    async def accept_one(gpr: dict[str, Any]) -> None:
        meta = gpr["metadata"]
        status = gpr.get("status") or {}
        changes = kopf.Patch()
        parsed = accept_spec(GPRSpec, gpr.get("spec") or {}, status, meta.get("generation"), changes, log)
        try:
            patched = await patch(context, gpr, dict(changes.status), only_if_unchanged=True)
        except KubeApiError as error:  # one request's failed write must not fail the others
            log.warning("accepting %s failed (retried next pass): %s", request_key(gpr), error)
            return
        if patched is None:
            return  # gone, or changed since this read: the next pass accepts the newer version
        if isinstance(parsed, GPRSpec) and not status.get("phase"):
            event_in_background(context, patched, "GPRQueued", queued_message(parsed))

    todo = sorted(
        (
            g
            for g in world.gprs
            if not g["metadata"].get("deletionTimestamp")
            and not is_accepted(g)
            and request_key(g) not in decided
            and not backing_off(context, g)
        ),
        key=lambda g: (str(g["metadata"].get("creationTimestamp") or ""), request_key(g)),
    )
    await concurrently(
        guarded(context, g, "accepting the spec", accept_one(g)) for g in todo[:ACCEPTS_PER_PASS]
    )
