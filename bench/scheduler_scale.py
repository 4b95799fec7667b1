"""Benchmark: one scheduling pass (`colony.scheduling.queueing.core.schedule`) at scale.

Snapshots of 1k/10k/50k pending requests x 50/200/1000 colonies (25 nodes of 8 GPUs per colony, three
GPU types, a few prices per type, 5 cohorts x 6 queues with borrowing, half of the GPUs already held by
running requests, some of them evictable). Pending requests: gangs of 1x1 up to 4x8 GPUs, one, two
or any GPU type, priorities 0-3, 70 % with a declared duration, a few restricted to some colonies or
auto-provisioned.

Each pass is timed with time.perf_counter, best of 5, twice: with the pure-Python core of the venv
and, in a subprocess, with the core compiled by mypyc (hack/build-compiled.sh, what the container
image runs). Baseline, measured the same way in each process: sorting the pending requests by
(-priority, submitted_s); the ratio says how many such sorts one compiled pass costs.

    .venv/bin/python -m bench.scheduler_scale [--size tiny|quick|full]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable

from bench.compiled import ROOT, compiled_core_env
from bench.report import Table
from colony.scheduling.offers.model import Offer
from colony.scheduling.queueing.core import schedule
from colony.scheduling.queueing.model import (
    ANY_GPU_TYPE,
    ColonyInfo,
    Decisions,
    GpuNode,
    GpuRequest,
    NodeAllocation,
    Placement,
    QueueQuota,
    RunningRequest,
    Snapshot,
)

TYPES = ("A100", "H100", "L40S")
PRICES = {"A100": 1.8, "H100": 3.2, "L40S": 0.9}
NODES_PER_COLONY = 25
GPUS_PER_NODE = 8
SHAPES = ((1, 1), (1, 2), (1, 4), (1, 8), (2, 8), (4, 8))
NOW = 1_000_000.0


def build(pending_count: int, colony_count: int, seed: int = 7) -> Snapshot:
    """A deterministic snapshot of the given size."""
    rng = random.Random(seed)
    colonies = tuple(
        ColonyInfo(f"c{i:04d}", PRICES[TYPES[i % 3]] * (1 + 0.05 * (i // 3 % 4)), order=i)
        for i in range(colony_count)
    )
    nodes = tuple(
        GpuNode(c.name, f"n{j:02d}", TYPES[i % 3], GPUS_PER_NODE)
        for i, c in enumerate(colonies)
        for j in range(NODES_PER_COLONY)
    )
    total = len(nodes) * GPUS_PER_NODE
    queue_names = [f"q{c}{j}" for c in range(5) for j in range(6)]
    queues = tuple(
        QueueQuota(
            name,
            {ANY_GPU_TYPE: total // len(queue_names)}
            if k % 2
            else {t: total // len(queue_names) // 3 for t in TYPES},
            cohort=f"cohort{k // 6}",
            borrowing_limit={} if k % 3 else {ANY_GPU_TYPE: total // len(queue_names)},
            weight=1.0 + k % 2,
        )
        for k, name in enumerate(queue_names)
    )

    free = {(n.colony, n.name): n.capacity for n in nodes}
    by_colony: dict[str, list[GpuNode]] = {}
    for n in nodes:
        by_colony.setdefault(n.colony, []).append(n)
    running: list[RunningRequest] = []
    used = 0
    while used < total // 2:
        colony = colonies[rng.randrange(colony_count)]
        count, per_node = rng.choice(SHAPES[:5])
        fitting = [n for n in by_colony[colony.name] if free[(n.colony, n.name)] >= per_node]
        if len(fitting) < count:
            continue
        chosen = rng.sample(fitting, count)
        for n in chosen:
            free[(n.colony, n.name)] -= per_node
        used += count * per_node
        request = GpuRequest(
            f"run/{len(running)}",
            rng.choice(queue_names),
            rng.randrange(3),
            NOW - rng.uniform(60, 36_000),
            (chosen[0].gpu_type,),
            count,
            per_node,
            duration_s=rng.uniform(600, 72_000) if rng.random() < 0.7 else None,
            evictable=rng.random() < 0.15,
        )
        placement = Placement(
            colony.name, chosen[0].gpu_type, tuple(NodeAllocation(n.name, per_node) for n in chosen)
        )
        running.append(RunningRequest(request, placement, request.submitted_s))

    pending = []
    for i in range(pending_count):
        count, per_node = rng.choice(SHAPES)
        kind = rng.random()
        types = (
            (rng.choice(TYPES),) if kind < 0.6 else tuple(sorted(rng.sample(TYPES, 2))) if kind < 0.8 else ()
        )
        pending.append(
            GpuRequest(
                f"pend/{i}",
                rng.choice(queue_names) if rng.random() > 0.05 else "",
                rng.randrange(4),
                NOW - rng.uniform(0, 86_400),
                types,
                count,
                per_node,
                duration_s=rng.uniform(600, 36_000) if rng.random() < 0.7 else None,
                evictable=rng.random() < 0.3,
                auto_provision=rng.random() < 0.05,
                colonies=frozenset(c.name for c in rng.sample(colonies, 3)) if rng.random() < 0.05 else None,
            )
        )
    offers = tuple(
        Offer("aws", region, None, f"{t.lower()}.{n}x", t, n, 12.0 * n, 100.0 * n, PRICES[t] * n * k, None)
        for t in TYPES
        for n in (1, 4, 8)
        for region, k in (("us-east-1", 1.0), ("eu-west-1", 1.1))
    )
    return Snapshot(
        now_s=NOW,
        pending=tuple(pending),
        running=tuple(running),
        nodes=nodes,
        colonies=colonies,
        queues=queues,
        offers=offers,
        placement_policy="cheapest",
        order="default",
    )


def best_of(runs: int, fn: Callable[[], object]) -> float:
    """Best wall time of `runs` calls, in milliseconds."""
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def measure(cases: list[tuple[int, int]]) -> list[dict[str, float]]:
    """Time one pass and the sort baseline for each (pending, colonies) case in this process."""
    rows = []
    for pending_count, colony_count in cases:
        snapshot = build(pending_count, colony_count)
        decisions: list[Decisions] = []

        def one_pass(s: Snapshot = snapshot, out: list[Decisions] = decisions) -> None:
            out.append(schedule(s))

        def baseline(s: Snapshot = snapshot) -> None:
            sorted(s.pending, key=lambda r: (-r.priority, r.submitted_s))

        ms = best_of(5, one_pass)
        d = decisions[-1]
        rows.append(
            {
                "pending": pending_count,
                "colonies": colony_count,
                "nodes": len(snapshot.nodes),
                "running": len(snapshot.running),
                "admitted": len(d.admitted),
                "preempted": len(d.preemptions),
                "provisioned": len(d.provisions),
                "pass_ms": ms,
                "sort_ms": best_of(5, baseline),
            }
        )
    return rows


SIZES: dict[str, list[tuple[int, int]]] = {
    "tiny": [(1_000, 50)],
    "quick": [(p, c) for p in (1_000, 10_000) for c in (50, 200)],
    "full": [(p, c) for p in (1_000, 10_000, 50_000) for c in (50, 200, 1_000)],
}
COLUMNS = [
    "pending", "colonies", "nodes", "running", "admitted", "preempted",
    "pure ms", "compiled ms", "speedup", "sort ms", "pass/sort",
]  # fmt: skip


def compiled_rows(size: str) -> list[dict[str, float]]:
    """The same measurements with the mypyc-compiled core, in a subprocess."""
    args = [sys.executable, "-m", "bench.scheduler_scale", "--rows-json", "--size", size]
    out = subprocess.run(
        args, check=True, capture_output=True, text=True, env=compiled_core_env(), cwd=ROOT
    ).stdout
    rows: list[dict[str, float]] = json.loads(out)
    return rows


def run(size: str) -> list[Table]:
    """One table: per case, the pure and compiled pass times and the sort baseline."""
    compiled = compiled_rows(size)
    pure = measure(SIZES[size])
    rows: list[dict[str, object]] = []
    for p, c in zip(pure, compiled, strict=True):
        if (c["admitted"], c["preempted"]) != (p["admitted"], p["preempted"]):
            raise RuntimeError(f"compiled and pure cores disagree on {p['pending']} x {p['colonies']}")
        rows.append(
            {
                **{
                    k: int(p[k]) for k in ("pending", "colonies", "nodes", "running", "admitted", "preempted")
                },
                "pure ms": p["pass_ms"],
                "compiled ms": c["pass_ms"],
                "speedup": f"{p['pass_ms'] / c['pass_ms']:.1f}x",
                "sort ms": c["sort_ms"],
                "pass/sort": f"{c['pass_ms'] / c['sort_ms']:.0f}",
            }
        )
    at_target = [r for r in rows if (r["pending"], r["colonies"]) == (10_000, 200)]
    notes = [
        "Best of 5 passes each. Baseline in the same process: one sort of the pending requests by "
        "(-priority, submitted); pass/sort = compiled pass / that sort.",
        "Cost grows roughly linearly with pending requests and with nodes (25 per colony).",
    ]
    if at_target:
        ms = float(str(at_target[0]["compiled ms"]))
        notes.append(
            f"Target 10k pending x 200 colonies under 100 ms: {ms:.1f} ms, "
            + ("met." if ms < 100 else "MISSED.")
        )
    return [
        Table(
            "scheduler", "Scheduler core: one decision pass", COLUMNS, rows, notes, {"pass_ms_10k_200": 100}
        )
    ]


def main() -> None:
    """Print the table for --size (or, with --rows-json, this process's raw rows)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=list(SIZES), default="full")
    parser.add_argument("--rows-json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rows_json:
        if not core_is_compiled():
            raise SystemExit("--rows-json expects the compiled core first on PYTHONPATH")
        print(json.dumps(measure(SIZES[args.size])))
        return
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    for table in run(args.size):
        print(table.markdown())


def core_is_compiled() -> bool:
    """Whether the scheduler core imported here is the mypyc build (an extension module)."""
    import colony.scheduling.queueing.core as core

    return not str(core.__file__).endswith(".py")


if __name__ == "__main__":
    main()
