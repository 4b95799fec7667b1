"""Benchmark `launch`: launch throughput and latency of DDPJobs on a Ready colony.

N DDPJobs of W workers each are applied at once to the management cluster; the real operator process
places them on an `existing` colony (a second local API server with kwok nodes and Volcano's
scheduler) and creates each job's Service, PodGroup and W worker pods there. A watch in this process
timestamps every object as it appears in the colony cluster. Figures: the wall time until every
object of every job exists, pods per second, and the per-job latency (the job's submission to the
last of its objects), p50 and p99.

Measured the same way, in the same run, on the same control plane:

- floor: a plain async client (kubernetes_asyncio, in a process of its own, as many requests in
  flight as the operator's colony client allows: 100 connections) creating exactly the objects the
  operator renders (colony.render.ddpjob), with POST, and once more with server-side apply (the
  verb the operator uses);
- Kubeflow training-operator (v1, the version pinned in versions.env, built by
  hack/build-training-operator.sh) with Volcano gang scheduling, on N equivalent PyTorchJobs
  (1 master + W-1 workers: the same pod count, image and resources), with its upstream defaults
  and once tuned (more reconcile threads, no client-side rate limit).

    .venv/bin/python -m bench.launch_throughput [--size tiny|quick|full]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import math
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty
from typing import Any

from kubernetes_asyncio.client import ApiClient

from bench.report import SIZES as REPORT_SIZES
from bench.report import Table, percentile
from colony.api.ddpjob import DDPJobSpec
from colony.devenv.cluster import LocalCluster
from colony.devenv.environment import (
    DEFAULT_COLONY_NODES,
    start_colony_cluster,
    start_management_cluster,
)
from colony.devenv.kwok import GPUNodeSpec
from colony.devenv.process import ManagedProcess, free_port
from colony.devenv.tools import Tools, ensure_tools, repo_root
from colony.kube.config import api_client_from_kubeconfig
from colony.kube.resources import Kube
from colony.labels import JOB_LABEL
from colony.render.ddpjob import JobRef, render_ddpjob
from colony.versions import read_pinned_versions

BENCHMARK = "launch"
FLOOR_POST = "floor: plain client, POST"
FLOOR_APPLY = "floor: plain client, server-side apply"
OURS = "colony-operator"


@dataclass(frozen=True)
class Size:
    """One size of the benchmark: `jobs` jobs of `workers` workers; `build_training_operator`: build
    training-operator when it is not cached (else that baseline is skipped and a note says so)."""

    jobs: int
    workers: int
    build_training_operator: bool
    rounds: int
    """Rounds of the floor and colony-operator (their rows are the median round); training-operator,
    many times slower, runs once."""


SIZES: dict[str, Size] = {
    "tiny": Size(jobs=3, workers=2, build_training_operator=False, rounds=1),
    "quick": Size(jobs=50, workers=8, build_training_operator=True, rounds=3),
    "full": Size(jobs=200, workers=8, build_training_operator=True, rounds=3),
}
assert tuple(SIZES) == REPORT_SIZES

# The operator's namespace: DDPJobs in the management cluster, their objects in the colony cluster.
NAMESPACE = "bench"
COLONY = "bench-colony"
IMAGE = "bench.local/trainer:1"
SCRIPT = "/train.py"
CLIENT_CONNECTIONS = 100  # kubernetes_asyncio's default pool: what the operator's colony client has
KF_JOB_LABEL = "training.kubeflow.org/job-name"
KF_SYSTEM_NAMESPACE = "kubeflow-bench"  # training-operator's own namespace (its webhook cert Secret)
KF_WEBHOOK_SECRET = "training-operator-webhook-cert"
# Where training-operator expects its webhook Secret mounted (fixed in its pkg/cert).
KF_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
PODS_PER_NODE = 110  # kwok nodes' pod capacity (colony.devenv.kwok)
READY_TIMEOUT_S = 120.0
WATCHED = (
    ("Pod", "/api/v1/pods"),
    ("Service", "/api/v1/services"),
    ("PodGroup", "/apis/scheduling.volcano.sh/v1beta1/podgroups"),
)
CLEANUP = ("pytorchjobs", "pods", "services", "podgroups")


@dataclass(frozen=True)
class TrainingOperatorVariant:
    """How training-operator is run: its reconcile threads and client rate limit."""

    label: str
    namespace: str
    threads: int
    qps: int
    burst: int


TRAINING_OPERATOR_VARIANTS = (
    TrainingOperatorVariant("training-operator (upstream defaults)", "bench-kf", 1, 20, 30),
    TrainingOperatorVariant("training-operator (tuned)", "bench-kf-tuned", 16, 5000, 10000),
)


@dataclass
class Outcome:
    """What one contender achieved: when each job was submitted and when its last object appeared."""

    variant: str
    submitted: dict[str, float]
    done: dict[str, float]
    pods: int
    objects: int
    expected_objects: int
    cpu_s: float = 0.0
    """CPU seconds of every process of the run (API servers, etcd, schedulers, kwok, the contender,
    the watch) while the contender worked."""
    note: str = ""

    @property
    def complete(self) -> bool:
        """Every object of every job was seen."""
        return bool(self.submitted) and len(self.done) == len(self.submitted)

    @property
    def wall_s(self) -> float:
        """First submission to the last object of the last job."""
        return max(self.done.values()) - min(self.submitted.values())

    @property
    def latencies(self) -> list[float]:
        """Per job: its submission to its last object."""
        return [self.done[job] - self.submitted[job] for job in self.done]


@dataclass
class TrainingOperatorBuild:
    """The training-operator binary (None when unavailable) and how it was obtained."""

    binary: Path | None
    how: str
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


_STARTED = time.monotonic()


def log(message: str) -> None:
    """Progress on stderr (the tables go to stdout)."""
    print(f"[launch {time.monotonic() - _STARTED:6.1f}s] {message}", file=sys.stderr, flush=True)


# -- what each contender is given ---------------------------------------------------------------


def ddpjob_spec(workers: int) -> dict[str, Any]:
    """The DDPJob spec every job of the run has: W CPU workers, gang-scheduled by Volcano."""
    return {
        "targetColony": COLONY,
        "parallelism": workers,
        "nprocPerNode": 1,
        "cpuJob": True,
        "gangScheduler": "volcano",
        "queue": "default",
        "image": IMAGE,
        "scriptPath": SCRIPT,
    }


def job_names(jobs: int, round_: int = 0) -> list[str]:
    """The jobs' names in one round: r<round>-j0 ... r<round>-j<N-1>."""
    return [f"r{round_}-j{i}" for i in range(jobs)]


