"""Bulk acceptance of GPR specs: each spec not yet accepted at its generation gets
observedGeneration and an Accepted condition (or fails, naming why), and a new valid request a
GPRQueued event; at most ACCEPTS_PER_PASS per pass, oldest first."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import kopf

from colony.api.gpr import GPRSpec
from colony.controllers.acceptance import accept_spec
from colony.controllers.gpr.world import World
from colony.controllers.gpr.writes import backing_off, concurrently, event, guarded, patch
from colony.kube.resources import KubeApiError
from colony.scheduling.queueing.objects import request_key

if TYPE_CHECKING:
    from colony.controllers.context import OperatorContext

ACCEPTS_PER_PASS = 500
"""Most new specs a pass accepts (status and Event); the rest follow in the next passes."""

log = logging.getLogger(__name__)


async def accept(context: OperatorContext, world: World) -> None:
    """Validate the specs not yet accepted at their generation, in bulk (at most
    ACCEPTS_PER_PASS, oldest first; scheduling does not wait for it: a pass parses every spec
    itself): observedGeneration and an Accepted condition (an invalid spec fails the request with
    the reason), and a GPRQueued event for a new valid request. The world keeps the written
    versions, so this pass's later writes go onto them."""
    position = {id(g): i for i, g in enumerate(world.gprs)}

    async def accept_one(gpr: dict[str, Any]) -> None:
        meta = gpr["metadata"]
        status = gpr.get("status") or {}
        changes = kopf.Patch()
        parsed = accept_spec(GPRSpec, gpr.get("spec") or {}, status, meta.get("generation"), changes, log)
        try:
            patched = await patch(context, gpr, dict(changes.status), only_if_unchanged=True)
        except KubeApiError as error:  # one request's failed write must not fail the pass
            log.warning("accepting %s failed (retried next pass): %s", request_key(gpr), error)
            return
        if patched is None:
            return  # gone, or changed since this read: the next pass accepts the newer version
        world.gprs[position[id(gpr)]] = patched
        if isinstance(parsed, GPRSpec) and not status.get("phase"):
            shapes = ", ".join(parsed.gpu_shapes or [parsed.gpu_shape or "any"])
            size = f"{parsed.number_of_gpu_nodes} node(s) x {parsed.number_of_gpus} GPU(s)"
            await event(context, patched, "GPRQueued", f"queued for {size} ({shapes})")

    todo = sorted(
        (
            g
            for g in world.gprs
            if not g["metadata"].get("deletionTimestamp")
            and (g.get("status") or {}).get("observedGeneration") != g["metadata"].get("generation")
            and not backing_off(context, g)
        ),
        key=lambda g: (str(g["metadata"].get("creationTimestamp") or ""), request_key(g)),
    )
    await concurrently(
        guarded(context, g, "accepting the spec", accept_one(g)) for g in todo[:ACCEPTS_PER_PASS]
    )
