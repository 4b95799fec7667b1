"""Benchmark `soak`: colony churn for a long time; do the operator's open files, threads and memory
stay flat? (issue 17, point 5: kubeconfigs loaded from memory, client caches that forget deleted
colonies, nothing that grows without bound.)

A fresh management cluster and a small colony cluster (kwok nodes) run locally; the operator is a
real process. Each cycle registers COLONIES_PER_CYCLE new `existing` Colonies over the colony
cluster (each with a kubeconfig Secret of its own, so each costs the operator a new client), waits
until they are Ready, runs one short GPR on them, then deletes the GPR, the Colonies and their
Secrets and waits until they are gone. Every SAMPLE_S the operator's open file descriptors,
threads and RSS (from /proc) are sampled.

Verdict: the medians of the first and the last fifth of the run (after one warm-up cycle) are
compared; a resource is flat when it grew by no more than its tolerance (fds 5 or 10 %, threads 2 or
10 %, RSS 16 MiB or 10 %, whichever is larger).

    .venv/bin/python -m bench --only soak [--size tiny|quick|full]   (tiny 0.5, quick 5, full 30 min;
    COLONY_SOAK_MINUTES overrides)
"""

from __future__ import annotations

import base64
import os
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.operator_memory import rss_mib
from bench.operator_process import start_operator
from bench.report import Table
from colony.devenv.cluster import LocalCluster
from colony.devenv.environment import start_colony_cluster, start_management_cluster
from colony.devenv.kwok import GPUNodeSpec
from colony.devenv.tools import ensure_tools

NAMESPACE = "bench-soak"
NODES = (GPUNodeSpec("a100", product="NVIDIA-A100-SXM4-80GB", gpus=8, gpu_memory_mib=81920, count=1),)
MINUTES = {"tiny": 0.5, "quick": 5.0, "full": 30.0}
COLONIES_PER_CYCLE = 3
SAMPLE_S = 2.0
TOLERANCE = {"open files": (5, 0.10), "threads": (2, 0.10), "RSS MiB": (16, 0.10)}
"""Allowed growth per resource: (absolute, relative), the larger applies."""


@dataclass(frozen=True)
class Sample:
    """One look at the operator process: seconds since the start, fds, threads, RSS (MiB)."""

    t: float
    fds: int
    threads: int
    rss: float


def sample(pid: int, t: float) -> Sample:
    """Open file descriptors, threads and RSS of `pid` now."""
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    threads = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            threads = int(line.split()[1])
    return Sample(t, fds, threads, rss_mib(pid))


