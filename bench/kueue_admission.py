"""Benchmark "admission": queue admission at Kueue's scale, our operator and Kueue on one machine.

Kueue's scheduler performance test (sigs.k8s.io/kueue test/performance/scheduler, config
`baseline`) as our objects: 5 cohorts x 6 GPUQueues (nominal 20 GPUs, borrowingLimit 100), one
namespace per queue, and per queue 350 small (1 GPU, runs 200 ms, priority 50, one every 100 ms) +
100 medium (5 GPUs, 500 ms, priority 100, every 500 ms) + 50 large (20 GPUs, 1000 ms, priority
200, every 1200 ms) GPRs, all evictable (Kueue's queues preempt lower priorities and reclaim lent
quota): 15,000 requests. They are placed on one shared `existing` colony of kwok H100 nodes big
enough that quota, not nodes, is the constraint, by the real operator process.

Like Kueue's harness, this process is the generator (creates each class on its arrival schedule,
sleeping the interval before each create), the runner (finishes a request runtime-ms after it saw it
admitted; our requests finish the way a DDPJob's do: the GPR is deleted, which frees its quota) and
the recorder (one watch; a request's time to admission runs from its first event to the last
admission seen, as Kueue's recorder counts it). CQ usage is Kueue's checker formula: GPU-time held
(from admission seen to finish seen) over nominal quota times the run.

Kueue itself runs next, on a fresh local API server of the same build: its `minimalkueue` (core
controllers and scheduler) and its `runner` with the same generator config, built from the pinned
module by hack/build-kueue.sh. When it cannot be built or run the table says why and shows
Kueue's published CI figures instead, labelled as such.

    .venv/bin/python -m bench.kueue_admission [--size tiny|quick|full]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client as kclient
from kubernetes_asyncio import config as kconfig
from kubernetes_asyncio import watch as kwatch

from bench.compiled import compiled_core_env
from bench.report import SIZES, Table
from colony.devenv.cluster import LocalCluster
from colony.devenv.environment import MANAGEMENT_UPSTREAM, own_crd_files, upstream_crd_files
from colony.devenv.kwok import GPUNodeSpec
from colony.devenv.process import ManagedProcess
from colony.devenv.tools import Tools, cache_dir, ensure_tools, repo_root
from colony.kube.config import make_api_client
from colony.kube.resources import Kube
from colony.versions import pinned

BENCHMARK = "admission"


@dataclass(frozen=True)
class WorkloadClass:
    """One workload set of Kueue's generator: `count` requests, one every `interval_ms`."""

    name: str
    count: int
    interval_ms: int
    runtime_ms: int
    priority: int
    gpus: int


@dataclass(frozen=True)
class Scale:
    """The generator config of one size (Kueue's schema: cohorts x queues x workload sets)."""

    cohorts: int
    queues: int
    classes: tuple[WorkloadClass, ...]
    nominal: int = 20
    borrowing_limit: int = 100
    build_kueue: bool = True
    """Build Kueue's harness when it is not cached (else Kueue runs only from the cache)."""
    timeout_s: float = 1800.0


BASELINE = (
    WorkloadClass("small", 350, 100, 200, 50, 1),
    WorkloadClass("medium", 100, 500, 500, 100, 5),
    WorkloadClass("large", 50, 1200, 1000, 200, 20),
)


def _counts(small: int, medium: int, large: int) -> tuple[WorkloadClass, ...]:
    """The baseline classes with other counts per queue."""
    return tuple(replace(c, count=n) for c, n in zip(BASELINE, (small, medium, large), strict=True))


SCALES: dict[str, Scale] = {
    # CI: seconds of load; Kueue only from the cache (its cold build takes longer than the test).
    "tiny": Scale(cohorts=1, queues=2, classes=_counts(14, 4, 2), build_kueue=False, timeout_s=180),
    # one cohort of the baseline at full per-queue counts: 3,000 requests, the same 66 s bound
    "quick": Scale(cohorts=1, queues=6, classes=BASELINE, timeout_s=900),
    # Kueue's baseline: 15,000 requests
    "full": Scale(cohorts=5, queues=6, classes=BASELINE, timeout_s=2400),
}
assert set(SCALES) == set(SIZES)

