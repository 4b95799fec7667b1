"""Figures of merit of a replay: waits, job completion times, utilization, fairness.

Definitions (completed jobs only; dropped and unfinished jobs are counted, not averaged):
- wait: start of the run that completed - submission (= JCT - duration, since preempted jobs restart
  from scratch); p95 and p99 by the nearest-rank method (the ceil(0.95 n)-th smallest);
- JCT: completion - submission;
- makespan: last completion - first submission;
- utilization: busy GPU-seconds / (cluster GPUs x makespan), where busy counts the GPUs each gang
  held, including runs that were later preempted;
- tenant share: a tenant's busy GPU-seconds / all busy GPU-seconds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from colony.simulate.replay import ReplayResult


@dataclass(frozen=True)
class Metrics:
    """The figures of one replay."""

    policy: str
    jobs: int
    """Completed jobs."""
    dropped: int
    unfinished: int
    avg_wait_s: float
    p95_wait_s: float
    p99_wait_s: float
    max_wait_s: float
    avg_jct_s: float
    makespan_s: float
    utilization: float
    busy_gpu_s: float
    lost_gpu_s: float
    preemptions: int
    tenant_shares: Mapping[str, float]

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (the field names are the keys)."""
        return {
            "policy": self.policy,
            "jobs": self.jobs,
            "dropped": self.dropped,
            "unfinished": self.unfinished,
            "avg_wait_s": self.avg_wait_s,
            "p95_wait_s": self.p95_wait_s,
            "p99_wait_s": self.p99_wait_s,
            "max_wait_s": self.max_wait_s,
            "avg_jct_s": self.avg_jct_s,
            "makespan_s": self.makespan_s,
            "utilization": self.utilization,
            "busy_gpu_s": self.busy_gpu_s,
            "lost_gpu_s": self.lost_gpu_s,
            "preemptions": self.preemptions,
            "tenant_shares": dict(self.tenant_shares),
        }


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile: the ceil(fraction x n)-th smallest value (0.0 for no values)."""
    if not 0 < fraction <= 1:
        raise ValueError("fraction must be in (0, 1]")
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(1, math.ceil(fraction * len(ordered))) - 1]


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean (0.0 for no values)."""
    return math.fsum(values) / len(values) if values else 0.0


def compute_metrics(result: ReplayResult) -> Metrics:
    """The figures of `result` (see the module docstring for the definitions)."""
    waits = [outcome.wait_s for outcome in result.completed]
    jcts = [outcome.jct_s for outcome in result.completed]
    started = [outcome.job.submit_time_s for outcome in result.completed] + [
        job.submit_time_s for job in result.unfinished
    ]
    makespan = max((o.end_s for o in result.completed), default=0.0) - min(started, default=0.0)
    makespan = max(makespan, 0.0)
    busy = math.fsum(result.busy_gpu_s.values())
    return Metrics(
        policy=result.policy,
        jobs=len(result.completed),
        dropped=len(result.dropped),
        unfinished=len(result.unfinished),
        avg_wait_s=mean(waits),
        p95_wait_s=percentile(waits, 0.95),
        p99_wait_s=percentile(waits, 0.99),
        max_wait_s=max(waits, default=0.0),
        avg_jct_s=mean(jcts),
        makespan_s=makespan,
        utilization=busy / (result.cluster.gpus * makespan) if makespan > 0 else 0.0,
        busy_gpu_s=busy,
        lost_gpu_s=result.lost_gpu_s,
        preemptions=result.preemptions,
        tenant_shares={t: (s / busy if busy > 0 else 0.0) for t, s in sorted(result.busy_gpu_s.items())},
    )
