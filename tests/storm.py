"""A storm with crashes, for chaos tests and `bench --only storm` (issue 17, point 7b).

Dozens of GPRs of mixed sizes, priorities and evictability plus DDPJobs arrive on one colony over a
few tens of seconds while the operator process is SIGKILLed at random moments and started again
(everything drawn from one seed, so a failing run can be replayed). Throughout, `ReservationWatch`
sees every version of every node of the colony (a watch, no sampling) and records any node whose
reservation labels add up to more GPUs than it has. At the end every request must have finished,
no reservation label may be left, and no pod of a finished job may still hold GPUs.

The storm is synchronous (kubectl, the sync Python client, threads): the operator under test is a
separate process, and a test or benchmark calls `run_storm` as a plain function.
"""

from __future__ import annotations

import base64
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes

from colony.devenv.cluster import LocalCluster
from colony.devenv.kwok import OUTCOME_ANNOTATION
from colony.devenv.process import ManagedProcess
from colony.labels import JOB_LABEL, RESERVATION_PREFIX
from colony.placement.decide import TERMINAL_REQUEST_PHASES
from colony.status.ddpjob import TERMINAL_PHASES

COLONY = "pool"
"""The Colony (an `existing` cluster) every request of the storm targets."""


@dataclass
class ReservationWatch:
    """Every version of every node of a cluster, from a watch: reserved GPUs (the sum of the
    reservation labels) against capacity. `run` in a thread; `stop` ends it."""

    kubeconfig: Path
    versions: int = 0
    most_reserved: int = 0
    violations: list[str] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def check(self, node: Any) -> None:
        """Count one version of a node; a violation when it is over-reserved."""
        labels = node.metadata.labels or {}
        reserved = sum(int(v) for k, v in labels.items() if k.startswith(RESERVATION_PREFIX))
        capacity = int((node.status.capacity or {}).get("nvidia.com/gpu", 0))
        self.versions += 1
        self.most_reserved = max(self.most_reserved, reserved)
        if reserved > capacity:
            self.violations.append(
                f"{node.metadata.name}@{node.metadata.resource_version}: {reserved} > {capacity}"
            )

    def run(self) -> None:
        """List, then watch from the list's version until stopped (errors are kept for the caller)."""
        try:
            api = kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(str(self.kubeconfig)))
            listed = api.list_node()
            for node in listed.items:
                self.check(node)
            version = listed.metadata.resource_version
            while not self._stop.is_set():
                stream = kubernetes.watch.Watch().stream(
                    api.list_node, resource_version=version, timeout_seconds=5, allow_watch_bookmarks=False
                )
                for event in stream:
                    node = event["object"]
                    version = node.metadata.resource_version
                    self.check(node)
                    if self._stop.is_set():
                        break
        except BaseException as error:  # reported by the caller
            self.errors.append(error)

    def stop(self) -> None:
        self._stop.set()


@dataclass(frozen=True)
class StormSize:
    """How big a storm is: requests, jobs, kills, and the seconds over which they arrive."""

    gprs: int
    ddpjobs: int
    kills: int
    arrivals_s: float
    converge_limit_s: float


CI_STORM = StormSize(gprs=30, ddpjobs=4, kills=3, arrivals_s=24.0, converge_limit_s=90.0)
"""Under two minutes on a 2-core CI runner."""


@dataclass(frozen=True)
class Arrival:
    at_s: float
    manifest: dict[str, Any]


@dataclass(frozen=True)
class StormPlan:
    """Everything a seed decides: what arrives when, and when the operator is killed."""

    seed: int
    arrivals: list[Arrival]
    kills_at_s: list[float]


def plan_storm(seed: int, size: StormSize) -> StormPlan:
    """GPRs of 1-8 GPUs (mostly small), priorities 50/150/250 (low, medium, high), a third
    evictable, each released a few seconds after admission (exitDuration); DDPJobs of 1-2 workers x
    1 GPU; kill moments spread over the arrivals (at least 4 s apart, so that each restarted
    operator gets to work)."""
    rng = random.Random(seed)
    arrivals = []
    for i in range(size.gprs):
        spec = {
            "gpuShape": "A100-80GB",
            "numberOfGPUNodes": 1,
            "numberOfGPUs": rng.choice((1, 1, 1, 2, 2, 3, 4, 8)),
            "priority": rng.choice((50, 150, 250)),
            "enableEviction": rng.random() < 1 / 3,
            "exitDuration": f"{rng.randint(2, 6)}s",
        }
        manifest = {
            "apiVersion": "infra.exalsius.ai/v1",
            "kind": "GPUProvisioningRequest",
            "metadata": {"name": f"storm-{i:03d}"},
            "spec": spec,
        }
        arrivals.append(Arrival(rng.uniform(0, size.arrivals_s), manifest))
    for i in range(size.ddpjobs):
        manifest = {
            "apiVersion": "training.exalsius.ai/v1",
            "kind": "DDPJob",
            "metadata": {"name": f"job-{i:02d}"},
            "spec": {
                "targetColony": COLONY,
                "parallelism": rng.choice((1, 2)),
                "nprocPerNode": 1,
                "image": "busybox",
                "scriptPath": "/app/train.py",
            },
        }
        arrivals.append(Arrival(rng.uniform(0, size.arrivals_s), manifest))
    kills: list[float] = []
    while len(kills) < size.kills:
        at = rng.uniform(2.0, size.arrivals_s + 4.0)
        if all(abs(at - other) >= 4.0 for other in kills):
            kills.append(at)
    return StormPlan(seed, sorted(arrivals, key=lambda a: a.at_s), sorted(kills))