def ddpjob(name: str, workers: int) -> dict[str, Any]:
    """One DDPJob as the user applies it."""
    return {
        "apiVersion": "training.exalsius.ai/v1",
        "kind": "DDPJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": ddpjob_spec(workers),
    }


def floor_manifests(namespace: str, jobs: Sequence[str], workers: int) -> list[dict[str, Any]]:
    """Exactly the objects the operator creates for the jobs (the pure renderer's output)."""
    spec = DDPJobSpec.model_validate(ddpjob_spec(workers))
    manifests: list[dict[str, Any]] = []
    for name in jobs:
        manifests += render_ddpjob(JobRef(name, namespace, f"floor-{name}"), spec).manifests
    return manifests


def pytorchjob(name: str, namespace: str, workers: int) -> dict[str, Any]:
    """The equivalent PyTorchJob: 1 master + W-1 workers (W pods), same image and resources (none),
    gang-scheduled by Volcano with minAvailable W."""
    template = {
        "spec": {
            "containers": [
                {
                    "name": "pytorch",
                    "image": IMAGE,
                    "command": ["python", SCRIPT],
                    "ports": [{"name": "pytorchjob-port", "containerPort": 29500}],
                }
            ]
        }
    }
    replicas: dict[str, Any] = {"Master": {"replicas": 1, "restartPolicy": "Never", "template": template}}
    if workers > 1:
        replicas["Worker"] = {"replicas": workers - 1, "restartPolicy": "Never", "template": template}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "runPolicy": {"schedulingPolicy": {"minAvailable": workers, "queue": "default"}},
            "pytorchReplicaSpecs": replicas,
        },
    }


# -- watching the colony cluster ----------------------------------------------------------------


