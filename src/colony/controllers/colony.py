"""Colony handlers (foundation stage: validate and report; provisioning comes with its issue)."""

from __future__ import annotations

from typing import Any

import kopf

from colony.api import COLONY
from colony.api.colony import ColonySpec
from colony.controllers.acceptance import accept_spec


@kopf.on.resume(COLONY.group, COLONY.version, COLONY.plural)
@kopf.on.create(COLONY.group, COLONY.version, COLONY.plural)
@kopf.on.update(COLONY.group, COLONY.version, COLONY.plural)
def reconcile_colony(
    spec: kopf.Spec, status: kopf.Status, meta: kopf.Meta, patch: kopf.Patch, logger: Any, **_: Any
) -> None:
    """Validate the spec and record observedGeneration, an Accepted condition and the counts."""
    parsed = accept_spec(ColonySpec, spec, status, meta.get("generation"), patch, logger)
    if isinstance(parsed, ColonySpec):
        patch.status["phase"] = status.get("phase") or "Pending"
        patch.status["totalClusters"] = len(parsed.colony_clusters)
        patch.status["readyClusters"] = status.get("readyClusters") or 0
        logger.info("colony accepted with %d cluster(s)", len(parsed.colony_clusters))