# Kueue's published baseline: the averages of 5 CI runs in the comments of
# test/performance/scheduler/configs/baseline/rangespec.yaml at KUEUE_VERSION (v0.17.0). Another
# revision of that file (../shared/notes/performance-anchors.md section 2.1) gives usage 55.9 % and
# large 16.5 s with SchedulingEquivalenceHashing; wall, small and medium are the same.
KUEUE_PUBLISHED = {
    "wall_s": 351.116,
    "small": 215.468,
    "medium": 76.768,
    "large": 6.666,
    "usage_pct": 58.7,
}
GPU_TYPE = "H100"
GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"
GPUS_PER_NODE = 64
POOL_NAMESPACE = "admission-pool"
CLASS_LABEL = "bench.colony.exalsius.ai/class"
GPR_API = ("infra.exalsius.ai", "v1", "gpuprovisioningrequests")
ADMITTED_PHASES = ("Admitted", "Ready")
WATCH_S = 60
"""The longest a recorder's watch lasts before it lists again."""
RUNNER_QPS = ("--qps=1000", "--burst=2000")
"""The client limits Kueue's runner gets from envtest (controller-runtime's envtest config)."""


# -- the workload set ------------------------------------------------------------------------------


def queue_name(cohort: int, queue: int) -> str:
    """Kueue's ClusterQueue name for queue `queue` of cohort `cohort` (also its namespace)."""
    return f"cq-0-{queue}-cohort-{cohort}"


def queues(scale: Scale) -> list[tuple[str, str]]:
    """(queue, cohort) of every queue of the scale."""
    return [(queue_name(c, q), f"cohort-{c}") for c in range(scale.cohorts) for q in range(scale.queues)]


def total_workloads(scale: Scale) -> int:
    """Requests the generator creates."""
    return scale.cohorts * scale.queues * sum(c.count for c in scale.classes)


def lower_bound_s(scale: Scale) -> tuple[float, float, float]:
    """(bound, work bound, arrival bound) in seconds: a cohort's GPU-seconds of work over its
    nominal quota (borrowing only moves quota within the cohort), and the last arrival plus its
    runtime; no scheduler can finish before the larger of the two."""
    work = sum(c.count * c.gpus * c.runtime_ms / 1000 for c in scale.classes) / scale.nominal
    arrival = max(c.count * c.interval_ms / 1000 + c.runtime_ms / 1000 for c in scale.classes)
    return max(work, arrival), work, arrival


def node_count(scale: Scale) -> int:
    """64-GPU nodes enough that no request ever waits for a node: a request of g GPUs waits only
    if every node has fewer than g free, i.e. at least 65 - g used on each; with more nodes than
    total quota / (65 - largest request) that cannot happen."""
    quota = scale.cohorts * scale.queues * scale.nominal
    largest = max(c.gpus for c in scale.classes)
    return quota // (GPUS_PER_NODE + 1 - largest) + 1


def kueue_generator_config(scale: Scale) -> dict[str, Any]:
    """The same set in the schema of Kueue's generator.yaml."""
    workload_sets = [
        {
            "count": c.count,
            "creationIntervalMs": c.interval_ms,
            "workloads": [
                {"className": c.name, "runtimeMs": c.runtime_ms, "priority": c.priority, "request": c.gpus}
            ],
        }
        for c in scale.classes
    ]
    queue_set = {
        "className": "cq",
        "count": scale.queues,
        "nominalQuota": scale.nominal,
        "borrowingLimit": scale.borrowing_limit,
        "reclaimWithinCohort": "Any",
        "withinClusterQueue": "LowerPriority",
        "workloadsSets": workload_sets,
    }
    return {"cohorts": [{"className": "cohort", "count": scale.cohorts, "queuesSets": [queue_set]}]}


def gpr_manifest(namespace: str, name: str, workload: WorkloadClass) -> dict[str, Any]:
    """One request of a class: one node with the class's GPUs, evictable, no declared duration
    (Kueue's workloads declare none either)."""
    return {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "GPUProvisioningRequest",
        "metadata": {"name": name, "namespace": namespace, "labels": {CLASS_LABEL: workload.name}},
        "spec": {
            "gpuShape": GPU_TYPE,
            "numberOfGPUNodes": 1,
            "numberOfGPUs": workload.gpus,
            "priority": workload.priority,
            "enableEviction": True,
        },
    }


def queue_manifests(scale: Scale) -> list[dict[str, Any]]:
    """A namespace and a GPUQueue per Kueue ClusterQueue (same names, same cohorts and limits)."""
    objects: list[dict[str, Any]] = []
    for name, cohort in queues(scale):
        objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        quota = {"gpuType": GPU_TYPE, "nominal": scale.nominal, "borrowingLimit": scale.borrowing_limit}
        objects.append(
            {
                "apiVersion": "infra.exalsius.ai/v1",
                "kind": "GPUQueue",
                "metadata": {"name": name},
                "spec": {"namespaces": [name], "cohort": cohort, "quotas": [quota]},
            }
        )
    return objects