def job_of(obj: dict[str, Any]) -> str | None:
    """The job an object belongs to: our job label, training-operator's, or its owner's name."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    owners = meta.get("ownerReferences") or [{}]
    name = labels.get(JOB_LABEL) or labels.get(KF_JOB_LABEL) or owners[0].get("name")
    return str(name) if name else None


class Recorder:
    """Watches pods, Services and PodGroups in every namespace of the colony cluster and remembers
    when each was first seen, per (namespace, job)."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api
        self.seen: dict[tuple[str, str, str], float] = {}
        self.per_job: dict[tuple[str, str], list[float]] = {}
        self.pods: dict[tuple[str, str], int] = {}
        self._changed = asyncio.Condition()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """List each kind (to know where to watch from), then watch it in the background."""
        for kind, path in WATCHED:
            listed = await self._list(path)
            for item in listed.get("items", []):
                self._record(kind, item, time.monotonic())
            version = listed["metadata"]["resourceVersion"]
            self._tasks.append(asyncio.create_task(self._watch(kind, path, version)))

    async def stop(self) -> None:
        """Stop every watch."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _request(self, path: str, query: list[tuple[str, str]]) -> Any:
        """A GET whose response is not read yet (an aiohttp response)."""
        return await self.api.call_api(
            path, "GET", {}, query, {"Accept": "application/json"},
            auth_settings=["BearerToken"], _preload_content=False, _return_http_data_only=True,
        )  # fmt: skip

    async def _list(self, path: str) -> Any:
        response = await self._request(path, [])
        return await response.json(content_type=None)

    async def _watch(self, kind: str, path: str, version: str) -> None:
        """One watch stream after another (each ends after timeoutSeconds), from the last version."""
        while True:
            query = [("watch", "true"), ("resourceVersion", version), ("timeoutSeconds", "600")]
            response = await self._request(path, query)
            async for line in response.content:
                event = json.loads(line)
                obj = event["object"]
                version = obj["metadata"].get("resourceVersion", version)
                if event["type"] == "ADDED":
                    self._record(kind, obj, time.monotonic())
                    async with self._changed:
                        self._changed.notify_all()
            response.release()

    def _record(self, kind: str, obj: dict[str, Any], now: float) -> None:
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), kind, meta["name"])
        if key in self.seen:
            return
        self.seen[key] = now
        job = job_of(obj)
        if job is not None:
            self.per_job.setdefault((key[0], job), []).append(now)
            if kind == "Pod":
                self.pods[(key[0], job)] = self.pods.get((key[0], job), 0) + 1

    def finished(self, namespace: str, jobs: Sequence[str], per_job: int) -> dict[str, float]:
        """Jobs with all `per_job` objects seen, and when their last object was seen."""
        done = {}
        for job in jobs:
            times = self.per_job.get((namespace, job), [])
            if len(times) >= per_job:
                done[job] = max(times)
        return done

    async def wait(
        self, namespace: str, jobs: Sequence[str], per_job: int, timeout: float
    ) -> dict[str, float]:
        """Wait until every job has its `per_job` objects (or the timeout); returns `finished`."""

        def all_done() -> bool:
            return len(self.finished(namespace, jobs, per_job)) == len(jobs)

        async with self._changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait_for(all_done), timeout)
        return self.finished(namespace, jobs, per_job)

    def counts(self, namespace: str, jobs: Sequence[str]) -> tuple[int, int]:
        """(pods, objects) seen for the jobs."""
        pods = sum(self.pods.get((namespace, job), 0) for job in jobs)
        objects = sum(len(self.per_job.get((namespace, job), [])) for job in jobs)
        return pods, objects


def tree_cpu_seconds() -> float:
    """CPU seconds used so far by this process, every live descendant and the reaped ones."""
    ticks = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    used: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            parents[int(entry.name)] = int(fields[1])
            used[int(entry.name)] = sum(int(f) for f in fields[11:15]) / ticks
    tree, frontier = {os.getpid()}, [os.getpid()]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in tree]
        tree.update(children)
        frontier += children
    return sum(used.get(pid, 0.0) for pid in tree)


# -- the environment ----------------------------------------------------------------------------


def colony_nodes(size: Size) -> tuple[GPUNodeSpec, ...]:
    """The default GPU nodes plus CPU nodes enough for every pod of one contender to be placed."""
    cpu_nodes = math.ceil((size.jobs * size.workers + 10) / PODS_PER_NODE)
    return (*DEFAULT_COLONY_NODES, GPUNodeSpec("cpu", gpus=0, count=cpu_nodes))


def start_lean_management_cluster(tools: Tools) -> LocalCluster:
    """The management cluster with every CRD but only etcd and kube-apiserver: nothing of this
    benchmark needs its scheduler, controller-manager or kwok, which would only take CPU."""
    return start_management_cluster(tools, "bench-management", lean=True)


class Environment:
    """Management + colony cluster, the operator (a real process, watching NAMESPACE) and a Ready
    `existing` colony over the colony cluster's kubeconfig Secret. Stops everything on exit."""

    def __init__(self, tools: Tools, size: Size) -> None:
        self.tools = tools
        self.size = size
        self.logs = Path(tempfile.mkdtemp(prefix="colony-bench-launch-"))
        self.management: LocalCluster | None = None
        self.colony: LocalCluster | None = None
        self.operator: ManagedProcess | None = None

    def __enter__(self) -> Environment:
        try:
            self._start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        for part in (self.operator, self.colony, self.management):
            if part is not None:
                part.stop()

    def _start(self) -> None:
        self.management = start_lean_management_cluster(self.tools)
        self.colony = start_colony_cluster(self.tools, "bench-colony", colony_nodes(self.size))
        for cluster in (self.management, self.colony):
            cluster.kubectl("create", "namespace", NAMESPACE)
        env = {**os.environ, "KUBECONFIG": str(self.management.kubeconfig_path)}
        log_path = self.logs / "operator.log"
        self.operator = ManagedProcess("operator", self.operator_argv(), log_path, env=env)
        self.operator.start()
        self.management.apply([self._kubeconfig_secret(), self._colony()])
        self.operator.wait_until(self._colony_ready, READY_TIMEOUT_S, f"colony {COLONY} Ready")
        log(f"clusters started, colony {COLONY} Ready (logs in {self.logs})")

    def operator_argv(self) -> list[str]:
        """`colony operator`, as deployed, watching NAMESPACE."""
        return [sys.executable, "-m", "colony", "operator", f"--namespace={NAMESPACE}"]

    def _kubeconfig_secret(self) -> dict[str, Any]:
        assert self.colony is not None
        value = base64.b64encode(self.colony.kubeconfig().encode()).decode()
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "bench-gpu", "namespace": NAMESPACE},
            "data": {"value": value},
        }

    def _colony(self) -> dict[str, Any]:
        return {
            "apiVersion": "infra.exalsius.ai/v1",
            "kind": "Colony",
            "metadata": {"name": COLONY, "namespace": NAMESPACE},
            "spec": {
                "k8sVersion": read_pinned_versions()["KUBERNETES_VERSION"],
                "colonyClusters": [
                    {"clusterName": "gpu", "existing": {"kubeconfigSecretRef": {"name": "bench-gpu"}}}
                ],
            },
        }

    def _colony_ready(self) -> bool:
        assert self.management is not None
        status = self.management.get_json("colony", COLONY, "-n", NAMESPACE).get("status") or {}
        return status.get("phase") == "Ready"


