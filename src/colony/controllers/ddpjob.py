"""DDPJob handlers (foundation stage: validate and report; running workers comes with its issue)."""

from __future__ import annotations

from typing import Any

import kopf

from colony.api import DDPJOB
from colony.api.ddpjob import DDPJobSpec
from colony.controllers.acceptance import accept_spec


@kopf.on.resume(DDPJOB.group, DDPJOB.version, DDPJOB.plural)
@kopf.on.create(DDPJOB.group, DDPJOB.version, DDPJOB.plural)
@kopf.on.update(DDPJOB.group, DDPJOB.version, DDPJOB.plural)
def reconcile_ddpjob(
    spec: kopf.Spec, status: kopf.Status, meta: kopf.Meta, patch: kopf.Patch, logger: Any, **_: Any
) -> None:
    """Validate the spec and record observedGeneration, an Accepted condition and worker counts."""
    parsed = accept_spec(DDPJobSpec, spec, status, meta.get("generation"), patch, logger)
    if isinstance(parsed, DDPJobSpec):
        patch.status["phase"] = status.get("phase") or "Pending"
        patch.status["workersTotal"] = parsed.parallelism
        logger.info("ddpjob accepted: %d worker(s)", parsed.parallelism)
