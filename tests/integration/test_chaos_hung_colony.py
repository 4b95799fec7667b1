"""Chaos: one colony's API server hangs (issue 17, point 7a) and the others do not notice.

A TCP fault proxy (tests/faultproxy.py) sits between the operator and the API server of the colony
`flaky`; the colony `healthy` is reached directly. With the proxy hanging (connections accepted,
nothing ever answered), on real API servers and a real operator process:

- the operator marks the flaky server unreachable and stops waiting for it (kube/reachability.py);
- GPR passes and placement passes keep completing in under 2 s (every pass, from the operator's
  own pass-duration histogram), and GPR admissions and DDPJob launches on `healthy` take under 2 s
  from the object's creation to its outcome (admitted, workers created in the colony);
- deleting a DDPJob running on the hung colony ends within its bounded retries, with a
  CleanupAbandoned Event naming what was left behind;
- when the proxy passes again, the operator finds the server answering again.
"""

from __future__ import annotations

import socket
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import kubernetes
import pytest
import yaml

from colony.controllers.gpr.world import CLUSTER_READ_TIMEOUT_S
from colony.devenv.cluster import LocalCluster
from colony.devenv.environment import start_colony_cluster
from colony.devenv.kwok import GPUNodeSpec
from colony.devenv.process import ManagedProcess
from colony.devenv.tools import Tools
from colony.labels import JOB_LABEL
from tests.faultproxy import FaultProxy
from tests.integration.conftest import EXAMPLES, eventually, start_operator
from tests.integration.test_colony_controller import _apply, _existing_colony, _kubeconfig_secret, _phase_is

pytestmark = pytest.mark.integration

LIMIT_S = 2.0
"""Most seconds an operation for the healthy colony may take while the other one hangs."""
A100 = "NVIDIA-A100-SXM4-80GB"
FLAKY_NODES = (GPUNodeSpec("a100", product=A100, gpus=8, gpu_memory_mib=81920, count=1),)
OPERATOR_ENV = {
    "COLONY_API_REQUEST_TIMEOUT_SECONDS": "5",  # the DDPJob cleanup's tries each wait at most this
    "COLONY_UNREACHABLE_PROBE_SECONDS": "1",
}


@pytest.fixture(scope="module")
def flaky_cluster(tools: Tools) -> Iterator[LocalCluster]:
    """This module's colony behind the proxy: 1 kwok node x 8 A100, PyTorchJob served, no Volcano."""
    cluster = start_colony_cluster(tools, "flaky", FLAKY_NODES, upstream=("kubeflow",), volcano=False)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def proxy(flaky_cluster: LocalCluster) -> Iterator[FaultProxy]:
    target = urlparse(flaky_cluster.server)
    assert target.hostname is not None and target.port is not None
    with FaultProxy(target.hostname, target.port) as running:
        yield running