# -- training-operator --------------------------------------------------------------------------


def training_operator(size: Size) -> TrainingOperatorBuild:
    """The training-operator binary from hack/build-training-operator.sh: cached, or built now when
    the size allows it (the build time is reported)."""
    script = repo_root() / "hack" / "build-training-operator.sh"
    version = read_pinned_versions()["KUBEFLOW_TRAINING_OPERATOR_VERSION"]
    cache = Path(os.environ.get("COLONY_CACHE_DIR", Path.home() / ".cache" / "colony-operator"))
    cached = cache / "bin" / f"training-operator-{version}" / "training-operator"
    if not os.access(cached, os.X_OK) and not size.build_training_operator:
        why = f"training-operator {version} is not cached and this size does not build it ({script.name})"
        return TrainingOperatorBuild(None, "not cached", notes=[why])
    started = time.monotonic()
    result = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        tail = " ".join(result.stderr.strip().splitlines()[-3:])
        return TrainingOperatorBuild(
            None, "build failed", seconds, [f"training-operator did not build: {tail}"]
        )
    how = "built in this run" if "building" in result.stderr else "cached"
    return TrainingOperatorBuild(Path(result.stdout.strip().splitlines()[-1]), how, seconds)


def training_operator_argv(binary: Path, variant: TrainingOperatorVariant) -> list[str]:
    """The command line: only PyTorchJobs, Volcano gang scheduling, our namespace, free ports."""
    return [
        str(binary),
        "--enable-scheme=pytorchjob",
        "--gang-scheduler-name=volcano",
        f"--namespace={variant.namespace}",
        f"--controller-threads={variant.threads}",
        f"--kube-api-qps={variant.qps}",
        f"--kube-api-burst={variant.burst}",
        f"--webhook-server-port={free_port()}",
        "--metrics-bind-address=0",
        "--health-probe-bind-address=0",
        "--zap-log-level=info",
    ]