def pool_manifests(kubeconfig: str) -> list[dict[str, Any]]:
    """The shared colony every request may use: the colony cluster as an `existing` cluster."""
    secret = base64.b64encode(kubeconfig.encode()).decode()
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": POOL_NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "pool-kubeconfig", "namespace": POOL_NAMESPACE},
            "data": {"value": secret},
        },
        {
            "apiVersion": "infra.exalsius.ai/v1",
            "kind": "Colony",
            "metadata": {"name": "pool", "namespace": POOL_NAMESPACE},
            "spec": {
                "k8sVersion": pinned("KUBERNETES_VERSION"),
                "colonyClusters": [
                    {"clusterName": "pool", "existing": {"kubeconfigSecretRef": {"name": "pool-kubeconfig"}}}
                ],
            },
        },
        {  # the admin shares it with every namespace (an empty selector selects all)
            "apiVersion": "infra.exalsius.ai/v1",
            "kind": "ColonyShare",
            "metadata": {"name": "pool"},
            "spec": {"colony": {"namespace": POOL_NAMESPACE, "name": "pool"}, "namespaceSelector": {}},
        },
    ]


# -- what the runner saw ---------------------------------------------------------------------------


@dataclass
class Workload:
    """One request as this process (generator, runner and recorder) saw it."""

    queue: str
    cohort: str
    klass: WorkloadClass
    first_seen: float | None = None
    admitted: float | None = None
    """When the last admission was seen (Kueue's recorder keeps the last one too)."""
    finished: float | None = None
    evictions: int = 0
    held: list[tuple[float, float]] = field(default_factory=list)
    """Intervals it held quota, from admission seen to finish (or eviction) seen."""
    timer: asyncio.TimerHandle | None = None


@dataclass
class Outcome:
    """What one system did with the workload set."""

    system: str
    workloads: int
    finished: int
    wall_s: float | None
    admission_s: dict[str, float]
    usage_pct: float | None
    evictions: int
    peak_queue_gpus: int | None = None
    peak_cohort_pct: float | None = None
    maxrss_mib: float | None = None
    cpu_s: float | None = None
    note: str = ""


class Runner:
    """Finishes each request runtime-ms after its admission was seen, by deleting it; records
    first event, admissions, evictions and finish of every request from one watch."""

    def __init__(self, kube: Kube, workloads: dict[str, Workload]) -> None:
        self.kube = kube
        self.workloads = workloads
        self.done = asyncio.Event()
        self.errors: list[str] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._unfinished = len(workloads)

    def on_event(self, kind: str, obj: dict[str, Any], now: float) -> None:
        """Advance one request's record by a watch event."""
        meta = obj.get("metadata") or {}
        workload = self.workloads.get(f"{meta.get('namespace')}/{meta.get('name')}")
        if workload is None or workload.finished is not None:
            return
        if workload.first_seen is None:
            workload.first_seen = now
        if kind == "DELETED" or meta.get("deletionTimestamp"):
            self._finish_seen(workload, now)
            return
        admitted = (obj.get("status") or {}).get("phase") in ADMITTED_PHASES
        held = workload.timer is not None
        if admitted and not held:
            workload.admitted = now
            key = f"{meta['namespace']}/{meta['name']}"
            workload.timer = asyncio.get_running_loop().call_later(
                workload.klass.runtime_ms / 1000, self._finish, key, meta["namespace"], meta["name"]
            )
        elif not admitted and held:
            workload.evictions += 1
            self._release(workload, now)

    def resync(self, items: list[dict[str, Any]], now: float) -> None:
        """A fresh list: each listed request as an event; a created one the list lacks is gone."""
        listed = set()
        for obj in items:
            listed.add(f"{obj['metadata']['namespace']}/{obj['metadata']['name']}")
            self.on_event("MODIFIED", obj, now)
        for key, workload in self.workloads.items():
            if workload.first_seen is not None and workload.finished is None and key not in listed:
                self._finish_seen(workload, now)

    def _release(self, workload: Workload, now: float) -> None:
        """Close the request's quota interval and forget its finish timer."""
        if workload.timer is not None and workload.admitted is not None:
            workload.timer.cancel()
            workload.held.append((workload.admitted, now))
        workload.timer = None

    def _finish_seen(self, workload: Workload, now: float) -> None:
        self._release(workload, now)
        workload.finished = now
        self._unfinished -= 1
        if self._unfinished == 0:
            self.done.set()

    def _finish(self, key: str, namespace: str, name: str) -> None:
        task = asyncio.create_task(self._delete(key, namespace, name))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _delete(self, key: str, namespace: str, name: str) -> None:
        try:
            await self.kube.delete("infra.exalsius.ai/v1", "GPUProvisioningRequest", name, namespace)
        except Exception as error:  # recorded; the run then times out and says why
            self.errors.append(f"delete {key}: {error}")