@dataclass
class StormResult:
    """What a storm ended with (`ok`: nothing the issue forbids happened)."""

    seed: int
    kills: int
    restarts_s: list[float]
    node_versions: int
    most_reserved: int
    violations: list[str]
    converge_s: float | None
    unfinished: list[str]
    labels_left: list[str]
    pods_left: list[str]
    watch_errors: list[str]

    @property
    def ok(self) -> bool:
        return not (
            self.violations
            or self.converge_s is None
            or self.unfinished
            or self.labels_left
            or self.pods_left
            or self.watch_errors
        )


class Storm:
    """One storm on `colony` in `namespace`, with the operator from `start_operator(log_path)`
    (logs in `log_dir`): `start` (the operator and the Colony COLONY over `colony`), `run`,
    `clean_up`."""

    def __init__(
        self,
        management: LocalCluster,
        colony: LocalCluster,
        namespace: str,
        start_operator: Callable[[Path], ManagedProcess],
        log_dir: Path,
    ) -> None:
        self.management, self.colony, self.namespace = management, colony, namespace
        self.start_operator, self.log_dir = start_operator, log_dir
        self.custom = kubernetes.client.CustomObjectsApi(
            kubernetes.config.new_client_from_config(str(management.kubeconfig_path))
        )
        self.colony_core = kubernetes.client.CoreV1Api(
            kubernetes.config.new_client_from_config(str(colony.kubeconfig_path))
        )
        self._logs = (log_dir / f"operator-{i}.log" for i in range(10_000))
        self.operator: ManagedProcess | None = None
        self._finished_pods: set[str] = set()

    def start(self, kubeconfig_secret: dict[str, Any], colony: dict[str, Any], limit_s: float = 90) -> None:
        """Start the operator, apply the colony's kubeconfig Secret and Colony, wait until it is Ready."""
        self.operator = self.start_operator(next(self._logs))
        self.management.apply([kubeconfig_secret, colony])

        def ready() -> bool:
            found = self.management.get_json("colony", COLONY, "-n", self.namespace)
            return bool((found.get("status") or {}).get("phase") == "Ready")

        self.operator.wait_until(ready, limit_s, f"Colony {COLONY} Ready")

    # -- reads ------------------------------------------------------------------------------------

    def _items(self, group: str, plural: str) -> list[dict[str, Any]]:
        found = self.custom.list_namespaced_custom_object(group, "v1", self.namespace, plural)
        items: list[dict[str, Any]] = found["items"]
        return items

    def unfinished(self) -> list[str]:
        """Requests and jobs that have not finished, as `name (phase)`."""
        left = [
            f"{g['metadata']['name']} ({(g.get('status') or {}).get('phase')})"
            for g in self._items("infra.exalsius.ai", "gpuprovisioningrequests")
            if (g.get("status") or {}).get("phase") not in TERMINAL_REQUEST_PHASES
        ]
        left += [
            f"{j['metadata']['name']} ({(j.get('status') or {}).get('phase')})"
            for j in self._items("training.exalsius.ai", "ddpjobs")
            if (j.get("status") or {}).get("phase") not in TERMINAL_PHASES
        ]
        return left

    def labels_left(self) -> list[str]:
        """Reservation labels still on the colony's nodes."""
        return [
            f"{node.metadata.name}: {key}={value}"
            for node in self.colony_core.list_node().items
            for key, value in (node.metadata.labels or {}).items()
            if key.startswith(RESERVATION_PREFIX)
        ]

    def pods_left(self) -> list[str]:
        """Pods of finished jobs that still hold GPUs (not Succeeded or Failed)."""
        finished = {
            j["metadata"]["name"]
            for j in self._items("training.exalsius.ai", "ddpjobs")
            if (j.get("status") or {}).get("phase") in TERMINAL_PHASES
        }
        return [
            f"{pod.metadata.name} ({pod.status.phase})"
            for pod in self.colony_core.list_namespaced_pod(self.namespace, label_selector=JOB_LABEL).items
            if (pod.metadata.labels or {}).get(JOB_LABEL) in finished
            and pod.status.phase not in ("Succeeded", "Failed")
        ]

    # -- acts -------------------------------------------------------------------------------------

    def _create(self, manifest: dict[str, Any]) -> None:
        group, version = manifest["apiVersion"].split("/")
        plural = {"GPUProvisioningRequest": "gpuprovisioningrequests", "DDPJob": "ddpjobs"}[manifest["kind"]]
        self.custom.create_namespaced_custom_object(group, version, self.namespace, plural, manifest)

    def _finish_running_workers(self) -> None:
        """Play the training script: a Running worker succeeds (kwok's outcome annotation)."""
        running = self.colony_core.list_namespaced_pod(
            self.namespace, label_selector=JOB_LABEL, field_selector="status.phase=Running"
        )
        body = {"metadata": {"annotations": {OUTCOME_ANNOTATION: "Succeeded"}}}
        for pod in running.items:
            if pod.metadata.uid not in self._finished_pods:
                self._finished_pods.add(pod.metadata.uid)
                self.colony_core.patch_namespaced_pod(pod.metadata.name, self.namespace, body)

    def _restart(self) -> float:
        """SIGKILL the operator and start a fresh one; seconds until it is logged in again."""
        assert self.operator is not None
        self.operator.kill()
        killed = time.monotonic()
        self.operator = self.start_operator(next(self._logs))
        return time.monotonic() - killed

    def run(self, plan: StormPlan, converge_limit_s: float) -> StormResult:
        """Play the plan, then wait up to `converge_limit_s` for everything to finish."""
        watch = ReservationWatch(self.colony.kubeconfig_path)
        watcher = threading.Thread(target=watch.run, daemon=True, name="reservation-watch")
        watcher.start()
        restarts: list[float] = []
        converge_s: float | None = None
        try:
            started = time.monotonic()
            todo: list[tuple[float, Arrival | None]] = [(a.at_s, a) for a in plan.arrivals]
            todo += [(at, None) for at in plan.kills_at_s]
            for at, arrival in sorted(todo, key=lambda item: item[0]):
                while time.monotonic() - started < at:
                    self._finish_running_workers()
                    time.sleep(min(0.2, max(0.0, at - (time.monotonic() - started))))
                if arrival is None:
                    restarts.append(self._restart())
                else:
                    self._create(arrival.manifest)
            calm = time.monotonic()
            while time.monotonic() - calm < converge_limit_s:
                self._finish_running_workers()
                if not self.unfinished() and not self.labels_left() and not self.pods_left():
                    converge_s = time.monotonic() - calm
                    break
                time.sleep(0.5)
        finally:
            watch.stop()
            watcher.join(10)
        return StormResult(
            seed=plan.seed,
            kills=len(restarts),
            restarts_s=restarts,
            node_versions=watch.versions,
            most_reserved=watch.most_reserved,
            violations=watch.violations,
            converge_s=converge_s,
            unfinished=self.unfinished(),
            labels_left=self.labels_left(),
            pods_left=self.pods_left(),
            watch_errors=[repr(e) for e in watch.errors],
        )

    def clean_up(self) -> None:
        """Delete every request and job of the storm (with the operator running), then stop it."""
        for kind in ("ddpjobs", "gpr"):
            self.management.kubectl(
                "delete", kind, "--all", "-n", self.namespace, "--wait=true", "--timeout=90s", check=False
            )
        if self.operator is not None:
            self.operator.stop()


def colony_manifests(namespace: str, kubeconfig: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The kubeconfig Secret and the `existing` Colony COLONY over the cluster of `kubeconfig`."""
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{COLONY}-kubeconfig", "namespace": namespace},
        "data": {"value": base64.b64encode(kubeconfig.encode()).decode()},
    }
    colony = {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "Colony",
        "metadata": {"name": COLONY, "namespace": namespace},
        "spec": {
            "k8sVersion": "v1.36.3",
            "colonyClusters": [
                {
                    "clusterName": "onprem",
                    "existing": {"kubeconfigSecretRef": {"name": f"{COLONY}-kubeconfig"}},
                }
            ],
        },
    }
    return secret, colony


def summary(result: StormResult) -> str:
    """One line for logs and reports."""
    converged = "never" if result.converge_s is None else f"{result.converge_s:.1f} s"
    return json.dumps(
        {
            "seed": result.seed,
            "kills survived": result.kills,
            "invariant violations": len(result.violations),
            "node versions watched": result.node_versions,
            "most GPUs reserved on a node": result.most_reserved,
            "converged after the last arrival in": converged,
            "unfinished": len(result.unfinished),
            "labels left": len(result.labels_left),
            "pods left": len(result.pods_left),
        }
    )
