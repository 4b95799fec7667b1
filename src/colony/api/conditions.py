"""Pure helpers for `status.conditions` following the Kubernetes API conventions."""

from __future__ import annotations

from typing import Any

from colony.timefmt import now_rfc3339

__all__ = ["now_rfc3339", "set_condition"]


def set_condition(
    conditions: list[dict[str, Any]] | None,
    *,
    type_: str,
    status: str,
    reason: str,
    message: str,
    observed_generation: int | None,
    now: str | None = None,
) -> list[dict[str, Any]]:
    """Return a copy of `conditions` with the condition of `type_` set.

    lastTransitionTime changes only when the status changes, so watchers can tell how long a state
    has held; reason, message and observedGeneration always take the new values.
    """
    timestamp = now or now_rfc3339()
    result = [dict(c) for c in conditions or [] if c.get("type") != type_]
    previous = next((c for c in conditions or [] if c.get("type") == type_), None)
    transition = (
        previous["lastTransitionTime"]
        if previous and previous.get("status") == status and previous.get("lastTransitionTime")
        else timestamp
    )
    condition: dict[str, Any] = {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": transition,
    }
    if observed_generation is not None:
        condition["observedGeneration"] = observed_generation
    result.append(condition)
    return sorted(result, key=lambda c: str(c["type"]))