async def watch_gprs(api: kclient.ApiClient, runner: Runner) -> None:
    """Feed every GPR event of the cluster to the runner: list (what the list lacks was deleted
    meanwhile), then watch from there for at most WATCH_S, and again. Any failure, of the list as of
    the stream, starts over; a watch that the server stops feeding (it drops slow consumers) is
    replaced within WATCH_S, so no admission stays unseen for longer."""
    custom = kclient.CustomObjectsApi(api)
    loop = asyncio.get_running_loop()
    while not runner.done.is_set():
        try:
            listed = await custom.list_cluster_custom_object(*GPR_API)
            runner.resync(listed["items"], loop.time())
            stream = kwatch.Watch().stream(
                custom.list_cluster_custom_object,
                *GPR_API,
                resource_version=listed["metadata"]["resourceVersion"],
                timeout_seconds=WATCH_S,
            )
            async for event in stream:
                if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                    runner.on_event(event["type"], event["object"], loop.time())
        except Exception as error:  # a dropped connection, 410 Gone, a failed list: start over
            runner.errors.append(f"watch restarted: {type(error).__name__}: {error}")
            await asyncio.sleep(1)


async def generate(kube: Kube, scale: Scale, workloads: dict[str, Workload]) -> float:
    """Create every request on Kueue's schedule: per queue and class, sleep the interval, then
    create the next one. Returns when the first create was sent (loop time)."""
    start = asyncio.get_running_loop().time()

    async def one_set(queue: str, workload: WorkloadClass) -> None:
        for index in range(workload.count):
            await asyncio.sleep(workload.interval_ms / 1000)
            await kube.create(gpr_manifest(queue, f"{workload.name}-{index}", workload))

    await asyncio.gather(*(one_set(q, c) for q, _ in queues(scale) for c in scale.classes))
    return start + min(c.interval_ms for c in scale.classes) / 1000


def planned_workloads(scale: Scale) -> dict[str, Workload]:
    """The record of every request the generator will create, by `namespace/name`."""
    return {
        f"{queue}/{c.name}-{index}": Workload(queue, cohort, c)
        for queue, cohort in queues(scale)
        for c in scale.classes
        for index in range(c.count)
    }


# -- measures --------------------------------------------------------------------------------------


def class_admission_s(workloads: Iterable[Workload], classes: Iterable[WorkloadClass]) -> dict[str, float]:
    """Average seconds from first event to (last) admission, per class, over admitted requests."""
    result = {}
    for klass in classes:
        waits = [
            w.admitted - w.first_seen
            for w in workloads
            if w.klass.name == klass.name and w.admitted is not None and w.first_seen is not None
        ]
        if waits:
            result[klass.name] = sum(waits) / len(waits)
    return result


def peak(intervals: Iterable[tuple[float, float, int]]) -> int:
    """Largest sum of amounts held at one instant (an interval frees before the next one starts
    at the same instant)."""
    listed = list(intervals)
    changes = sorted([(start, amount) for start, _, amount in listed] + [(end, -a) for _, end, a in listed])
    level = highest = 0
    for _, delta in changes:
        level += delta
        highest = max(highest, level)
    return highest


def held_intervals(workloads: Iterable[Workload], group: Callable[[Workload], str]) -> dict[str, list[Any]]:
    """(start, end, GPUs) of every quota interval, by group (queue or cohort)."""
    result: dict[str, list[tuple[float, float, int]]] = {}
    for w in workloads:
        for start, end in w.held:
            result.setdefault(group(w), []).append((start, end, w.klass.gpus))
    return result


def usage_pct(workloads: list[Workload], scale: Scale, window: tuple[float, float]) -> float:
    """Kueue's CQ usage: GPU-seconds held over (nominal quota of every queue x the run)."""
    used = sum((end - start) * w.klass.gpus for w in workloads for start, end in w.held)
    quota = scale.nominal * scale.cohorts * scale.queues
    return 100.0 * used / (quota * (window[1] - window[0]))


