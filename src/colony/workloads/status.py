"""The standard phase of a framework custom resource, read through its definition's status mappings.

Mappings are checked in the order failed, succeeded, running, pending; the first phase with a
matching matcher wins, and an object no matcher recognises is Pending. A matcher is one of:

- `phase`: the value at the definition's `phasePath` equals the string;
- `conditions`: every listed (type, status) is present in the list at `conditionsPath`;
- `expression`: a jq expression on the whole object yields `expected`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from colony.workloads.definition import StatusMatcher, WorkloadDefinition, evaluate

WorkloadPhase = Literal["Pending", "Running", "Succeeded", "Failed"]

PHASE_ORDER: tuple[WorkloadPhase, ...] = ("Failed", "Succeeded", "Running", "Pending")
"""The order in which phases are tried."""


def _first(values: list[Any]) -> Any:
    return values[0] if values else None


def _matches(
    definition: WorkloadDefinition,
    where: str,
    matcher: StatusMatcher,
    obj: Mapping[str, Any],
    observed: dict[str, Any],
) -> bool:
    status = definition.spec.status
    if matcher.phase is not None:
        if "phase" not in observed:
            path = status.phase_path
            observed["phase"] = (
                _first(evaluate(definition, "spec.status.phasePath", path, obj, obj)) if path else None
            )
        return observed["phase"] is not None and str(observed["phase"]) == matcher.phase
    if matcher.conditions is not None:
        if "conditions" not in observed:
            path = status.conditions_path
            found = (
                _first(evaluate(definition, "spec.status.conditionsPath", path, obj, obj)) if path else None
            )
            observed["conditions"] = {
                str(c.get("type")): str(c.get("status"))
                for c in (found if isinstance(found, list) else [])
                if isinstance(c, Mapping)
            }
        present: dict[str, str] = observed["conditions"]
        return all(present.get(c.type) == c.status for c in matcher.conditions)
    if matcher.expression is not None:
        return bool(
            _first(evaluate(definition, f"{where}.expression", matcher.expression, obj, obj))
            == matcher.expected
        )
    return False


def workload_phase(definition: WorkloadDefinition, obj: Mapping[str, Any]) -> WorkloadPhase:
    """Pending, Running, Succeeded or Failed (see the module docstring for the rules).

    Raises `colony.workloads.definition.EvaluationError` when an expression fails on the object.
    """
    mappings = definition.spec.status.mappings
    observed: dict[str, Any] = {}
    by_phase: dict[WorkloadPhase, list[StatusMatcher]] = {
        "Failed": mappings.failed,
        "Succeeded": mappings.succeeded,
        "Running": mappings.running,
        "Pending": mappings.pending,
    }
    for phase in PHASE_ORDER:
        for index, matcher in enumerate(by_phase[phase]):
            if _matches(definition, f"spec.status.mappings.{phase.lower()}[{index}]", matcher, obj, observed):
                return phase
    return "Pending"