def start_training_operator(
    colony: LocalCluster, binary: Path, variant: TrainingOperatorVariant, log: Path
) -> ManagedProcess:
    """training-operator against the colony cluster, once its PyTorchJob workers run.

    Its webhook certificate rotator needs its Secret to exist, then the certificate in a file. Its
    ValidatingWebhookConfiguration is not installed (the API server has no Service network to reach
    the webhook): the rotator finds no webhook to patch and reports ready; PyTorchJobs go unvalidated.
    """
    env = {**os.environ, "KUBECONFIG": str(colony.kubeconfig_path), "MY_POD_NAMESPACE": KF_SYSTEM_NAMESPACE}
    process = ManagedProcess(
        f"training-operator-{variant.threads}", training_operator_argv(binary, variant), log, env=env
    )
    process.start()
    try:
        process.wait_until(lambda: mount_webhook_certs(colony), READY_TIMEOUT_S, "its webhook certificate")
        process.wait_until(
            lambda: "Starting workers" in log.read_text() and "pytorchjob" in log.read_text(),
            READY_TIMEOUT_S,
            "PyTorchJob workers started",
        )
    except BaseException:
        process.stop()
        raise
    return process


def mount_webhook_certs(colony: LocalCluster) -> bool:
    """Play the kubelet's Secret volume: copy the certificate training-operator's rotator wrote into
    its Secret to the directory it waits for (it starts its controllers only then)."""
    secret = colony.get_json("secret", KF_WEBHOOK_SECRET, "-n", KF_SYSTEM_NAMESPACE)
    data = secret.get("data") or {}
    if "tls.crt" not in data or "tls.key" not in data:
        return False
    KF_CERT_DIR.mkdir(parents=True, exist_ok=True)
    for key in ("tls.crt", "tls.key"):
        (KF_CERT_DIR / key).write_bytes(base64.b64decode(data[key]))
    return True


def prepare_training_operator(colony: LocalCluster) -> None:
    """training-operator's namespace and the (empty) Secret its certificate rotator fills."""
    colony.kubectl("create", "namespace", KF_SYSTEM_NAMESPACE)
    colony.kubectl("create", "secret", "generic", KF_WEBHOOK_SECRET, "-n", KF_SYSTEM_NAMESPACE)


# -- measuring ----------------------------------------------------------------------------------


async def submit(kube: Kube, manifests: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Create every manifest at once; returns when each create was sent, by name."""
    sent: dict[str, float] = {}

    async def create(manifest: dict[str, Any]) -> None:
        sent[manifest["metadata"]["name"]] = time.monotonic()
        await kube.create(manifest)

    await asyncio.gather(*(create(m) for m in manifests))
    return sent


async def measure(
    variant: str,
    recorder: Recorder,
    namespace: str,
    jobs: Sequence[str],
    per_job: int,
    go: Callable[[], Awaitable[dict[str, float]]],
) -> Outcome:
    """Start the contender (`go` returns each job's submission time) and wait for every object."""
    timeout = 60.0 + len(jobs) * per_job * 0.5
    log(f"{variant}: {len(jobs)} jobs, {per_job} objects each")
    cpu = tree_cpu_seconds()
    submitted, done = await asyncio.gather(go(), recorder.wait(namespace, jobs, per_job, timeout))
    cpu = tree_cpu_seconds() - cpu
    pods, objects = recorder.counts(namespace, jobs)
    outcome = Outcome(variant, submitted, done, pods, objects, per_job * len(jobs), cpu)
    if not outcome.complete:
        outcome.note = f"incomplete after {timeout:.0f}s: {objects} of {outcome.expected_objects} objects"
    log(f"{variant}: {outcome.wall_s:.2f}s" if outcome.complete else f"{variant}: {outcome.note}")
    return outcome


async def probe(kube: Kube, recorder: Recorder, manifest: dict[str, Any], objects: int) -> None:
    """Warm a contender up with one small job and wait until its `objects` objects exist."""
    meta = manifest["metadata"]
    await kube.create(manifest)
    done = await recorder.wait(meta["namespace"], [meta["name"]], objects, READY_TIMEOUT_S)
    if not done:
        raise TimeoutError(f"warm-up job {meta['namespace']}/{meta['name']} got no objects")


async def warm_up_client(kube: Kube, manifests: Sequence[dict[str, Any]]) -> None:
    """Discovery of every kind, and as many open connections as the floor will use, before its
    clock starts (the operator's client is warmed up by a first job the same way)."""
    kinds = sorted({(m["apiVersion"], m["kind"]) for m in manifests})
    for kind in kinds:
        await kube.list(*kind, namespace="default")
    connections = min(CLIENT_CONNECTIONS, len(manifests))
    await asyncio.gather(
        *(kube.list(*kinds[i % len(kinds)], namespace="default") for i in range(connections))
    )


def floor_process(kubeconfig: str, manifests: list[dict[str, Any]], verb: str, queue: Any, go: Any) -> None:
    """Child process of the floor: once warmed up, put "ready"; once `go` is set, create `manifests`
    as fast as possible and put the start time."""

    def ready() -> None:
        queue.put("ready")
        go.wait()

    queue.put(asyncio.run(floor_create(kubeconfig, manifests, verb, ready)))


async def floor_create(
    kubeconfig: str, manifests: list[dict[str, Any]], verb: str, ready: Callable[[], Any]
) -> float:
    """POST (or server-side apply) every manifest, CLIENT_CONNECTIONS in flight, after `ready()`
    returns; the start time."""
    import yaml

    async with await api_client_from_kubeconfig(yaml.safe_load(Path(kubeconfig).read_text())) as api:
        kube = Kube(api)
        await warm_up_client(kube, manifests)
        ready()
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        for manifest in manifests:
            queue.put_nowait(manifest)

        async def worker() -> None:
            while not queue.empty():
                manifest = queue.get_nowait()
                await (kube.create(manifest) if verb == "create" else kube.apply(manifest))

        started = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(CLIENT_CONNECTIONS)))
        return started