def summarize(system: str, scale: Scale, workloads: dict[str, Workload], start: float) -> Outcome:
    """The outcome of our run from the runner's records."""
    records = list(workloads.values())
    finished = [w.finished for w in records if w.finished is not None]
    end = max(finished) if finished else start
    by_queue = held_intervals(records, lambda w: w.queue)
    by_cohort = held_intervals(records, lambda w: w.cohort)
    cohort_quota = scale.queues * scale.nominal
    return Outcome(
        system=system,
        workloads=len(records),
        finished=len(finished),
        wall_s=end - start if finished else None,
        admission_s=class_admission_s(records, scale.classes),
        usage_pct=usage_pct(records, scale, (start, end)) if end > start else None,
        evictions=sum(w.evictions for w in records),
        peak_queue_gpus=max((peak(i) for i in by_queue.values()), default=0),
        peak_cohort_pct=100.0 * max((peak(i) for i in by_cohort.values()), default=0) / cohort_quota,
    )


def process_usage(pid: int | None) -> tuple[float | None, float | None]:
    """(peak RSS in MiB, CPU seconds) of a running process, from /proc."""
    if pid is None:
        return None, None
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None, None
    hwm = next(
        (int(line.split()[1]) / 1024 for line in status.splitlines() if line.startswith("VmHWM:")), None
    )
    ticks = os.sysconf("SC_CLK_TCK")
    return hwm, (int(stat[11]) + int(stat[12])) / ticks


# -- our operator ----------------------------------------------------------------------------------


async def drive(kubeconfig: Path, scale: Scale) -> tuple[dict[str, Workload], float, list[str]]:
    """Generator, runner and recorder against the management cluster until every request
    finished or the scale's timeout; returns the records, the start (loop time) and errors."""
    configuration = kclient.Configuration()
    await kconfig.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = 64
    workloads = planned_workloads(scale)
    async with make_api_client(configuration) as api:
        runner = Runner(Kube(api), workloads)
        watcher = asyncio.create_task(watch_gprs(api, runner))
        await asyncio.sleep(0.5)  # the watch is open before the first create
        start = await generate(Kube(api), scale, workloads)
        errors: list[str] = []
        left = scale.timeout_s - (asyncio.get_running_loop().time() - start)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(runner.done.wait(), max(0.0, left))
        if not runner.done.is_set():
            errors.append(f"timed out after {scale.timeout_s:.0f}s")
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher
    return workloads, start, errors + runner.errors


def start_pool(tools: Tools, scale: Scale) -> LocalCluster:
    """The colony cluster: kwok H100 nodes of 64 GPUs, no scheduler (no pods run on them)."""
    cluster = LocalCluster("admission-pool", tools, scheduler=False, controller_manager=False, kwok=True)
    cluster.start()
    try:
        spec = GPUNodeSpec("h100", product=GPU_PRODUCT, gpus=GPUS_PER_NODE, count=node_count(scale))
        cluster.add_gpu_nodes([spec])
    except BaseException:
        cluster.stop()
        raise
    return cluster


def start_operator(management: LocalCluster, log: Path) -> ManagedProcess:
    """The operator as a real process, with its scheduler core compiled as it ships, watching the
    whole (bench-only) management cluster."""
    env = compiled_core_env({**os.environ, "KUBECONFIG": str(management.kubeconfig_path)})
    operator = ManagedProcess("operator", [sys.executable, "-m", "colony", "operator"], log, env=env)
    operator.start()
    return operator


def wait_colony_ready(management: LocalCluster, operator: ManagedProcess, timeout: float = 90) -> None:
    """Until the shared colony is Ready (the operator read its cluster)."""

    def ready() -> bool:
        phase = management.kubectl(
            "get", "colony", "pool", "-n", POOL_NAMESPACE, "-o", "jsonpath={.status.phase}", check=False
        ).stdout
        return phase == "Ready"

    operator.wait_until(ready, timeout, "colony pool Ready")


def run_ours(tools: Tools, scale: Scale, workdir: Path) -> Outcome:
    """Our operator on a management cluster (etcd + kube-apiserver with our and the upstream CRDs
    `make dev` installs; no scheduler, controller-manager or kwok, like envtest) and a colony
    cluster."""
    management = LocalCluster("admission", tools, scheduler=False, controller_manager=False, kwok=False)
    pool: LocalCluster | None = None
    operator: ManagedProcess | None = None
    try:
        management.start()
        crds = own_crd_files() + upstream_crd_files(tools, MANAGEMENT_UPSTREAM)
        # kubectl installs the CRDs (a subprocess, fine in a thread) while this thread starts the
        # colony cluster (processes are started from the main thread only).
        with ThreadPoolExecutor(1) as background:
            installed = background.submit(management.install_crds, crds)
            pool = start_pool(tools, scale)
            installed.result()
        management.apply(queue_manifests(scale) + pool_manifests(pool.kubeconfig()))
        operator = start_operator(management, workdir / "operator.log")
        wait_colony_ready(management, operator)
        workloads, start, errors = asyncio.run(drive(management.kubeconfig_path, scale))
        outcome = summarize("colony-operator", scale, workloads, start)
        outcome.maxrss_mib, outcome.cpu_s = process_usage(operator.pid)
        outcome.note = "; ".join(errors[:3])
        return outcome
    finally:
        if operator is not None:
            operator.stop()
        if pool is not None:
            pool.stop()
        management.stop()


