"""Teardown latency of ephemeral colonies: how long a colony nobody needs keeps costing money."""

from __future__ import annotations

from prometheus_client import Histogram

JOB, GPR = "job", "gpr"

TEARDOWN_LATENCY = Histogram(
    "colony_teardown_latency_seconds",
    "Seconds from the end of the work an ephemeral colony was made for to the request to delete it: "
    "trigger=job (its last DDPJob finished, grace period included) or trigger=gpr (its GPR released).",
    ["trigger"],
    buckets=(0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0),
)
for _trigger in (JOB, GPR):
    TEARDOWN_LATENCY.labels(_trigger)  # both series exist (with zero counts) from the start


def observe_teardown(trigger: str, seconds: float) -> None:
    """An ephemeral colony's deletion was requested `seconds` after its work ended."""
    TEARDOWN_LATENCY.labels(trigger).observe(max(0.0, seconds))
