"""GPUProvisioningRequest handlers: validate, queue, wake the scheduler, release on deletion.

Scheduling itself (admission, placement, preemption, provisioning, release) is the loop in
colony.controllers.gpr_scheduler.
"""

from __future__ import annotations

from typing import Any

import kopf

from colony import events, metrics
from colony.api import GPR
from colony.api.gpr import GPRSpec
from colony.controllers.acceptance import accept_spec
from colony.controllers.gpr_scheduler import release_on_delete, wake_scheduler


@kopf.on.resume(GPR.group, GPR.version, GPR.plural)
@kopf.on.create(GPR.group, GPR.version, GPR.plural)
@kopf.on.update(GPR.group, GPR.version, GPR.plural)
async def reconcile_gpr(
    body: kopf.Body,
    spec: kopf.Spec,
    status: kopf.Status,
    meta: kopf.Meta,
    patch: kopf.Patch,
    memo: kopf.Memo,
    logger: Any,
    **_: Any,
) -> None:
    """Validate the spec and record observedGeneration and an Accepted condition (async: a sync
    handler would cost a worker-thread hop per request). The phase is the scheduling loop's to
    write: under load this handler runs on an old version of the request, and a phase written
    from it could undo an admission made meanwhile."""
    parsed = accept_spec(GPRSpec, spec, status, meta.get("generation"), patch, logger)
    if isinstance(parsed, GPRSpec):
        if not status.get("phase"):
            shapes = ", ".join(parsed.gpu_shapes or [parsed.gpu_shape or "any"])
            size = f"{parsed.number_of_gpu_nodes} node(s) x {parsed.number_of_gpus} GPU(s)"
            events.post(body, "GPRQueued", f"queued for {size} ({shapes})")
        logger.info("gpr accepted: %d node(s) x %d GPU(s)", parsed.number_of_gpu_nodes, parsed.number_of_gpus)
    wake_scheduler(memo)


@kopf.on.delete(GPR.group, GPR.version, GPR.plural)
async def delete_gpr(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """Free the request's reserved GPUs (and its ephemeral colony) before it goes."""
    await release_on_delete(memo, body)
    metrics.forget_job(body["metadata"]["namespace"], GPR.kind, body["metadata"]["name"])