# -- Kueue -----------------------------------------------------------------------------------------


@dataclass
class Harness:
    """Kueue's built harness (hack/build-kueue.sh) and how long this run spent building it."""

    directory: Path
    build_s: float | None
    """Seconds this run spent building (None: it was cached)."""

    @property
    def minimalkueue(self) -> Path:
        return self.directory / "bin" / "minimalkueue"

    @property
    def runner(self) -> Path:
        return self.directory / "bin" / "runner"

    def cold_build_s(self) -> float | None:
        """How long the cold build took when it was made (recorded by the build script)."""
        with contextlib.suppress(OSError, ValueError):
            return float((self.directory / "build-seconds").read_text())
        return None


def kueue_dir() -> Path:
    """Where hack/build-kueue.sh puts the harness of the pinned version."""
    return cache_dir() / "kueue" / pinned("KUEUE_VERSION")


def kueue_harness(build: bool) -> Harness:
    """The cached harness, built first when missing and `build`; raises RuntimeError saying why
    there is none."""
    directory = kueue_dir()
    if (directory / "bin" / "runner").is_file() and (directory / "bin" / "minimalkueue").is_file():
        return Harness(directory, None)
    if not build:
        raise RuntimeError(f"Kueue's harness is not cached in {directory} (run hack/build-kueue.sh)")
    started = time.monotonic()
    result = subprocess.run(
        ["bash", str(repo_root() / "hack" / "build-kueue.sh")], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        tail = " | ".join(result.stderr.strip().splitlines()[-3:])
        raise RuntimeError(f"hack/build-kueue.sh failed ({result.returncode}): {tail}")
    return Harness(Path(result.stdout.strip().splitlines()[-1]), time.monotonic() - started)


def kueue_outcome(summary: dict[str, Any], scale: Scale, wall_s: float) -> Outcome:
    """Our Outcome from the runner's summary.yaml (usage by Kueue's checker formula)."""
    classes = summary.get("workloadClasses") or {}
    usage = None
    for group in (summary.get("clusterQueueClasses") or {}).values():
        elapsed_ms = _parse_time(group["lastEventTime"]) - _parse_time(group["firstEventTime"])
        if group.get("nominalQuota") and elapsed_ms > 0:
            usage = float(group["cpuUsed"]) * 100 / (float(group["nominalQuota"]) * elapsed_ms * 1000)
    return Outcome(
        system=f"Kueue {pinned('KUEUE_VERSION')} (measured here)",
        workloads=total_workloads(scale),
        finished=sum(int(c.get("count", 0)) for c in classes.values()),
        wall_s=wall_s,
        admission_s={k: c["averageTimeToAdmissionMs"] / 1000 for k, c in classes.items()},
        usage_pct=usage,
        evictions=sum(int(c.get("totalEvictions", 0)) for c in classes.values()),
    )


def _parse_time(value: Any) -> float:
    """Seconds since the epoch of an RFC 3339 time (or a datetime yaml already parsed)."""
    if not isinstance(value, str):
        return float(value.timestamp())
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def run_kueue(tools: Tools, scale: Scale, harness: Harness, workdir: Path) -> Outcome:
    """Kueue's minimalkueue and runner (its generator, runner and recorder) with the same set,
    against a fresh API server of the same build (envtest's role); wall time as Kueue measures it:
    minimalkueue's lifetime until the recorder is done."""
    cluster = LocalCluster("kueue", tools, scheduler=False, controller_manager=False, kwok=False)
    minimal: ManagedProcess | None = None
    try:
        cluster.start()
        cluster.install_crds(sorted((harness.directory / "crds").glob("*.yaml")))
        config = workdir / "generator.yaml"
        config.write_text(yaml.safe_dump(kueue_generator_config(scale)))
        minimal = ManagedProcess(
            "minimalkueue",
            [str(harness.minimalkueue), "--kubeconfig", str(cluster.kubeconfig_path)],
            workdir / "minimalkueue.log",
        )
        started = time.monotonic()
        minimal.start()
        runner = _run_kueue_runner(harness, cluster, config, scale, workdir)
        wall = time.monotonic() - started
        rss, cpu = process_usage(minimal.pid)
        if runner.returncode != 0:
            raise RuntimeError(f"Kueue's runner exited {runner.returncode} (log: {workdir / 'runner.log'})")
        outcome = kueue_outcome(yaml.safe_load((workdir / "summary.yaml").read_text()), scale, wall)
        outcome.maxrss_mib, outcome.cpu_s = rss, cpu
        return outcome
    finally:
        if minimal is not None:
            minimal.stop()
        cluster.stop()


def _run_kueue_runner(
    harness: Harness, cluster: LocalCluster, config: Path, scale: Scale, workdir: Path
) -> subprocess.CompletedProcess[bytes]:
    """Kueue's runner against the cluster (its in-cluster mode: no envtest, no minimalkueue of its
    own), with the client limits envtest would give it."""
    argv = [
        str(harness.runner),
        "-o",
        str(workdir),
        f"--generatorConfig={config}",
        *RUNNER_QPS,
        f"--timeout={int(scale.timeout_s)}s",
    ]
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig_path)}
    with (workdir / "runner.log").open("wb") as log:
        return subprocess.run(
            argv, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=scale.timeout_s + 120, check=False
        )


