"""Cost: price and accrued cost per colony, GPU-hours and cost per job (DDPJob or GPR)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from prometheus_client import Gauge

PRICE_PER_HOUR = Gauge(
    "colony_price_per_hour_usd", "USD per hour of a colony's billed clusters.", ["namespace", "colony"]
)
COST_ACCRUED = Gauge("colony_cost_accrued_usd", "USD a colony has accrued.", ["namespace", "colony"])
JOB_GPU_HOURS = Gauge("colony_job_gpu_hours", "GPU-hours a job has used.", ["namespace", "kind", "job"])
JOB_COST = Gauge("colony_job_cost_usd", "USD a job has cost.", ["namespace", "kind", "job"])


def record_colony_cost(namespace: str, colony: str, status: Mapping[str, Any]) -> None:
    """Export a colony's price and accrued cost from its status."""
    PRICE_PER_HOUR.labels(namespace, colony).set(float(status.get("pricePerHour") or 0.0))
    COST_ACCRUED.labels(namespace, colony).set(float(status.get("costAccrued") or 0.0))


def record_job_usage(namespace: str, kind: str, job: str, usage: Mapping[str, Any]) -> None:
    """Export a job's GPU-hours and cost (a job without a known price exports only GPU-hours)."""
    JOB_GPU_HOURS.labels(namespace, kind, job).set(float(usage.get("gpuHours") or 0.0))
    if usage.get("cost") is not None:
        JOB_COST.labels(namespace, kind, job).set(float(usage["cost"]))


def forget_colony_cost(namespace: str, colony: str) -> None:
    """Drop a deleted colony's cost series."""
    for gauge in (PRICE_PER_HOUR, COST_ACCRUED):
        with contextlib.suppress(KeyError):
            gauge.remove(namespace, colony)


def forget_job(namespace: str, kind: str, job: str) -> None:
    """Drop a deleted job's series."""
    for gauge in (JOB_GPU_HOURS, JOB_COST):
        with contextlib.suppress(KeyError):
            gauge.remove(namespace, kind, job)
