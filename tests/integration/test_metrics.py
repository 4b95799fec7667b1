"""Operator metrics on real API servers: the session operator runs a colony, a GPUQueue with two GPRs
(one admitted, one waiting on quota) and a DDPJob whose end tears the (ephemeral) colony down; its
/metrics then shows reconciles per kind, handler latency histograms, queue depth and estimated wait,
GPUs allocated and free, teardown latency and posted Events, and drops the series of deleted objects.
Kubernetes Events for the same state changes are checked on the objects."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from colony.devenv.cluster import LocalCluster
from colony.devenv.process import ManagedProcess
from tests.integration.conftest import eventually, session_metrics_port
from tests.integration.test_colony_controller import _apply, _existing_colony, _kubeconfig_secret, _phase_is
from tests.integration.test_ddpjob_controller import _finish, _job, _pods
from tests.integration.test_ddpjob_controller import _status as _job_status
from tests.integration.test_gpr_scheduling import _gpr, _phase
from tests.integration.test_gpr_scheduling import _status as _gpr_status

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _scrape() -> Samples:
    url = f"http://127.0.0.1:{session_metrics_port()}/metrics"
    with urllib.request.urlopen(url, timeout=5) as answer:
        text = answer.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _get(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def _sum(samples: Samples, name: str, **labels: str) -> float:
    """Sum of the samples of `name` whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(value for (sample, found), value in samples.items() if sample == name and wanted <= found)


@pytest.fixture
def gpu_queue(management: LocalCluster, namespace: str) -> Iterator[str]:
    """A GPUQueue for this test's namespace with a quota of one H100 (the second request waits)."""
    name = f"metrics-{namespace[2:]}"
    management.apply(
        [
            {
                "apiVersion": "infra.exalsius.ai/v1",
                "kind": "GPUQueue",
                "metadata": {"name": name},
                "spec": {"namespaces": [namespace], "quotas": [{"gpuType": "H100", "nominal": 1}]},
            }
        ]
    )
    try:
        yield name
    finally:
        management.kubectl(
            "delete", "gpr", "--all", "-n", namespace, "--wait=true", "--timeout=60s", check=False
        )
        management.kubectl("delete", "gpuqueue", name, "--ignore-not-found", "--wait=true", check=False)