# -- the tables ------------------------------------------------------------------------------------

COLUMNS = [
    "system",
    "workloads",
    "finished",
    "wall_s",
    "admit_small_s",
    "admit_medium_s",
    "admit_large_s",
    "cq_usage_pct",
    "evictions",
    "peak_queue_gpus",
    "peak_cohort_pct",
    "maxrss_mib",
    "cpu_s",
    "wall_vs_ours",
]


def outcome_row(outcome: Outcome, ours_wall: float | None) -> dict[str, Any]:
    """One table row; `wall_vs_ours` is this row's wall time over ours."""
    ratio = outcome.wall_s / ours_wall if outcome.wall_s and ours_wall else None
    return {
        "system": outcome.system,
        "workloads": outcome.workloads,
        "finished": outcome.finished,
        "wall_s": outcome.wall_s,
        **{f"admit_{k}_s": outcome.admission_s.get(k) for k in ("small", "medium", "large")},
        "cq_usage_pct": outcome.usage_pct,
        "evictions": outcome.evictions,
        "peak_queue_gpus": outcome.peak_queue_gpus,
        "peak_cohort_pct": outcome.peak_cohort_pct,
        "maxrss_mib": outcome.maxrss_mib,
        "cpu_s": outcome.cpu_s,
        "wall_vs_ours": None if ratio is None else round(ratio, 2),
    }


def published_row(scale: Scale, ours_wall: float | None) -> dict[str, Any]:
    """Kueue's published CI figures (for the full baseline only)."""
    wall = KUEUE_PUBLISHED["wall_s"]
    label = "Kueue published (rangespec.yaml, CI mean of 5 runs" + (
        ")" if scale == SCALES["full"] else "; full baseline, not this size)"
    )
    return {
        "system": label,
        "workloads": 15_000,
        "finished": 15_000,
        "wall_s": wall,
        **{f"admit_{k}_s": KUEUE_PUBLISHED[k] for k in ("small", "medium", "large")},
        "cq_usage_pct": KUEUE_PUBLISHED["usage_pct"],
        "wall_vs_ours": round(wall / ours_wall, 2) if ours_wall and scale == SCALES["full"] else None,
    }


def bound_row(scale: Scale, ours_wall: float | None) -> dict[str, Any]:
    """The physical lower bound of the wall time."""
    bound, _, _ = lower_bound_s(scale)
    return {
        "system": "lower bound (work / quota, last arrival)",
        "workloads": total_workloads(scale),
        "wall_s": bound,
        "cq_usage_pct": None,
        "wall_vs_ours": round(bound / ours_wall, 2) if ours_wall else None,
    }


