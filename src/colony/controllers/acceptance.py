"""Shared reconcile step: validate a spec with its pydantic model and report the result in status."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kopf
from pydantic import ValidationError

from colony.api.base import ApiModel
from colony.api.conditions import set_condition


def accept_spec(
    model: type[ApiModel],
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    generation: int | None,
    patch: kopf.Patch,
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger],
) -> ApiModel | None:
    """Parse `spec`; write observedGeneration and an `Accepted` condition into `patch.status`.

    Returns the parsed spec, or None when it is invalid (the condition then says why). Admission
    should already reject invalid specs; this guards objects created before a schema change.
    """
    conditions = list(status.get("conditions") or [])
    try:
        parsed = model.model_validate(dict(spec))
    except ValidationError as error:
        message = "; ".join(f"spec.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors())
        logger.warning("spec rejected: %s", message)
        patch.status["conditions"] = set_condition(
            conditions,
            type_="Accepted",
            status="False",
            reason="InvalidSpec",
            message=message,
            observed_generation=generation,
        )
        patch.status["observedGeneration"] = generation
        patch.status["phase"] = "Failed"
        return None
    patch.status.update(accepted(status, generation))
    return parsed


def accepted(status: Mapping[str, Any], generation: int | None) -> dict[str, Any]:
    """The status fields of a valid spec accepted at `generation`: observedGeneration and an
    `Accepted=True` condition added to (or updated in) `status`'s conditions."""
    conditions = set_condition(
        list(status.get("conditions") or []),
        type_="Accepted",
        status="True",
        reason="SpecValid",
        message="The spec is valid and the operator is reconciling it.",
        observed_generation=generation,
    )
    return {"conditions": conditions, "observedGeneration": generation}