def child_result(child: Any, queue: Any) -> Any:
    """What the floor's process put next on `queue`; fails as soon as the process died without it."""
    while True:
        try:
            return queue.get(True, 1.0)
        except Empty:
            if not child.is_alive():
                raise RuntimeError(
                    f"the floor's process exited ({child.exitcode}) without a result"
                ) from None


async def floor(env: Environment, recorder: Recorder, verb: str, round_: int) -> Outcome:
    """The floor: the same objects created directly by a plain client in its own process."""
    assert env.colony is not None
    namespace = f"bench-floor-{verb}-{round_}"
    env.colony.kubectl("create", "namespace", namespace)
    jobs = job_names(env.size.jobs, round_)
    manifests = floor_manifests(namespace, jobs, env.size.workers)
    context = multiprocessing.get_context("spawn")
    queue, start = context.Queue(), context.Event()
    args = (str(env.colony.kubeconfig_path), manifests, verb, queue, start)
    child = context.Process(target=floor_process, args=args, daemon=True)
    child.start()
    await asyncio.to_thread(child_result, child, queue)  # "ready": imported, connected, discovered

    async def go() -> dict[str, float]:
        start.set()
        started: float = await asyncio.to_thread(child_result, child, queue)
        await asyncio.to_thread(child.join, 30)
        return dict.fromkeys(jobs, started)

    label = FLOOR_POST if verb == "create" else FLOOR_APPLY
    outcome = await measure(label, recorder, namespace, jobs, env.size.workers + 2, go)
    await cleanup(env.colony, namespace)
    return outcome


async def ours(env: Environment, recorder: Recorder, management: Kube, round_: int) -> Outcome:
    """colony-operator: DDPJobs created at once in the management cluster."""
    await probe(management, recorder, ddpjob(f"r{round_}-warm-up", 1), 3)
    jobs = job_names(env.size.jobs, round_)
    manifests = [ddpjob(name, env.size.workers) for name in jobs]
    outcome = await measure(
        OURS, recorder, NAMESPACE, jobs, env.size.workers + 2, lambda: submit(management, manifests)
    )
    await cleanup_ours(env)
    return outcome


async def cleanup_ours(env: Environment) -> None:
    """Delete the round's DDPJobs; the operator deletes their objects in the colony cluster."""
    assert env.management is not None and env.colony is not None
    await asyncio.to_thread(
        env.management.kubectl, "delete", "ddpjobs", "--all", "-n", NAMESPACE, "--wait=false"
    )
    await wait_for_no_pods(env.colony, NAMESPACE)


async def kubeflow(
    env: Environment, recorder: Recorder, colony: Kube, binary: Path, variant: TrainingOperatorVariant
) -> Outcome:
    """training-operator: PyTorchJobs created at once in the colony cluster."""
    assert env.colony is not None
    env.colony.kubectl("create", "namespace", variant.namespace)
    log_path = env.logs / f"training-operator-{variant.namespace}.log"
    process = await asyncio.to_thread(start_training_operator, env.colony, binary, variant, log_path)
    try:
        await probe(colony, recorder, pytorchjob("warm-up", variant.namespace, 1), 3)
        jobs = job_names(env.size.jobs)
        manifests = [pytorchjob(name, variant.namespace, env.size.workers) for name in jobs]
        per_job = 2 * env.size.workers + 1
        return await measure(
            variant.label, recorder, variant.namespace, jobs, per_job, lambda: submit(colony, manifests)
        )
    finally:
        process.stop()
        await cleanup(env.colony, variant.namespace)


