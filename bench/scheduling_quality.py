"""Benchmark: scheduling quality of the queue orders on public GPU job traces (`colony simulate`).

Replays each trace of ../shared/data/traces/canonical through the real scheduler core with
simulated time, once per queue order (FIFO, strict priority, our default: priority + DRF fair
sharing + backfill by declared durations, shortest: highest response ratio first with aging, sjf:
strict shortest GPU time first with aging), on a
cluster sized so the trace queues. FIFO is the
baseline of the same run: the ratio columns are FIFO's figure over the policy's (above 1 = better).

    .venv/bin/python -m bench.scheduling_quality --size quick
"""

from __future__ import annotations

import argparse
import heapq
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.report import Table
from colony.scheduling.queueing.model import DEFAULT_AGING_S, QueueOrder
from colony.simulate.cluster import SimCluster
from colony.simulate.metrics import Metrics, compute_metrics
from colony.simulate.replay import replay
from colony.simulate.trace import TraceJob, load_trace, tile

# ../shared beside the checkout (as CI lays it out); the test data holds copies of the small traces.
TRACE_DIRS = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "traces" / "canonical",
    Path(__file__).resolve().parents[1] / "tests" / "data" / "traces",
)
POLICIES: tuple[QueueOrder, ...] = ("fifo", "priority", "default", "shortest", "sjf")
SHORTEST_AGING_S = 50 * 86400.0
"""Aging of the "shortest" and "sjf" rows (docs/gprs-and-queues.md: its maximum wait is bounded by it); the
other orders use the default aging (6 h)."""
TILED = "philly-10k"
"""philly-5vc.csv tiled to 10,000 jobs (colony.simulate.trace.tile): the 10k-job replay."""

# (trace file or TILED, cluster GPUs, jobs replayed or None for all). Cluster sizes make each trace
# queue: with enough GPUs every policy has zero wait and nothing is compared.
SIZES: dict[str, list[tuple[str, int, int | None]]] = {
    "tiny": [("tiresias-60.csv", 8, None)],
    "quick": [("tiresias-60.csv", 8, None), ("alibaba-openb.csv", 32, 1000), ("philly-5vc.csv", 64, 500)],
    "full": [
        ("tiresias-60.csv", 8, None),
        ("alibaba-openb.csv", 32, 1000),
        ("philly-5vc.csv", 128, None),
        (TILED, 128, None),
    ],
}
COLUMNS = [
    "trace",
    "GPUs",
    "jobs",
    "policy",
    "avg wait s",
    "p95 wait s",
    "p99 wait s",
    "max wait s",
    "avg JCT s",
    "utilization",
    "tenant fairness",
    "wait vs FIFO",
    "JCT vs FIFO",
    "replay s per 1k jobs",
    "baseline s per 1k jobs",
]


def baseline_replay(jobs: Sequence[TraceJob], gpus: int) -> float:
    """The plain sort-and-schedule baseline: FIFO on a pool of `gpus` GPUs (no nodes, no queues, no
    estimates), a heap of completions; returns its average wait (the figures are not compared, only
    the time it takes)."""
    pending = sorted((j for j in jobs if j.gpus <= gpus), key=lambda j: j.submit_time_s)
    ends: list[tuple[float, int]] = []
    free, total_wait, i, now = gpus, 0.0, 0, 0.0
    queue: list[TraceJob] = []
    while i < len(pending) or queue:
        arrival = pending[i].submit_time_s if i < len(pending) else math.inf
        now = min(arrival, ends[0][0]) if ends else arrival
        while ends and ends[0][0] <= now:
            free += heapq.heappop(ends)[1]
        while i < len(pending) and pending[i].submit_time_s <= now:
            queue.append(pending[i])
            i += 1
        while queue and queue[0].gpus <= free:
            job = queue.pop(0)
            free -= job.gpus
            total_wait += now - job.submit_time_s
            heapq.heappush(ends, (now + job.duration_s, job.gpus))
    return total_wait / max(len(pending), 1)


def trace_path(name: str) -> Path:
    """The first copy of trace `name` found in TRACE_DIRS."""
    for directory in TRACE_DIRS:
        if (directory / name).exists():
            return directory / name
    raise FileNotFoundError(f"trace {name} is in none of {', '.join(map(str, TRACE_DIRS))}")