@pytest.fixture
def chaos_namespace(management: LocalCluster) -> str:
    name = f"k-chaos-{uuid.uuid4().hex[:6]}"
    management.kubectl("create", "namespace", name)
    return name


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Operator:
    """The test's operator process and its /metrics."""

    def __init__(self, process: ManagedProcess, metrics_port: int) -> None:
        self.process, self.metrics_port = process, metrics_port

    def passes(self, handler: str) -> dict[str, float]:
        """The pass-duration histogram of one loop: cumulative counts by bucket bound, and `count`."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
        found: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("colony_reconcile_duration_seconds") and f'handler="{handler}"' in line:
                name, value = line.rsplit(" ", 1)
                if name.startswith("colony_reconcile_duration_seconds_bucket"):
                    found[name.split('le="')[1].split('"')[0]] = float(value)
                elif name.startswith("colony_reconcile_duration_seconds_count"):
                    found["count"] = float(value)
        return found


@pytest.fixture
def operator(management: LocalCluster, chaos_namespace: str, tmp_path: Path) -> Iterator[Operator]:
    port = _free_port()
    process = start_operator(
        management, tmp_path / "operator.log", chaos_namespace, metrics_port=port, extra_env=OPERATOR_ENV
    )
    try:
        yield Operator(process, port)
    finally:
        for kind in ("ddpjobs", "pytorchjobs", "gpr"):  # while the operator can still release them
            management.kubectl(
                "delete", kind, "--all", "-n", chaos_namespace, "--wait=true", "--timeout=60s", check=False
            )
        process.stop()


def _through(proxy: FaultProxy, kubeconfig: str) -> str:
    config: dict[str, Any] = yaml.safe_load(kubeconfig)
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    return yaml.safe_dump(config)


def _client(cluster: LocalCluster) -> kubernetes.client.ApiClient:
    return kubernetes.config.new_client_from_config(str(cluster.kubeconfig_path))


def _timed(start: Callable[[], Any], outcome: Callable[[], Any], limit: float = 30.0) -> tuple[float, Any]:
    """Seconds from calling `start()` until `outcome()` is truthy (polled every 50 ms), and the outcome."""
    started = time.monotonic()
    start()
    while not (result := outcome()):
        assert time.monotonic() - started < limit, "no outcome"
        time.sleep(0.05)
    return time.monotonic() - started, result


def _gpr(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "GPUProvisioningRequest",
        "metadata": {"name": name},
        "spec": {"gpuShape": "A100-80GB", "numberOfGPUNodes": 1, "numberOfGPUs": 1},
    }


def _pytorchjob(name: str) -> dict[str, Any]:
    pod = {
        "spec": {
            "nodeSelector": {"nvidia.com/gpu.product": A100},
            "containers": [
                {"name": "pytorch", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            ],
        }
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "labels": {"placement.exalsius.ai/enabled": "true"}},
        "spec": {
            "pytorchReplicaSpecs": {"Worker": {"replicas": 1, "restartPolicy": "OnFailure", "template": pod}}
        },
    }


def _ddpjob(name: str, colony: str) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load((EXAMPLES / "ddpjob.yaml").read_text())
    job["metadata"]["name"] = name
    job["spec"] |= {"targetColony": colony, "parallelism": 1}
    job["spec"].pop("wandbApiKey", None)
    return job


class Management:
    """Reads of the management cluster with the Python client (a poll costs milliseconds)."""

    def __init__(self, cluster: LocalCluster, namespace: str) -> None:
        self.custom = kubernetes.client.CustomObjectsApi(_client(cluster))
        self.namespace = namespace

    def get(self, group: str, plural: str, name: str) -> dict[str, Any]:
        try:
            found: dict[str, Any] = self.custom.get_namespaced_custom_object(
                group, "v1", self.namespace, plural, name
            )
        except kubernetes.client.ApiException as error:
            if error.status == 404:
                return {}
            raise
        return found

    def create(self, body: dict[str, Any]) -> None:
        group, version = body["apiVersion"].split("/")
        plural = {"GPUProvisioningRequest": "gpuprovisioningrequests", "PyTorchJob": "pytorchjobs"}.get(
            body["kind"], body["kind"].lower() + "s"
        )
        self.custom.create_namespaced_custom_object(group, version, self.namespace, plural, body)

    def gpr_colony(self, name: str) -> str | None:
        status = self.get("infra.exalsius.ai", "gpuprovisioningrequests", name).get("status") or {}
        return status.get("colony") if status.get("admittedAt") else None

    def placed_on(self, name: str) -> str | None:
        found = self.get("kubeflow.org", "pytorchjobs", name)
        return ((found.get("metadata") or {}).get("annotations") or {}).get("placement.exalsius.ai/colony")


def _workers(core: kubernetes.client.CoreV1Api, namespace: str, job: str) -> int:
    return len(core.list_namespaced_pod(namespace, label_selector=f"{JOB_LABEL}={job}").items)


def test_a_hung_colony_slows_no_other_colony_and_its_jobs_still_delete(
    management: LocalCluster,
    colony_cluster: LocalCluster,
    flaky_cluster: LocalCluster,
    proxy: FaultProxy,
    chaos_namespace: str,
    operator: Operator,
) -> None:
    ns = chaos_namespace
    _kubeconfig_secret(management, ns, "healthy-kubeconfig", colony_cluster.kubeconfig())
    _kubeconfig_secret(management, ns, "flaky-kubeconfig", _through(proxy, flaky_cluster.kubeconfig()))
    _apply(management, ns, _existing_colony("healthy", "healthy-kubeconfig"))
    _apply(management, ns, _existing_colony("flaky", "flaky-kubeconfig"))
    eventually(lambda: all(_phase_is(management, ns, c, "Ready") for c in ("healthy", "flaky")), 60)
    reads = Management(management, ns)
    healthy_pods = kubernetes.client.CoreV1Api(_client(colony_cluster))
    flaky_pods = kubernetes.client.CoreV1Api(_client(flaky_cluster))

    # a job on the flaky colony, launched while it still answers
    _apply(management, ns, _ddpjob("doomed", "flaky"))
    eventually(lambda: _workers(flaky_pods, ns, "doomed") == 1, 60)
    baseline = {
        "gpr": _timed(lambda: reads.create(_gpr("before")), lambda: reads.gpr_colony("before"))[0],
        "placement": _timed(lambda: reads.create(_pytorchjob("one")), lambda: reads.placed_on("one"))[0],
    }

    proxy.mode = "hang"
    log = operator.process.log_path
    operator.process.wait_until(
        lambda: "marked unreachable" in log.read_text(), 60, "the flaky server marked unreachable"
    )
    time.sleep(CLUSTER_READ_TIMEOUT_S + 1)  # a pass that was waiting for the hung server has ended
    passes_before = {loop: operator.passes(loop) for loop in ("scheduling_pass", "placement_pass")}

    latencies: dict[str, list[float]] = {"gpr": [], "placement": [], "ddpjob": []}
    for i in range(3):
        took, colony = _timed(
            lambda i=i: reads.create(_gpr(f"gpr-{i}")), lambda i=i: reads.gpr_colony(f"gpr-{i}")
        )
        latencies["gpr"].append(took)
        assert str(colony).endswith("healthy"), colony
        took, placed = _timed(
            lambda i=i: reads.create(_pytorchjob(f"train-{i}")), lambda i=i: reads.placed_on(f"train-{i}")
        )
        latencies["placement"].append(took)
        assert str(placed).endswith("healthy"), placed
        took, _ = _timed(
            lambda i=i: reads.create(_ddpjob(f"job-{i}", "healthy")),
            lambda i=i: _workers(healthy_pods, ns, f"job-{i}") == 1,
        )
        latencies["ddpjob"].append(took)
    passes = {}
    for loop, before in passes_before.items():
        after = operator.passes(loop)
        passes[loop] = {le: after[le] - before.get(le, 0) for le in ("1.0", "2.5", "count")}
    print(f"while flaky hangs: seconds to the outcome {latencies} (before the hang: {baseline});")
    print(f"passes (count, under 1 s, under 2.5 s): {passes}")
    for loop, seen in passes.items():
        assert seen["count"] >= 3, (loop, seen)
        assert seen["1.0"] == seen["count"], (loop, seen)  # every pass under 1 s, so under LIMIT_S
    slow = {what: [f"{s:.2f}" for s in latencies[what] if s >= LIMIT_S] for what in ("gpr", "ddpjob")}
    assert not any(slow.values()), slow

    deleted = time.monotonic()
    management.kubectl("delete", "ddpjob", "doomed", "-n", ns, "--wait=false")
    eventually(lambda: not reads.get("training.exalsius.ai", "ddpjobs", "doomed"), 60, 0.2)
    print(f"deleting the job on the hung colony took {time.monotonic() - deleted:.1f} s")
    events = management.kubectl(
        "get", "events", "-n", ns, "--field-selector=involvedObject.name=doomed"
    ).stdout
    assert "CleanupAbandoned" in events and "left behind" in events, events

    proxy.mode = "pass"
    proxy.reset_all()
    operator.process.wait_until(
        lambda: "answers again" in log.read_text(), 30, "the flaky server answering again"
    )
    flaky_pods.delete_collection_namespaced_pod(ns, label_selector=f"{JOB_LABEL}=doomed")