async def cleanup(colony: LocalCluster, namespace: str) -> None:
    """Delete a contender's objects (no controller-manager runs in the colony cluster), so the next
    contender starts on an equally loaded cluster; waits until its pods are gone."""
    for resource in CLEANUP:
        force = ("--force", "--grace-period=0") if resource == "pods" else ()
        await asyncio.to_thread(
            colony.kubectl, "delete", resource, "--all", "-n", namespace, "--wait=false", *force, check=False
        )
    await wait_for_no_pods(colony, namespace)


async def wait_for_no_pods(colony: LocalCluster, namespace: str) -> None:
    """Wait (up to READY_TIMEOUT_S) until no pod is left in `namespace`."""

    def pods_left() -> int:
        listed = colony.get_json("pods", "-n", namespace)
        return len(listed.get("items", []))

    deadline = time.monotonic() + READY_TIMEOUT_S
    while await asyncio.to_thread(pods_left) and time.monotonic() < deadline:
        await asyncio.sleep(0.5)


async def measure_all(env: Environment, build: TrainingOperatorBuild) -> dict[str, list[Outcome]]:
    """Every contender, one after another, in rounds: the floor, (training-operator in the first
    round), colony-operator last in each round (on the most used etcd). Outcomes by contender."""
    assert env.colony is not None and env.management is not None
    async with (
        await api_client_from_kubeconfig(_kubeconfig(env.colony)) as colony_api,
        await api_client_from_kubeconfig(_kubeconfig(env.management)) as management_api,
    ):
        recorder = Recorder(colony_api)
        await recorder.start()
        outcomes: dict[str, list[Outcome]] = {}
        try:
            for round_ in range(env.size.rounds):
                for verb in ("create", "apply"):
                    add(outcomes, await floor(env, recorder, verb, round_))
                if round_ == 0 and build.binary is not None:
                    await asyncio.to_thread(prepare_training_operator, env.colony)
                    for variant in TRAINING_OPERATOR_VARIANTS:
                        add(outcomes, await kubeflow(env, recorder, Kube(colony_api), build.binary, variant))
                add(outcomes, await ours(env, recorder, Kube(management_api), round_))
        finally:
            await recorder.stop()
    return outcomes


def add(outcomes: dict[str, list[Outcome]], outcome: Outcome) -> None:
    """File one round's outcome under its contender."""
    outcomes.setdefault(outcome.variant, []).append(outcome)