def admission_table(size: str, scale: Scale, ours: Outcome, kueue: Outcome | None, notes: list[str]) -> Table:
    """The side-by-side table."""
    rows = [outcome_row(ours, ours.wall_s)]
    if kueue is not None:
        rows.append(outcome_row(kueue, ours.wall_s))
    rows += [published_row(scale, ours.wall_s), bound_row(scale, ours.wall_s)]
    bound, work, arrival = lower_bound_s(scale)
    ratio = kueue.wall_s / ours.wall_s if kueue and kueue.wall_s and ours.wall_s else None
    notes = [
        f"{size}: {scale.cohorts} cohort(s) x {scale.queues} queues (nominal {scale.nominal}, borrowingLimit "
        f"{scale.borrowing_limit}), {total_workloads(scale):,} requests; classes "
        + ", ".join(
            f"{c.name} {c.count}x{c.gpus} GPU {c.runtime_ms} ms prio {c.priority}" for c in scale.classes
        ),
        f"lower bound {bound:.1f} s = max(work {work:.1f} s: GPU-seconds per cohort / cohort quota, "
        f"arrivals {arrival:.1f} s: last arrival + its runtime)",
        "wall: ours from the first create to the last finish seen; Kueue's as its harness measures it "
        "(minimalkueue started until the recorder saw every queue empty, checked every 5 s)",
        "admission: first event seen to last admission seen (Kueue's recorder); usage: GPU-time held "
        "over nominal quota x wall (Kueue's checker); peak_cohort_pct <= 100: no cohort exceeded its quota",
        *notes,
    ]
    met = ratio is not None and ratio >= 10
    if ratio is not None:
        notes.append(
            f"Kueue / ours wall time: {ratio:.1f}x (target 10x: {'met' if met else 'missed'}; "
            f"ours is {ours.wall_s / bound:.2f}x the lower bound)"
            if ours.wall_s
            else ""
        )
    return Table(
        benchmark=BENCHMARK,
        title=f"Queue admission at Kueue's scale ({size})",
        columns=COLUMNS,
        rows=rows,
        notes=[n for n in notes if n],
        targets={"kueue_over_ours_wall": 10, "met": met, "ratio": ratio},
    )


def costs_table(steps: list[tuple[str, float | None, str]]) -> Table:
    """How long the harnesses took to set up (build, clusters)."""
    return Table(
        benchmark=BENCHMARK,
        title="Admission benchmark: setup costs",
        columns=["step", "seconds", "note"],
        rows=[{"step": s, "seconds": v, "note": n} for s, v, n in steps],
    )


# -- entry points ----------------------------------------------------------------------------------


def kueue_side(tools: Tools, scale: Scale, workdir: Path) -> tuple[Outcome | None, list[str], list[Any]]:
    """Kueue's run, or the reason there is none; plus notes and setup-cost rows."""
    try:
        harness = kueue_harness(scale.build_kueue)
    except RuntimeError as error:
        return None, [f"Kueue not run: {error}; published figures shown instead"], []
    cold = harness.cold_build_s()
    steps = [
        (
            "Kueue harness build (hack/build-kueue.sh)",
            harness.build_s if harness.build_s is not None else cold,
            "built in this run" if harness.build_s is not None else "cached; seconds of its cold build",
        )
    ]
    started = time.monotonic()
    try:
        outcome = run_kueue(tools, scale, harness, workdir)
    except (RuntimeError, OSError, subprocess.SubprocessError) as error:
        return None, [f"Kueue did not run: {error}; published figures shown instead"], steps
    steps.append(
        ("Kueue run (cluster, minimalkueue, runner)", time.monotonic() - started, "cluster start included")
    )
    return outcome, [], steps


def run(size: str, kueue: bool = True) -> list[Table]:
    """Both systems (ours only without `kueue`) on the set of `size`; the side-by-side table and
    the setup costs."""
    scale = SCALES[size]
    tools = ensure_tools()
    workdir = Path(tempfile.mkdtemp(prefix="bench-admission-"))
    started = time.monotonic()
    ours = run_ours(tools, scale, workdir)
    ours_s = time.monotonic() - started
    kueue_dir_ = workdir / "kueue"
    kueue_dir_.mkdir()
    kueue_outcome_, notes, steps = (
        kueue_side(tools, scale, kueue_dir_) if kueue else (None, ["Kueue not run: --skip-kueue"], [])
    )
    steps.append(("our run (clusters, operator, workload)", ours_s, "cluster starts included"))
    if ours.note:
        notes.append(f"our run: {ours.note}")
    notes.append(f"logs: {workdir}")
    return [admission_table(size, scale, ours, kueue_outcome_, notes), costs_table(steps)]


def main() -> int:
    """Run one size and print its tables."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", choices=SIZES, default="quick")
    parser.add_argument("--skip-kueue", action="store_true", help="run only our operator")
    options = parser.parse_args()
    for table in run(options.size, kueue=not options.skip_kueue):
        print(table.markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
