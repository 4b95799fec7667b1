"""Benchmark `storm`: GPR and DDPJob storms on one colony while the operator is SIGKILLed at random,
seeded moments (issue 17, point 7b; the same storm as tests/integration/test_chaos_storm.py, larger).

A fresh management cluster and a colony cluster (2 kwok nodes x 8 A100-80GB, Volcano) run locally;
the operator is a real process, killed with SIGKILL (no cleanup) and started again at each kill
moment. A watch sees every version of every node and counts over-reservations (reservation labels
above capacity: an invariant violation, which must stay 0). After the last arrival the storm
converges when every request and job finished, no reservation label is left and no pod of a
finished job holds GPUs; the time that takes is reported.

    .venv/bin/python -m bench --only storm [--size tiny|quick|full]   (seed: COLONY_STORM_SEED)
"""

from __future__ import annotations

import functools
import os
import tempfile
import time
from pathlib import Path

from tests.storm import Storm, StormResult, StormSize, colony_manifests, plan_storm, summary

from bench.operator_process import start_operator
from bench.report import Table
from colony.devenv.environment import start_colony_cluster, start_management_cluster
from colony.devenv.kwok import GPUNodeSpec
from colony.devenv.tools import ensure_tools

NAMESPACE = "bench-storm"
NODES = (GPUNodeSpec("a100", product="NVIDIA-A100-SXM4-80GB", gpus=8, gpu_memory_mib=81920, count=2),)
SIZE_PARAMS = {
    "tiny": StormSize(gprs=12, ddpjobs=2, kills=2, arrivals_s=12.0, converge_limit_s=90.0),
    "quick": StormSize(gprs=60, ddpjobs=8, kills=6, arrivals_s=60.0, converge_limit_s=180.0),
    "full": StormSize(gprs=150, ddpjobs=20, kills=15, arrivals_s=150.0, converge_limit_s=300.0),
}


def measure(size: StormSize, seed: int) -> tuple[StormResult, float]:
    """Both clusters, the storm, the result (and the seconds the storm took, arrivals included)."""
    tools = ensure_tools()
    management = start_management_cluster(tools)
    try:
        colony = start_colony_cluster(tools, "bench-storm-colony", NODES, upstream=())
        try:
            management.kubectl("create", "namespace", NAMESPACE)
            logs = Path(tempfile.mkdtemp(prefix="bench-storm-"))
            operator = functools.partial(start_operator, management, namespace=NAMESPACE)
            storm = Storm(management, colony, NAMESPACE, operator, logs)
            try:
                storm.start(*colony_manifests(NAMESPACE, colony.kubeconfig()))
                started = time.monotonic()
                result = storm.run(plan_storm(seed, size), size.converge_limit_s)
                took = time.monotonic() - started
            finally:
                storm.clean_up()
        finally:
            colony.stop()
    finally:
        management.stop()
    return result, took


def run(size: str) -> list[Table]:
    """Run one storm at `size`; one table row with kills, violations and the time to converge."""
    params = SIZE_PARAMS[size]
    seed = int(os.environ.get("COLONY_STORM_SEED", "4242"))
    result, took = measure(params, seed)
    print(summary(result), flush=True)
    restart = sorted(result.restarts_s)[len(result.restarts_s) // 2] if result.restarts_s else 0.0
    row = {
        "seed": seed,
        "GPRs": params.gprs,
        "DDPJobs": params.ddpjobs,
        "kills survived": result.kills,
        "invariant violations": len(result.violations),
        "node versions watched": result.node_versions,
        "converge s": None if result.converge_s is None else round(result.converge_s, 1),
        "storm s": round(took, 1),
        "restart p50 s": round(restart, 1),
        "left over": len(result.unfinished) + len(result.labels_left) + len(result.pods_left),
    }
    notes = [
        f"arrivals over {params.arrivals_s:.0f} s on 16 A100 GPUs; the operator SIGKILLed"
        f" {params.kills} times and restarted (restart: until it has logged in again)",
        "converge s: from the last arrival or kill until every request and job finished, no reservation"
        " label and no GPU-holding pod of a finished job is left",
    ]
    if result.violations:
        notes.append(f"VIOLATIONS: {result.violations[:5]}")
    if not result.ok:
        notes.append(
            f"NOT CONVERGED: unfinished {result.unfinished[:5]}, labels {result.labels_left[:5]},"
            f" pods {result.pods_left[:5]}, watch errors {result.watch_errors[:2]}"
        )
    targets = {"invariant violations": 0, "left over": 0}
    columns = list(row)
    return [Table("storm", f"Operator SIGKILLed during a storm ({size})", columns, [row], notes, targets)]