def median_round(rounds: Sequence[Outcome]) -> Outcome:
    """The round with the median wall time (the lower one of two); an incomplete round if any."""
    incomplete = [o for o in rounds if not o.complete]
    if incomplete:
        return incomplete[0]
    ordered = sorted(rounds, key=lambda o: o.wall_s)
    return ordered[(len(ordered) - 1) // 2]


def _kubeconfig(cluster: LocalCluster) -> dict[str, Any]:
    import yaml

    loaded: dict[str, Any] = yaml.safe_load(cluster.kubeconfig())
    return loaded


# -- the table ----------------------------------------------------------------------------------

COLUMNS = [
    "contender",
    "jobs",
    "pods",
    "objects",
    "wall s",
    "pods/s",
    "p50 job s",
    "p99 job s",
    "CPU s",
    "ours ÷ this (wall)",
    "ours ÷ this (p99)",
]


def row(outcome: Outcome, ours_outcome: Outcome | None) -> dict[str, Any]:
    """One contender's row; ratio columns compare colony-operator with it (below 1: ours is faster)."""
    cells: dict[str, Any] = {
        "contender": outcome.variant,
        "jobs": len(outcome.submitted),
        "pods": outcome.pods,
        "objects": f"{outcome.objects}/{outcome.expected_objects}",
    }
    if not outcome.complete:
        return cells | {"wall s": "incomplete"}
    latencies = outcome.latencies
    cells |= {
        "wall s": outcome.wall_s,
        "pods/s": outcome.pods / outcome.wall_s,
        "p50 job s": percentile(latencies, 50),
        "p99 job s": percentile(latencies, 99),
        "CPU s": outcome.cpu_s,
    }
    if ours_outcome is not None and ours_outcome.complete:
        cells["ours ÷ this (wall)"] = ours_outcome.wall_s / outcome.wall_s
        cells["ours ÷ this (p99)"] = percentile(ours_outcome.latencies, 99) / cells["p99 job s"]
    return cells


def verdicts(outcomes: Sequence[Outcome]) -> list[str]:
    """Target lines: within 1.3x of the floor (POST), faster than training-operator."""
    by_name = {o.variant: o for o in outcomes}
    mine = by_name.get(OURS)
    if mine is None or not mine.complete:
        return ["target not evaluated: colony-operator did not create every object"]
    lines = []
    floor_post = by_name.get(FLOOR_POST)
    if floor_post is not None and floor_post.complete:
        ratio = mine.wall_s / floor_post.wall_s
        verdict = "met" if ratio <= 1.3 else "MISSED"
        lines.append(f"target within 1.3x of the floor (POST), wall: {ratio:.2f}x, {verdict}")
    for variant in TRAINING_OPERATOR_VARIANTS:
        other = by_name.get(variant.label)
        if other is not None and other.complete:
            ratio = mine.wall_s / other.wall_s
            verdict = "met" if ratio < 1.0 else "MISSED"
            lines.append(f"target faster than {variant.label}, wall: {ratio:.2f}x, {verdict}")
    return lines


def round_notes(rounds: dict[str, list[Outcome]]) -> list[str]:
    """The wall time of every round of contenders that ran more than once."""
    lines = []
    for variant, outcomes in rounds.items():
        if len(outcomes) > 1:
            walls = ", ".join(f"{o.wall_s:.2f}" if o.complete else "incomplete" for o in outcomes)
            lines.append(f"{variant}: {len(outcomes)} rounds, wall s {walls}; the row is the median round")
    return lines


def table(size: Size, rounds: dict[str, list[Outcome]], build: TrainingOperatorBuild) -> Table:
    """The benchmark's one table: a row per contender (its median round) plus notes."""
    outcomes = [median_round(each) for each in rounds.values()]
    mine = next((o for o in outcomes if o.variant == OURS), None)
    notes = [
        f"{size.jobs} jobs x {size.workers} workers applied at once to a Ready colony; per-job latency is "
        "from the job's submission to the last of its objects seen by a watch in the colony cluster",
        "objects per job: ours and the floor 1 Service + 1 PodGroup + W pods; training-operator 1 PodGroup "
        "+ W pods + W Services (it makes one headless Service per replica)",
        "colony cluster: kube-apiserver + etcd, Volcano's scheduler (500 ms period), kube-scheduler and "
        "kwok with room for every pod: pods are bound and set Running while the contenders create",
        f"floor: {CLIENT_CONNECTIONS} requests in flight (the connection pool of the operator's colony "
        "client), in a process of its own, connections open; its jobs count as submitted when it starts",
        "training-operator with Volcano creates a job's pods only after Volcano has put its PodGroup "
        "Inqueue; its validating webhook is not registered (no Service network to reach it)",
        "CPU s: CPU time of every process of the run (both API servers and etcds, Volcano, kwok, the "
        "contender, this watch) from submission to the last object: less noisy than wall time on a shared "
        "machine",
        "contenders run one after another on the same clusters, colony-operator last in each round; each "
        "one's objects are deleted before the next starts",
        *round_notes(rounds),
        *(f"{o.variant}: {o.note}" for o in outcomes if o.note),
        *build.notes,
    ]
    if build.binary is not None:
        version = read_pinned_versions()["KUBEFLOW_TRAINING_OPERATOR_VERSION"]
        notes.append(f"training-operator {version}: {build.how} ({build.seconds:.1f}s)")
    return Table(
        benchmark=BENCHMARK,
        title=f"Launch throughput: {size.jobs} DDPJobs x {size.workers} workers",
        columns=COLUMNS,
        rows=[row(o, mine) for o in outcomes],
        notes=notes + verdicts(outcomes),
        targets={"ours_vs_floor_wall_max": 1.3, "ours_vs_training_operator_wall_max": 1.0},
    )


def run(size: str) -> list[Table]:
    """Run the benchmark at `size` (tiny, quick or full) and return its table."""
    chosen = SIZES[size]
    build = training_operator(chosen)
    tools = ensure_tools()
    with Environment(tools, chosen) as env:
        outcomes = asyncio.run(measure_all(env, build))
    return [table(chosen, outcomes, build)]


def main() -> int:
    """Print the tables of one run."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", choices=list(SIZES), default="quick")
    options = parser.parse_args()
    for result in run(options.size):
        print(result.markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