def jain_index(shares: list[float]) -> float:
    """Jain's fairness index of the tenants' shares of busy GPU-seconds: 1.0 = equal shares,
    1/n = one tenant got everything; 1.0 for a single tenant."""
    if not shares or not any(shares):
        return 1.0
    return sum(shares) ** 2 / (len(shares) * sum(s * s for s in shares))


def _row(
    trace: str, gpus: int, metrics: Metrics, fifo: Metrics, per_1k: float, baseline_per_1k: float
) -> dict[str, Any]:
    def ratio(baseline: float, value: float) -> str:
        return "-" if value == 0 else f"{baseline / value:.2f}x"

    return {
        "trace": trace,
        "GPUs": gpus,
        "jobs": metrics.jobs,
        "policy": metrics.policy,
        "avg wait s": metrics.avg_wait_s,
        "p95 wait s": metrics.p95_wait_s,
        "p99 wait s": metrics.p99_wait_s,
        "max wait s": metrics.max_wait_s,
        "avg JCT s": metrics.avg_jct_s,
        "utilization": f"{metrics.utilization:.1%}",
        "tenant fairness": round(jain_index(list(metrics.tenant_shares.values())), 3),
        "wait vs FIFO": ratio(fifo.avg_wait_s, metrics.avg_wait_s),
        "JCT vs FIFO": ratio(fifo.avg_jct_s, metrics.avg_jct_s),
        "replay s per 1k jobs": f"{per_1k:.3f}",
        "baseline s per 1k jobs": f"{baseline_per_1k:.4f}",
    }


def run(size: str) -> list[Table]:
    """Replay every trace of `size` under each policy; one table with a row per trace and policy."""
    rows: list[dict[str, Any]] = []
    for name, gpus, limit in SIZES[size]:
        if name == TILED:
            jobs = tile(load_trace(trace_path("philly-5vc.csv")), 10_000)
        else:
            jobs = load_trace(trace_path(name), limit=limit)
        cluster = SimCluster.for_trace(jobs, gpus=gpus, gpus_per_node=8)
        results: dict[str, Metrics] = {}
        seconds: dict[str, float] = {}
        for policy in POLICIES:
            started = time.process_time()
            aging = SHORTEST_AGING_S if policy in ("shortest", "sjf") else DEFAULT_AGING_S
            results[policy] = compute_metrics(replay(jobs, cluster, policy, aging_s=aging))
            seconds[policy] = time.process_time() - started
        started = time.process_time()
        baseline_replay(jobs, gpus)
        baseline = (time.process_time() - started) * 1000 / max(len(jobs), 1)
        label = name if limit is None else f"{name} (first {limit})"
        rows += [
            _row(label, gpus, results[p], results["fifo"], seconds[p] * 1000 / max(len(jobs), 1), baseline)
            for p in POLICIES
        ]
    notes = [
        "Simulated time through the real scheduler core; durations are the traces' run times, used as "
        "declared durations. Baseline: FIFO in the same run; 'vs FIFO' = FIFO's figure / the policy's.",
        "default: a waiting request rises one priority level per 6 h (aging), aged requests first, "
        "then fair sharing, EASY backfill; shortest: the same with 50 d aging, then the highest "
        "response ratio (waited + duration) / duration; sjf: the same with 50 d aging, then the least "
        "GPU time (gpus x duration), no backfill past the reserved head of a priority; 'replay s per "
        "1k jobs': CPU seconds of replay per 1,000 trace jobs (process time: the machine is shared); "
        "baseline: a plain sort-and-schedule FIFO on a "
        "GPU pool (no nodes, quotas or scheduler core) over the same jobs.",
        "Tenant fairness: Jain's index of the tenants' shares of busy GPU-seconds (1 = equal).",
        "Published production queue delays for scale (AcmeTrace summary): Philly avg 3,761 s, Helios 862 s.",
    ]
    if size == "full":
        notes.append(
            f"alibaba-openb is replayed for its first 1,000 jobs; {TILED}: philly-5vc.csv tiled to "
            "10,000 jobs (python -m colony.simulate tile)."
        )
    return [Table("quality", "Scheduling quality (colony simulate)", COLUMNS, rows, notes)]


def main() -> None:
    """Print the table for --size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=list(SIZES), default="quick")
    for table in run(parser.parse_args().size):
        print(table.markdown())


if __name__ == "__main__":
    main()
