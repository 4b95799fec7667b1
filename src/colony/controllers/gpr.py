"""GPUProvisioningRequest handlers (foundation stage: validate and queue; scheduling comes later)."""

from __future__ import annotations

from typing import Any

import kopf

from colony.api import GPR
from colony.api.gpr import GPRSpec
from colony.controllers.acceptance import accept_spec


@kopf.on.resume(GPR.group, GPR.version, GPR.plural)
@kopf.on.create(GPR.group, GPR.version, GPR.plural)
@kopf.on.update(GPR.group, GPR.version, GPR.plural)
def reconcile_gpr(
    spec: kopf.Spec, status: kopf.Status, meta: kopf.Meta, patch: kopf.Patch, logger: Any, **_: Any
) -> None:
    """Validate the spec and record observedGeneration, an Accepted condition and phase Queued."""
    parsed = accept_spec(GPRSpec, spec, status, meta.get("generation"), patch, logger)
    if isinstance(parsed, GPRSpec):
        patch.status["phase"] = status.get("phase") or "Queued"
        logger.info("gpr accepted: %d node(s) x %d GPU(s)", parsed.number_of_gpu_nodes, parsed.number_of_gpus)