class Sampler:
    """Samples a process every SAMPLE_S in a thread until stopped."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="soak-sampler")
        self._started = time.monotonic()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(sample(self.pid, time.monotonic() - self._started))
            self._stop.wait(SAMPLE_S)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> list[Sample]:
        self._stop.set()
        self._thread.join(10)
        return self.samples


def verdict(samples: list[Sample]) -> list[dict[str, Any]]:
    """Per resource: the median of the first and the last fifth, the growth, and whether it is flat."""
    if len(samples) < 5:
        raise ValueError(f"{len(samples)} samples: run longer")
    fifth = max(1, len(samples) // 5)
    head, tail = samples[:fifth], samples[-fifth:]
    rows = []
    for name, value in (("open files", "fds"), ("threads", "threads"), ("RSS MiB", "rss")):
        start = statistics.median(getattr(s, value) for s in head)
        end = statistics.median(getattr(s, value) for s in tail)
        absolute, relative = TOLERANCE[name]
        allowed = max(absolute, relative * start)
        rows.append(
            {
                "resource": name,
                "start": round(start, 1),
                "end": round(end, 1),
                "peak": round(max(getattr(s, value) for s in samples), 1),
                "growth": round(end - start, 1),
                "allowed": round(allowed, 1),
                "flat": end - start <= allowed,
            }
        )
    return rows


def _colony(index: int, kubeconfig: str) -> list[dict[str, Any]]:
    name = f"soak-{index:05d}"
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{name}-kubeconfig", "namespace": NAMESPACE},
        "data": {"value": base64.b64encode(kubeconfig.encode()).decode()},
    }
    colony = {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "Colony",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "k8sVersion": "v1.36.3",
            "colonyClusters": [
                {"clusterName": "onprem", "existing": {"kubeconfigSecretRef": {"name": f"{name}-kubeconfig"}}}
            ],
        },
    }
    return [secret, colony]


def _phases(management: LocalCluster, kind: str) -> dict[str, str | None]:
    items = management.get_json(kind, "-n", NAMESPACE)["items"]
    return {i["metadata"]["name"]: (i.get("status") or {}).get("phase") for i in items}


def _until(check: Any, limit_s: float, what: str) -> None:
    deadline = time.monotonic() + limit_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"soak: {what} not within {limit_s:.0f}s")
        time.sleep(0.5)


def churn_cycle(management: LocalCluster, kubeconfig: str, first: int) -> None:
    """Register COLONIES_PER_CYCLE colonies, run one short GPR, delete everything again."""
    names = [f"soak-{i:05d}" for i in range(first, first + COLONIES_PER_CYCLE)]
    management.apply(
        [doc for i in range(first, first + COLONIES_PER_CYCLE) for doc in _colony(i, kubeconfig)]
    )
    _until(lambda: all(_phases(management, "colony").get(n) == "Ready" for n in names), 120, "colonies Ready")
    gpr = {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "GPUProvisioningRequest",
        "metadata": {"name": f"soak-{first:05d}", "namespace": NAMESPACE},
        "spec": {"gpuShape": "A100-80GB", "numberOfGPUNodes": 1, "numberOfGPUs": 1, "exitDuration": "1s"},
    }
    management.apply([gpr])
    _until(
        lambda: _phases(management, "gpr").get(gpr["metadata"]["name"]) == "Expired", 120, "the GPR expired"
    )
    management.kubectl("delete", "gpr", "--all", "-n", NAMESPACE, "--wait=true", "--timeout=120s")
    management.kubectl("delete", "colony", *names, "-n", NAMESPACE, "--wait=true", "--timeout=120s")
    secrets = [f"{n}-kubeconfig" for n in names]
    management.kubectl("delete", "secret", *secrets, "-n", NAMESPACE, "--wait=true", "--timeout=60s")


def measure(minutes: float) -> tuple[list[Sample], int]:
    """Churn for `minutes` after one warm-up cycle; the samples after the warm-up and the cycles run."""
    tools = ensure_tools()
    management = start_management_cluster(tools)
    try:
        colony = start_colony_cluster(tools, "bench-soak-colony", NODES, upstream=(), volcano=False)
        try:
            management.kubectl("create", "namespace", NAMESPACE)
            log = Path(tempfile.mkdtemp(prefix="bench-soak-")) / "operator.log"
            operator = start_operator(management, log, NAMESPACE)
            kubeconfig = colony.kubeconfig()
            try:
                assert operator.pid is not None
                churn_cycle(management, kubeconfig, 0)  # warm-up: imports, first clients, informers
                sampler = Sampler(operator.pid)
                sampler.start()
                cycles, ends = 1, time.monotonic() + minutes * 60
                while time.monotonic() < ends:
                    churn_cycle(management, kubeconfig, cycles * COLONIES_PER_CYCLE)
                    cycles += 1
                samples = sampler.stop()
            finally:
                operator.stop()
        finally:
            colony.stop()
    finally:
        management.stop()
    return samples, cycles - 1


def run(size: str) -> list[Table]:
    """Soak at `size` (COLONY_SOAK_MINUTES overrides its duration); one row per resource."""
    minutes = float(os.environ.get("COLONY_SOAK_MINUTES", MINUTES[size]))
    samples, cycles = measure(minutes)
    rows = verdict(samples)
    flat = all(row["flat"] for row in rows)
    notes = [
        f"{cycles} churn cycles in {minutes:g} min ({cycles * COLONIES_PER_CYCLE} colonies registered, used"
        f" by a GPR and deleted), {len(samples)} samples every {SAMPLE_S:g} s after one warm-up cycle",
        "start/end: medians of the first and last fifth of the samples; flat: growth within the allowed"
        f" (absolute or 10 %, the larger); verdict: {'FLAT' if flat else 'GROWING'}",
    ]
    columns = ["resource", "start", "end", "peak", "growth", "allowed", "flat"]
    return [Table("soak", f"Operator resources over {minutes:g} min of colony churn", columns, rows, notes)]
