"""Benchmark `memory`: the operator's resident memory with many watched objects, and under churn.

The real operator runs as its own process (`python -m colony operator -n bench`, metrics served as
in the chart) against a local management cluster, with an `existing`-provider Colony over a local
colony cluster (kwok GPU nodes). Its RSS (VmRSS of the process and any children, from /proc) is
sampled every few seconds through four phases:

1. baseline: the idle operator after startup, nothing to watch (the in-run baseline);
2. load, in two steps of half the objects each (the RSS difference between them is the marginal
   cost per object, free of one-time costs): a GPUQueue with a small A100 quota, then N
   GPUProvisioningRequests (1 GPU each: the quota admits a few, the rest stay Queued with a
   position and wait estimate) and M DDPJobs (1 CPU worker on the colony each, finished at once:
   the benchmark annotates each worker pod with the kwok outcome annotation, as the demo plays the
   training script). Finished jobs are what a cluster mostly holds and they keep their 0.5 s
   tracking timer, so the operator really watches M jobs without M pods running. Loaded means:
   every GPR has a phase, the queue's status counts all of them (one full scheduling pass) and
   every DDPJob Succeeded;
3. churn: for the duration, the oldest GPRs and DDPJobs are deleted and as many new ones created
   each second, so the population stays constant (deleting the head of the queue moves every
   position: the realistic worst case for status patches, the nolar/kopf#1172 pattern);
4. a linear regression of RSS over the second half of the churn phase: the slope in MiB/hour, its
   t statistic, and the growth it implies over the whole churn duration as a share of the mean.
   A trend is a slope that is significant (t > 3) and worth more than 5 % of the mean.

Each sample also counts the operator's open sockets: every concurrent API request of kopf opens a
TLS connection, and their buffers were most of the RSS (see colony.operator.limit_connection_memory).

Targets (issue 8): RSS under 300 MiB at 10,000 GPRs + 1,000 DDPJobs; no growth trend under churn.

    .venv/bin/python -m bench.operator_memory [--size tiny|quick|full] [--churn-minutes M]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import functools
import math
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client as aclient
from kubernetes_asyncio import config as aconfig
from kubernetes_asyncio.client.exceptions import ApiException

from bench.report import SIZES, Table, machine
from colony.devenv.cluster import LocalCluster
from colony.devenv.environment import start_colony_cluster, start_management_cluster
from colony.devenv.kwok import OUTCOME_ANNOTATION, GPUNodeSpec
from colony.devenv.process import ManagedProcess, ProcessFailed, free_port
from colony.devenv.tools import ensure_tools


@dataclass(frozen=True)
class Size:
    """One size of the benchmark."""

    gprs: int
    ddpjobs: int
    churn_s: float
    gpr_churn_per_s: float
    job_churn_per_s: float
    sample_s: float
    settle_s: float
    """Idle time before the baseline and after the load, sampled."""
    load_timeout_s: float
    concurrency: int = 32


SIZE_PARAMS: dict[str, Size] = {
    "tiny": Size(
        gprs=100, ddpjobs=20, churn_s=30, gpr_churn_per_s=2.0, job_churn_per_s=0.5,
        sample_s=1.0, settle_s=5, load_timeout_s=180,
    ),
    "quick": Size(
        gprs=1_000, ddpjobs=100, churn_s=180, gpr_churn_per_s=3.0, job_churn_per_s=0.5,
        sample_s=2.0, settle_s=15, load_timeout_s=900,
    ),
    "full": Size(
        gprs=10_000, ddpjobs=1_000, churn_s=1_800, gpr_churn_per_s=5.0, job_churn_per_s=0.5,
        sample_s=5.0, settle_s=30, load_timeout_s=3_600,
    ),
}  # fmt: skip
assert tuple(SIZE_PARAMS) == SIZES

NAMESPACE = "bench"
QUEUE = "bench-memory"
COLONY = "pool"
GPU_TYPE = "A100-80GB"
QUOTA_GPUS = 4
RSS_TARGET_MIB = 300.0
TREND_T = 3.0
TREND_SHARE = 0.05
GROUP, VERSION = "infra.exalsius.ai", "v1"
JOB_GROUP = "training.exalsius.ai"
POLL_S = 2.0
PODS_PER_NODE = 100
READY_LINE = "Initial authentication has finished"
LIST_PAGE = 1_000
RETRIED_STATUSES = (429, 500, 502, 503, 504)


# -- RSS sampling ---------------------------------------------------------------------------------


def _descendants(pid: int) -> list[int]:
    """`pid` and every process below it (from /proc/<pid>/task/*/children)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                todo += [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                continue
    return found


def rss_mib(pid: int) -> float:
    """Resident memory (VmRSS) of `pid` and its descendants, in MiB; 0.0 once it is gone."""
    total_kib = 0
    for proc in _descendants(pid):
        try:
            status = Path(f"/proc/{proc}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total_kib += int(line.split()[1])
    return total_kib / 1024


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid` so far, in seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_sockets(pid: int) -> int:
    """How many sockets `pid` holds open (its API connections, the watch streams among them)."""
    count = 0
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                count += os.readlink(fd).startswith("socket:")
    return count


@dataclass
class Sample:
    """One RSS sample: seconds since sampling began, the phase it fell in, RSS (MiB), CPU seconds
    and open sockets."""

    t: float
    phase: str
    rss: float
    cpu: float
    sockets: int = 0


@dataclass
class Sampler:
    """Samples a process's RSS every `interval` seconds in a thread; `phase` labels the samples."""

    pid: int
    interval: float
    phase: str = "startup"
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _started: float = field(default_factory=time.monotonic)

    def start(self) -> None:
        """Begin sampling in a daemon thread."""
        threading.Thread(target=self._run, daemon=True, name="rss-sampler").start()

    def stop(self) -> None:
        """Stop sampling (the thread ends after its current sleep)."""
        self._stop.set()

    def sample(self) -> Sample:
        """Take one sample now and keep it."""
        sample = Sample(
            time.monotonic() - self._started,
            self.phase,
            rss_mib(self.pid),
            cpu_seconds(self.pid),
            open_sockets(self.pid),
        )
        self.samples.append(sample)
        return sample

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def of(self, phase: str) -> list[Sample]:
        """The samples taken during `phase`."""
        return [s for s in self.samples if s.phase == phase]


# -- statistics -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trend:
    """A least-squares line through RSS over time."""

    slope_mib_per_h: float
    t_stat: float
    mean: float
    samples: int


def fit_trend(samples: list[Sample]) -> Trend:
    """OLS slope of RSS over time, with its t statistic (inf for a perfect fit, 0 with < 3 points)."""
    if len(samples) < 3:
        mean = statistics.fmean(s.rss for s in samples) if samples else 0.0
        return Trend(0.0, 0.0, mean, len(samples))
    xs, ys = [s.t for s in samples], [s.rss for s in samples]
    slope, intercept = statistics.linear_regression(xs, ys)
    x_mean = statistics.fmean(xs)
    sxx = sum((x - x_mean) ** 2 for x in xs)
    residual = sum((y - (intercept + slope * x)) ** 2 for x, y in zip(xs, ys, strict=True))
    stderr = math.sqrt(residual / (len(xs) - 2) / sxx) if sxx else 0.0
    t_stat = slope / stderr if stderr else (math.inf if slope else 0.0)
    return Trend(slope * 3600, t_stat, statistics.fmean(ys), len(xs))


def is_trend(trend: Trend, duration_s: float) -> bool:
    """Significant (t > TREND_T) growth worth more than TREND_SHARE of the mean over `duration_s`."""
    growth = trend.slope_mib_per_h * duration_s / 3600
    return trend.t_stat > TREND_T and growth > TREND_SHARE * trend.mean


def _median(samples: Iterable[Sample]) -> float:
    values = [s.rss for s in samples]
    return statistics.median(values) if values else 0.0


def _cpu_percent(samples: list[Sample]) -> float:
    """The operator's mean CPU use between the first and last sample, % of one core."""
    if len(samples) < 2 or samples[-1].t <= samples[0].t:
        return 0.0
    return 100 * (samples[-1].cpu - samples[0].cpu) / (samples[-1].t - samples[0].t)


# -- objects --------------------------------------------------------------------------------------


def gpr_manifest(name: str) -> dict[str, Any]:
    """A 1-GPU A100 request in the benchmark namespace (queued behind the small quota)."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "GPUProvisioningRequest",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"gpuShape": GPU_TYPE, "numberOfGPUNodes": 1, "numberOfGPUs": 1},
    }


def ddpjob_manifest(name: str) -> dict[str, Any]:
    """A one-worker CPU DDPJob on the colony (its pod is finished by the benchmark)."""
    return {
        "apiVersion": f"{JOB_GROUP}/{VERSION}",
        "kind": "DDPJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "targetColony": COLONY,
            "parallelism": 1,
            "nprocPerNode": 1,
            "cpuJob": True,
            "gangScheduler": "default",
            "image": "bench",
            "scriptPath": "/bench.py",
        },
    }


def queue_manifest() -> dict[str, Any]:
    """A GPUQueue for the namespace whose quota admits QUOTA_GPUS one-GPU requests at a time."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "GPUQueue",
        "metadata": {"name": QUEUE},
        "spec": {"namespaces": [NAMESPACE], "quotas": [{"gpuType": GPU_TYPE, "nominal": QUOTA_GPUS}]},
    }


def colony_manifests(colony_kubeconfig: str) -> list[dict[str, Any]]:
    """The colony cluster's kubeconfig Secret and an `existing`-provider Colony over it."""
    secret = base64.b64encode(colony_kubeconfig.encode()).decode()
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "gpu", "namespace": NAMESPACE},
            "data": {"value": secret},
        },
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Colony",
            "metadata": {"name": COLONY, "namespace": NAMESPACE},
            "spec": {
                "k8sVersion": "v1.36.3",
                "colonyClusters": [
                    {"clusterName": "gpu", "existing": {"kubeconfigSecretRef": {"name": "gpu"}}}
                ],
            },
        },
    ]


# -- the clusters, through the async client --------------------------------------------------------


@dataclass
class Clients:
    """Async API clients of both clusters, with a bound on concurrent requests."""

    management: aclient.ApiClient
    colony: aclient.ApiClient
    limit: asyncio.Semaphore

    @property
    def custom(self) -> aclient.CustomObjectsApi:
        return aclient.CustomObjectsApi(self.management)

    async def gather(self, calls: Iterable[Callable[[], Awaitable[Any]]], ignore: int | None = None) -> None:
        """Run the calls concurrently, at most `limit` at a time; an `ignore` status is no error."""

        async def one(call: Callable[[], Awaitable[Any]]) -> None:
            async with self.limit:
                try:
                    await retried(call)
                except ApiException as error:
                    if error.status != ignore:
                        raise

        await asyncio.gather(*(one(call) for call in calls))

    async def create(self, manifests: Iterable[dict[str, Any]]) -> None:
        """Create GPRs and DDPJobs (namespaced custom objects)."""
        create = self.custom.create_namespaced_custom_object
        await self.gather(
            (functools.partial(create, *_resource(m), m, _request_timeout=120) for m in manifests), ignore=409
        )

    async def delete(self, manifests: Iterable[dict[str, Any]]) -> None:
        """Request deletion of GPRs and DDPJobs."""
        delete = self.custom.delete_namespaced_custom_object
        await self.gather(
            (
                functools.partial(delete, *_resource(m), m["metadata"]["name"], _request_timeout=120)
                for m in manifests
            ),
            ignore=404,
        )

    async def list(self, manifest: dict[str, Any]) -> list[dict[str, Any]]:
        """Every object of the manifest's kind in the namespace, in pages of LIST_PAGE."""
        items: list[dict[str, Any]] = []
        paging: dict[str, Any] = {"limit": LIST_PAGE}
        while True:
            page = await retried(
                functools.partial(
                    self.custom.list_namespaced_custom_object,
                    *_resource(manifest),
                    **paging,
                    _request_timeout=120,
                )
            )
            items += page["items"]
            if not page["metadata"].get("continue"):
                return items
            paging["_continue"] = page["metadata"]["continue"]

    async def close(self) -> None:
        await self.management.close()
        await self.colony.close()


async def retried(call: Callable[[], Awaitable[Any]], attempts: int = 6) -> Any:
    """`call()`, again after a pause when the API server is overloaded (429, 5xx, timeouts: the
    machine runs the operator, two API servers and this benchmark on a few cores)."""
    for attempt in range(attempts):
        try:
            return await call()
        except ApiException as error:
            if error.status not in RETRIED_STATUSES or attempt == attempts - 1:
                raise
        except (TimeoutError, aiohttp.ClientError):
            if attempt == attempts - 1:
                raise
        await asyncio.sleep(2**attempt)
    raise AssertionError("unreachable")


def _resource(manifest: dict[str, Any]) -> tuple[str, str, str, str]:
    """(group, version, namespace, plural): the leading arguments of CustomObjectsApi calls."""
    group = manifest["apiVersion"].split("/")[0]
    plural = "gpuprovisioningrequests" if manifest["kind"] == "GPUProvisioningRequest" else "ddpjobs"
    return group, VERSION, NAMESPACE, plural


async def connect(management: LocalCluster, colony: LocalCluster, concurrency: int) -> Clients:
    """Async clients of both clusters."""
    return Clients(
        await aconfig.new_client_from_config(config_file=str(management.kubeconfig_path)),
        await aconfig.new_client_from_config(config_file=str(colony.kubeconfig_path)),
        asyncio.Semaphore(concurrency),
    )


class PodFinisher:
    """Plays the training script of every DDPJob worker: marks Running pods Succeeded (kwok outcome
    annotation), polling the colony cluster until stopped."""

    def __init__(self, clients: Clients) -> None:
        self.clients = clients
        self.core = aclient.CoreV1Api(clients.colony)
        self.done: set[str] = set()
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            # the namespace may not exist yet, or the API server is busy: poll again
            with contextlib.suppress(ApiException, OSError, TimeoutError):
                await self._finish_running()
            await asyncio.sleep(0.5)

    async def _finish_running(self) -> None:
        pods = await self.core.list_namespaced_pod(
            NAMESPACE, field_selector="status.phase=Running", _request_timeout=60
        )
        todo = [p.metadata.name for p in pods.items if p.metadata.uid not in self.done]
        self.done |= {p.metadata.uid for p in pods.items}
        body = {"metadata": {"annotations": {OUTCOME_ANNOTATION: "Succeeded"}}}
        patch = self.core.patch_namespaced_pod
        await self.clients.gather(
            (functools.partial(patch, name, NAMESPACE, body) for name in todo), ignore=404
        )


# -- phases ---------------------------------------------------------------------------------------


@dataclass
class Population:
    """The benchmark's live objects, oldest first, and a counter for new names."""

    gprs: deque[dict[str, Any]] = field(default_factory=deque)
    jobs: deque[dict[str, Any]] = field(default_factory=deque)
    made: int = 0

    def new_gprs(self, count: int) -> list[dict[str, Any]]:
        """`count` new GPR manifests, remembered as the newest."""
        return self._new(count, "g", gpr_manifest, self.gprs)

    def new_jobs(self, count: int) -> list[dict[str, Any]]:
        """`count` new DDPJob manifests, remembered as the newest."""
        return self._new(count, "j", ddpjob_manifest, self.jobs)

    def _new(
        self, count: int, prefix: str, make: Callable[[str], dict[str, Any]], into: deque[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        manifests = [make(f"{prefix}-{self.made + i:07d}") for i in range(count)]
        self.made += count
        into.extend(manifests)
        return manifests


async def _loaded(clients: Clients, population: Population) -> tuple[int, int, bool]:
    """(GPRs with a phase, DDPJobs Succeeded, whether one scheduling pass counted every GPR)."""
    gprs = await clients.list(gpr_manifest("x"))
    jobs = await clients.list(ddpjob_manifest("x"))
    get = clients.custom.get_cluster_custom_object
    queue = await retried(functools.partial(get, GROUP, VERSION, "gpuqueues", QUEUE, _request_timeout=120))
    counted = (queue.get("status") or {}).get("pending", 0) + (queue.get("status") or {}).get("admitted", 0)
    with_phase = sum(1 for g in gprs if (g.get("status") or {}).get("phase"))
    succeeded = sum(1 for j in jobs if (j.get("status") or {}).get("phase") == "Succeeded")
    return with_phase, succeeded, counted == len(population.gprs)


async def load(
    clients: Clients, population: Population, counts: tuple[int, int], size: Size, operator: ManagedProcess
) -> list[str]:
    """Create `counts` (GPRs, DDPJobs) more objects and wait until the operator has processed the
    whole population; returns notes."""
    started = time.monotonic()
    await clients.create(population.new_gprs(counts[0]) + population.new_jobs(counts[1]))
    notes = [f"load: {counts[0]:,} GPRs + {counts[1]:,} DDPJobs created in {time.monotonic() - started:.0f}s"]
    gprs, jobs = len(population.gprs), len(population.jobs)
    while True:
        if not operator.running():
            raise ProcessFailed(f"the operator exited during the load:\n{operator.log_tail()}")
        phased, succeeded, counted = await _loaded(clients, population)
        if phased == gprs and succeeded == jobs and counted:
            notes.append(
                f"load: {gprs:,} + {jobs:,} processed {time.monotonic() - started:.0f}s after the start"
            )
            return notes
        if time.monotonic() - started > size.load_timeout_s:
            notes.append(
                f"load NOT fully processed after {size.load_timeout_s:.0f}s: {phased:,}/{gprs:,} "
                f"GPRs with a phase, {succeeded:,}/{jobs:,} DDPJobs Succeeded, queue counted all: {counted}"
            )
            return notes
        await asyncio.sleep(max(POLL_S, gprs / 1000))  # a list of 10,000 GPRs is no free poll


def _due(credit: float, rate: float, tick: float) -> tuple[int, float]:
    """Whole objects due this tick at `rate` per second, and the credit carried to the next."""
    credit += rate * tick
    return int(credit), credit - int(credit)


async def churn(clients: Clients, population: Population, size: Size, operator: ManagedProcess) -> list[str]:
    """Replace the oldest GPRs and DDPJobs with new ones at a steady rate for `size.churn_s`."""
    started, tick, ticks = time.monotonic(), 1.0, 0
    gpr_credit = job_credit = 0.0
    replaced = [0, 0]
    while (elapsed := time.monotonic() - started) < size.churn_s:
        if not operator.running():
            raise ProcessFailed(f"the operator exited during the churn:\n{operator.log_tail()}")
        gprs, gpr_credit = _due(gpr_credit, size.gpr_churn_per_s, tick)
        jobs, job_credit = _due(job_credit, size.job_churn_per_s, tick)
        old = [population.gprs.popleft() for _ in range(gprs)] + [
            population.jobs.popleft() for _ in range(jobs)
        ]
        await clients.delete(old)
        await clients.create(population.new_gprs(gprs) + population.new_jobs(jobs))
        replaced = [replaced[0] + gprs, replaced[1] + jobs]
        ticks += 1
        await asyncio.sleep(max(0.0, started + ticks * tick - time.monotonic()))
    return [
        f"churn: {replaced[0]:,} GPRs and {replaced[1]:,} DDPJobs replaced (oldest deleted, new created) in "
        f"{elapsed:.0f}s; population constant at {len(population.gprs):,} + {len(population.jobs):,}"
    ]


# -- the run --------------------------------------------------------------------------------------


@dataclass
class Environment:
    """Both clusters and the operator process."""

    management: LocalCluster
    colony: LocalCluster
    operator: ManagedProcess
    log: Path


def start_environment(size: Size) -> Environment:
    """Both clusters (the colony with CPU nodes enough for every DDPJob's pod) and the operator,
    serving but with nothing to watch yet."""
    tools = ensure_tools()
    management = start_management_cluster(tools)
    try:
        colony = start_colony_cluster(tools, "bench-memory-colony")
    except BaseException:
        management.stop()
        raise
    try:
        nodes = math.ceil(size.ddpjobs / PODS_PER_NODE) + 1
        colony.add_gpu_nodes([GPUNodeSpec("cpu", gpus=0, count=nodes)], timeout=120)
        management.kubectl("create", "namespace", NAMESPACE)
        log = Path(tempfile.mkdtemp(prefix="bench-memory-")) / "operator.log"
        operator = start_operator(management, log)
    except BaseException:
        colony.stop()
        management.stop()
        raise
    return Environment(management, colony, operator, log)


def start_operator(management: LocalCluster, log: Path) -> ManagedProcess:
    """`python -m colony operator -n bench --metrics-port=…` as a process, once its client is up."""
    env = {**os.environ, "KUBECONFIG": str(management.kubeconfig_path)}
    argv = [sys.executable, "-m", "colony", "operator", "-n", NAMESPACE, f"--metrics-port={free_port()}"]
    operator = ManagedProcess("operator", argv, log, env=env)
    operator.start()
    operator.wait_until(lambda: READY_LINE in log.read_text(), 600, "initial authentication")
    return operator


def stop_environment(environment: Environment) -> None:
    """Stop the operator and both clusters."""
    environment.operator.stop()
    environment.colony.stop()
    environment.management.stop()


def colony_ready(environment: Environment) -> None:
    """Register the colony cluster as a Colony and the GPUQueue; wait until the Colony is Ready."""
    management = environment.management
    management.apply([*colony_manifests(environment.colony.kubeconfig()), queue_manifest()])

    def ready() -> bool:
        status = management.get_json("colony", COLONY, "-n", NAMESPACE).get("status") or {}
        return status.get("phase") == "Ready"

    environment.operator.wait_until(ready, 120, f"Colony {COLONY} Ready")


@dataclass
class Outcome:
    """What one run measured."""

    size: str
    params: Size
    samples: list[Sample]
    notes: list[str]
    churn_s: float


async def _measure_objects(environment: Environment, size: Size, sampler: Sampler, notes: list[str]) -> float:
    """Phases load, settle and churn; returns how long the churn ran."""
    clients = await connect(environment.management, environment.colony, size.concurrency)
    finisher = PodFinisher(clients)
    finisher.start()
    population = Population()
    try:
        half = (size.gprs // 2, size.ddpjobs // 2)
        for phase, counts in (("half", half), ("full", (size.gprs - half[0], size.ddpjobs - half[1]))):
            sampler.phase = f"load-{phase}"
            notes += await load(clients, population, counts, size, environment.operator)
            sampler.phase = f"loaded-{phase}"
            await asyncio.sleep(size.settle_s)
        sampler.phase = "churn"
        churn_started = time.monotonic()
        notes += await churn(clients, population, size, environment.operator)
        return time.monotonic() - churn_started
    finally:
        sampler.phase = "done"
        await finisher.stop()
        await clients.close()


def measure(size_name: str, params: Size) -> Outcome:
    """Start everything, run every phase with the sampler on, stop everything."""
    environment = start_environment(params)
    pid = environment.operator.pid
    assert pid is not None
    sampler = Sampler(pid, params.sample_s)
    sampler.start()
    notes: list[str] = []
    try:
        time.sleep(params.settle_s)
        sampler.phase = "baseline"
        time.sleep(params.settle_s)
        sampler.sample()
        sampler.phase = "colony"
        colony_ready(environment)
        time.sleep(params.settle_s)
        sampler.sample()
        churn_s = asyncio.run(_measure_objects(environment, params, sampler, notes))
        sampler.sample()
    finally:
        sampler.stop()
        stop_environment(environment)
    return Outcome(size_name, params, list(sampler.samples), notes, churn_s)


# -- tables ---------------------------------------------------------------------------------------

PHASES = (
    ("baseline", "baseline: idle, nothing watched", 0),
    ("colony", "Colony Ready + GPUQueue", 0),
    ("load-half", "loading half: creating, operator processing", 0.5),
    ("loaded-half", "half loaded, settled", 0.5),
    ("load-full", "loading the rest", 1),
    ("loaded-full", "loaded, settled", 1),
    ("churn", "churn", 1),
)


def _churn_halves(outcome: Outcome) -> tuple[list[Sample], list[Sample]]:
    churn = outcome.samples and [s for s in outcome.samples if s.phase == "churn"]
    if not churn:
        return [], []
    middle = churn[0].t + (churn[-1].t - churn[0].t) / 2
    return [s for s in churn if s.t < middle], [s for s in churn if s.t >= middle]


def _share(count: int, share: float) -> int:
    """How many of `count` objects a phase holds (the first load step creates count // 2)."""
    return count // 2 if share == 0.5 else int(count * share)


def phase_table(outcome: Outcome) -> Table:
    """RSS per phase: median and max of the samples, the operator's CPU use, how long it lasted."""
    rows = []
    for phase, label, share in PHASES:
        samples = [s for s in outcome.samples if s.phase == phase]
        rows.append(
            {
                "phase": label,
                "GPRs": _share(outcome.params.gprs, share),
                "DDPJobs": _share(outcome.params.ddpjobs, share),
                "samples": len(samples),
                "RSS MiB (median)": round(_median(samples), 1),
                "RSS MiB (max)": round(max((s.rss for s in samples), default=0.0), 1),
                "operator CPU % of a core": round(_cpu_percent(samples), 1),
                "sockets (max)": max((s.sockets for s in samples), default=0),
                "seconds": round(samples[-1].t - samples[0].t, 1) if samples else 0.0,
            }
        )
    return Table(
        benchmark="memory",
        title=f"Operator RSS by phase ({outcome.size})",
        columns=list(rows[0]),
        rows=rows,
        notes=[
            "RSS = VmRSS of the operator process and its children, sampled every "
            f"{outcome.params.sample_s:g}s; the baseline row is the same operator before it watched "
            "anything.",
            *outcome.notes,
        ],
    )


def churn_table(outcome: Outcome) -> Table:
    """The regression over the second half of the churn phase."""
    first, second = _churn_halves(outcome)
    trend = fit_trend(second)
    growth = trend.slope_mib_per_h * outcome.churn_s / 3600
    row = {
        "churn min": round(outcome.churn_s / 60, 1),
        "GPR churn /s": outcome.params.gpr_churn_per_s,
        "DDPJob churn /s": outcome.params.job_churn_per_s,
        "RSS start MiB": round(_median(first[:5]), 1),
        "RSS end MiB": round(_median(second[-5:]), 1),
        "slope MiB/h (2nd half)": round(trend.slope_mib_per_h, 2),
        "t": round(trend.t_stat, 1) if math.isfinite(trend.t_stat) else "inf",
        "growth over churn MiB": round(growth, 1),
        "% of mean": round(100 * growth / trend.mean, 1) if trend.mean else 0.0,
        "trend": is_trend(trend, outcome.churn_s),
    }
    return Table(
        benchmark="memory",
        title=f"RSS under churn ({outcome.size})",
        columns=list(row),
        rows=[row],
        notes=[
            f"Least squares over the {trend.samples} samples of the second half of the churn; a trend is "
            f"t > {TREND_T:g} and growth (slope x churn duration) > {TREND_SHARE:.0%} of the mean RSS.",
            "Start = median of the first 5 churn samples; end = median of the last 5.",
        ],
        targets={"trend": False},
    )


def summary_table(outcome: Outcome) -> Table:
    """The figures the issue asks for, with the targets."""
    by_phase = {phase: [s for s in outcome.samples if s.phase == phase] for phase, _, _ in PHASES}
    baseline, colony, half, loaded = (
        _median(by_phase[p]) for p in ("baseline", "colony", "loaded-half", "loaded-full")
    )
    peak = max((s.rss for s in outcome.samples), default=0.0)
    first, second = _churn_halves(outcome)
    trend = fit_trend(second)
    objects = outcome.params.gprs + outcome.params.ddpjobs
    marginal = (loaded - half) / (objects - objects // 2) * 1000 if objects else 0.0
    average = (loaded - colony) / objects * 1000 if objects else 0.0
    target = f"< {RSS_TARGET_MIB:g}" if outcome.size == "full" else ""
    rows = [
        _metric("baseline RSS (idle, in-run)", baseline, ""),
        _metric("RSS with half the objects", half, ""),
        _metric("RSS after load", loaded, target, loaded < RSS_TARGET_MIB),
        _metric("peak RSS (any phase)", peak, target, peak < RSS_TARGET_MIB),
        _metric("RSS at churn start", _median(first[:5]), ""),
        _metric("RSS at churn end", _median(second[-5:]), ""),
        _metric(
            "slope MiB/h (2nd half of churn)",
            trend.slope_mib_per_h,
            "no trend",
            not is_trend(trend, outcome.churn_s),
        ),
        _metric("MiB per 1,000 objects (marginal: half -> full)", marginal, ""),
        _metric("MiB per 1,000 objects (average: Colony Ready -> full)", average, ""),
        _metric("RSS after load / baseline", loaded / baseline if baseline else 0.0, ""),
    ]
    return Table(
        benchmark="memory",
        title=f"Operator memory summary ({outcome.size}: {outcome.params.gprs:,} GPRs + "
        f"{outcome.params.ddpjobs:,} DDPJobs)",
        columns=["metric", "value", "target", "met"],
        rows=rows,
        notes=[
            "The 300 MiB target applies at the full size (10,000 GPRs + 1,000 DDPJobs); smaller sizes only "
            "show the figures.",
            f"machine: {machine()}",
        ],
        targets={"rss_mib": RSS_TARGET_MIB, "trend": False},
    )


def _metric(name: str, value: float, target: str, met: bool | None = None) -> dict[str, Any]:
    return {"metric": name, "value": round(value, 2), "target": target, "met": met if target else None}


def tables(outcome: Outcome) -> list[Table]:
    """Summary, per phase, churn regression."""
    return [summary_table(outcome), phase_table(outcome), churn_table(outcome)]


def run(size: str, churn_minutes: float | None = None) -> list[Table]:
    """Run the benchmark at `size` (tiny, quick or full); `churn_minutes` overrides the churn."""
    params = SIZE_PARAMS[size]
    if churn_minutes is not None:
        params = replace(params, churn_s=churn_minutes * 60)
    return tables(measure(size, params))


def main() -> int:
    """Command line: run one size and print its tables as markdown."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", choices=SIZES, default="quick")
    parser.add_argument("--churn-minutes", type=float, default=None, help="override the churn duration")
    options = parser.parse_args()
    for table in run(options.size, options.churn_minutes):
        print(table.markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