def test_operator_exports_reconcile_queue_gpu_teardown_metrics_and_events(
    management: LocalCluster,
    colony_cluster: LocalCluster,
    namespace: str,
    operator_process: ManagedProcess,
    gpu_queue: str,
) -> None:
    before = _scrape()
    _kubeconfig_secret(management, namespace, "gpu-kubeconfig", colony_cluster.kubeconfig())
    colony = _existing_colony("test-colony", "gpu-kubeconfig")
    colony["metadata"]["labels"] = {"colony.exalsius.ai/ephemeral": "true"}  # torn down after its job
    _apply(management, namespace, colony)
    eventually(lambda: _phase_is(management, namespace, "test-colony", "Ready"), 30)

    # Two GPRs on a quota of one H100: one admitted, one waiting with an estimate (holder's 5m).
    _apply(management, namespace, _gpr("holder", "H100", 1, 1, exitDuration="5m"))
    eventually(lambda: _phase(management, namespace, "holder", "Ready"), 30)
    _apply(management, namespace, _gpr("waiter", "H100", 1, 1))
    eventually(lambda: _gpr_status(management, namespace, "waiter").get("estimatedWaitSeconds"), 20)

    def queue_exported() -> Samples | None:
        samples = _scrape()
        return samples if _get(samples, "colony_queue_pending_requests", queue=gpu_queue) == 1 else None

    samples = eventually(queue_exported, 15)
    assert _get(samples, "colony_queue_admitted_requests", queue=gpu_queue) == 1
    longest = _get(samples, "colony_queue_estimated_wait_max_seconds", queue=gpu_queue)
    median = _get(samples, "colony_queue_estimated_wait_median_seconds", queue=gpu_queue)
    assert longest is not None and median is not None and 200 < median <= longest <= 300
    gpus = {"namespace": namespace, "colony": "test-colony", "gpu_type": "H100"}
    allocated = _get(samples, "colony_gpus_allocated", **gpus)
    free = _get(samples, "colony_gpus_free", **gpus)
    assert allocated is not None and free is not None
    assert allocated >= 1 and allocated + free == 8  # the colony cluster's one H100 node has 8
    management.kubectl("delete", "gpr", "--all", "-n", namespace, "--wait=true", "--timeout=60s")

    # A job on the ephemeral colony: when it ends, the colony's teardown is requested.
    _apply(management, namespace, _job(parallelism=1))
    eventually(lambda: _job_status(management, namespace).get("phase") == "Running", 40)
    for pod in _pods(colony_cluster, namespace, 0):
        _finish(colony_cluster, namespace, pod["metadata"]["name"], "Succeeded")
    eventually(lambda: _job_status(management, namespace).get("teardownRequestedAt"), 30)
    gone = ("get", "colony", "test-colony", "-n", namespace)
    eventually(lambda: management.kubectl(*gone, check=False).returncode != 0, 30)
    management.kubectl("delete", "gpuqueue", gpu_queue, "--wait=true")

    def settled() -> Samples | None:
        samples = _scrape()
        queue_gone = _get(samples, "colony_queue_pending_requests", queue=gpu_queue) is None
        colony_gone = (
            _get(samples, "colony_cost_accrued_usd", namespace=namespace, colony="test-colony") is None
        )
        return samples if queue_gone and colony_gone else None

    after = eventually(settled, 15)  # series of the deleted queue and colony are removed
    assert _get(after, "colony_gpus_free", **gpus) is None

    for kind, handler in (
        ("Colony", "reconcile_colony"),
        ("Colony", "delete_colony"),
        ("DDPJob", "start_ddpjob"),
        ("DDPJob", "track_ddpjob"),
        ("GPUProvisioningRequest", "scheduling_pass"),
        ("GPUQueue", "queue_changed"),
    ):
        runs = _sum(after, "colony_reconcile_total", kind=kind, handler=handler)
        assert runs > _sum(before, "colony_reconcile_total", kind=kind, handler=handler), (kind, handler)
        timed = _sum(after, "colony_reconcile_duration_seconds_count", kind=kind, handler=handler)
        assert timed > 0 and _get(after, "colony_reconcile_duration_seconds_sum", kind=kind, handler=handler)
        buckets = [
            value
            for (name, labels), value in after.items()
            if name == "colony_reconcile_duration_seconds_bucket"
            and {("kind", kind), ("handler", handler)} <= labels
        ]
        assert len(buckets) > 5 and max(buckets) == timed  # cumulative buckets up to le="+Inf"

    job_teardowns = _get(after, "colony_teardown_latency_seconds_count", trigger="job") or 0
    assert job_teardowns >= (_get(before, "colony_teardown_latency_seconds_count", trigger="job") or 0) + 1
    assert _get(after, "colony_teardown_latency_seconds_bucket", trigger="job", le="+Inf") == job_teardowns
    assert _get(after, "colony_teardown_latency_seconds_count", trigger="gpr") is not None

    for kind, reason in (
        ("Colony", "ColonyReady"),
        ("Colony", "ColonyDeleting"),
        ("DDPJob", "Placed"),
        ("DDPJob", "JobSucceeded"),
        ("DDPJob", "ColonyTornDown"),
        ("GPUProvisioningRequest", "GPRQueued"),
        ("GPUProvisioningRequest", "GPRAdmitted"),
    ):
        posted = _sum(after, "colony_events_total", kind=kind, reason=reason)
        assert posted > _sum(before, "colony_events_total", kind=kind, reason=reason), reason

    def events_posted() -> bool:
        events = management.kubectl("get", "events", "-n", namespace).stdout
        wanted = ("ColonyReady", "ColonyDeleting", "ColonyDeleted", "JobSucceeded", "ColonyTornDown")
        return all(reason in events for reason in (*wanted, "GPRQueued", "GPRAdmitted", "GPRReady"))

    eventually(events_posted, 15)
