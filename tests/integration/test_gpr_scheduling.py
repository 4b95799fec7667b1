"""GPU Provisioning Requests on real API servers: queueing by priority, wait estimates, release on
exitDuration and idle timeout, preemption with requeue, quotas with borrowing and reclaim, and
auto-provisioning of the cheapest (AWS) colony that is torn down after release.

The colony cluster here is this module's own (2 nodes x 8 A100-80GB, 1 node x 8 H100, kwok), so
the GPU arithmetic of each scenario is exact.
"""

from __future__ import annotations

import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from colony.devenv.capi_harness import CapiHarness
from colony.devenv.cluster import LocalCluster
from colony.devenv.environment import start_colony_cluster
from colony.devenv.process import ManagedProcess
from colony.devenv.tools import Tools
from colony.scheduling.queueing.objects import reservation_label
from tests.integration.conftest import eventually, session_metrics_port
from tests.integration.test_colony_controller import _apply, _existing_colony, _kubeconfig_secret, _phase_is


@pytest.fixture(scope="module")
def gpr_cluster(tools: Tools) -> Iterator[LocalCluster]:
    cluster = start_colony_cluster(tools, "gpr-colony")
    try:
        yield cluster
    finally:
        cluster.stop()


def _colony(management: LocalCluster, cluster: LocalCluster, namespace: str) -> None:
    _kubeconfig_secret(management, namespace, "gpu-kubeconfig", cluster.kubeconfig())
    _apply(management, namespace, _existing_colony("pool", "gpu-kubeconfig"))
    eventually(lambda: _phase_is(management, namespace, "pool", "Ready"), 30)


def _gpr(name: str, gpu: str, nodes: int, gpus: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "GPUProvisioningRequest",
        "metadata": {"name": name},
        "spec": {"gpuShape": gpu, "numberOfGPUNodes": nodes, "numberOfGPUs": gpus, **spec},
    }


def _status(management: LocalCluster, namespace: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = management.get_json("gpr", name, "-n", namespace).get("status") or {}
    return status


def _phase(management: LocalCluster, namespace: str, name: str, phase: str) -> dict[str, Any] | None:
    status = _status(management, namespace, name)
    return status if status.get("phase") == phase else None


def _ready(management: LocalCluster, namespace: str, name: str) -> dict[str, Any]:
    """The request's status once it is Ready; until then an AssertionError saying where it is."""
    status = _status(management, namespace, name)
    assert status.get("phase") == "Ready", f"{name} is {status.get('phase')}: {status.get('message')}"
    return status


def _reserved(cluster: LocalCluster, namespace: str, name: str) -> dict[str, int]:
    label = reservation_label(f"{namespace}/{name}")
    return {
        n["metadata"]["name"]: int(n["metadata"]["labels"][label])
        for n in cluster.get_json("nodes")["items"]
        if label in (n["metadata"].get("labels") or {})
    }


@pytest.fixture
def cleanup(management: LocalCluster) -> Iterator[list[tuple[str, ...]]]:
    """kubectl delete arguments to run after the test (GPRs free their node labels on deletion)."""
    objects: list[tuple[str, ...]] = []
    yield objects
    for args in objects:
        management.kubectl("delete", *args, "--ignore-not-found", "--wait=true", "--timeout=60s", check=False)


def test_queue_wait_estimate_and_release_on_exit_duration(
    management: LocalCluster,
    gpr_cluster: LocalCluster,
    namespace: str,
    operator_process: ManagedProcess,
    cleanup: list[tuple[str, ...]],
) -> None:
    _colony(management, gpr_cluster, namespace)
    cleanup += [("gpr", "--all", "-n", namespace)]
    _apply(management, namespace, _gpr("first", "H100", 1, 8, exitDuration="12s"))
    first = eventually(lambda: _phase(management, namespace, "first", "Ready"), 30)
    assert (
        first["colony"] == f"{namespace}/pool" and first["gpusAllocated"] == 8 and first["gpuType"] == "H100"
    )
    assert sum(_reserved(gpr_cluster, namespace, "first").values()) == 8

    submitted = time.monotonic()
    _apply(management, namespace, _gpr("second", "H100", 1, 8, exitDuration="1m"))
    queued = eventually(
        lambda: (s := _status(management, namespace, "second")).get("estimatedWaitSeconds") is not None and s,
        15,
    )
    estimate = queued["estimatedWaitSeconds"] + (time.monotonic() - submitted)
    assert queued["phase"] == "Queued" and queued["positionInQueue"] == 1

    eventually(lambda: _phase(management, namespace, "second", "Ready"), 40)
    actual = time.monotonic() - submitted
    assert abs(estimate - actual) <= 0.2 * actual, (estimate, actual)
    expired = _status(management, namespace, "first")
    assert expired["phase"] == "Expired" and expired["releasedAt"]
    assert expired["gpuHours"] == pytest.approx(8 * 12 / 3600, abs=0.01)  # 8 GPUs for exitDuration 12s
    metrics = (
        urllib.request.urlopen(f"http://127.0.0.1:{session_metrics_port()}/metrics", timeout=5)
        .read()
        .decode()
    )
    assert (
        f'colony_job_gpu_hours{{job="first",kind="GPUProvisioningRequest",namespace="{namespace}"}}'
        in metrics
    )
    assert _reserved(gpr_cluster, namespace, "first") == {}
    row = management.kubectl("get", "gpr", "-n", namespace, "--no-headers").stdout
    assert "Expired" in row and "Ready" in row


def test_high_priority_preempts_an_evictable_request_which_is_requeued_and_runs_later(
    management: LocalCluster,
    gpr_cluster: LocalCluster,
    namespace: str,
    operator_process: ManagedProcess,
    cleanup: list[tuple[str, ...]],
) -> None:
    _colony(management, gpr_cluster, namespace)
    cleanup += [("gpr", "--all", "-n", namespace)]
    _apply(management, namespace, _gpr("low", "A100-80GB", 2, 8, priority=50, enableEviction=True))
    eventually(lambda: _phase(management, namespace, "low", "Ready"), 30)
    _apply(management, namespace, _gpr("high", "A100-80GB", 2, 8, priority=250))

    eventually(lambda: _phase(management, namespace, "high", "Ready"), 40)
    low = _status(management, namespace, "low")
    assert low["phase"] == "Queued" and low["evictedBy"] == f"{namespace}/high" and low["retryCount"] == 1
    assert _reserved(gpr_cluster, namespace, "low") == {}
    events = management.kubectl("get", "events", "-n", namespace).stdout
    assert "GPREvicted" in events

    management.kubectl("delete", "gpr", "high", "-n", namespace, "--wait=true", "--timeout=60s")
    eventually(lambda: _phase(management, namespace, "low", "Ready"), 40)
    assert sum(_reserved(gpr_cluster, namespace, "low").values()) == 16


def test_non_evictable_requests_are_never_preempted(
    management: LocalCluster,
    gpr_cluster: LocalCluster,
    namespace: str,
    operator_process: ManagedProcess,
    cleanup: list[tuple[str, ...]],
) -> None:
    _colony(management, gpr_cluster, namespace)
    cleanup += [("gpr", "--all", "-n", namespace)]
    _apply(management, namespace, _gpr("pinned", "H100", 1, 8, priority=10))
    eventually(lambda: _phase(management, namespace, "pinned", "Ready"), 30)
    _apply(management, namespace, _gpr("urgent", "H100", 1, 8, priority=300))
    eventually(lambda: _status(management, namespace, "urgent").get("positionInQueue") == 1, 20)
    time.sleep(3)
    assert _status(management, namespace, "pinned")["phase"] == "Ready"
    assert _status(management, namespace, "urgent")["phase"] == "Queued"


def test_quota_borrowing_and_reclaim_between_two_teams(
    management: LocalCluster,
    gpr_cluster: LocalCluster,
    namespace: str,
    operator_process: ManagedProcess,
    cleanup: list[tuple[str, ...]],
) -> None:
    team_b = f"t-{uuid.uuid4().hex[:8]}"
    management.kubectl("create", "namespace", team_b)
    suffix = namespace[2:]
    queues = [
        {
            "apiVersion": "infra.exalsius.ai/v1",
            "kind": "GPUQueue",
            "metadata": {"name": f"{team}-{suffix}"},
            "spec": {
                "namespaces": [team_namespace],
                "cohort": f"cohort-{suffix}",
                "quotas": [{"gpuType": "A100-80GB", "nominal": 8}],
            },
        }
        for team, team_namespace in (("team-a", namespace), ("team-b", team_b))
    ]
    management.apply(queues)
    cleanup += [("gpr", "--all", "-n", namespace), ("gpr", "--all", "-n", team_b)]
    cleanup += [("gpuqueue", q["metadata"]["name"]) for q in queues]
    share = f"pool-{namespace}"
    cleanup += [("colonyshare", share), ("colony", "pool", "-n", namespace)]
    _colony(management, gpr_cluster, namespace)
    # The admin shares team A's colony with team B (test_colony_share: a label would not).
    management.apply(
        [
            {
                "apiVersion": "infra.exalsius.ai/v1",
                "kind": "ColonyShare",
                "metadata": {"name": share},
                "spec": {"colony": {"namespace": namespace, "name": "pool"}, "namespaces": [team_b]},
            }
        ]
    )

    # Team A uses its 8 and borrows team B's idle 8.
    _apply(management, namespace, _gpr("a-big", "A100-80GB", 2, 8, enableEviction=True))
    borrowed = eventually(lambda: _phase(management, namespace, "a-big", "Ready"), 30)
    assert borrowed["borrowed"] is True and borrowed["queue"] == f"team-a-{suffix}"
    # Beyond the cohort's quota nothing more is admitted, even with free H100s... of the wrong type.
    _apply(management, namespace, _gpr("a-more", "A100-80GB", 1, 8))
    eventually(lambda: _status(management, namespace, "a-more").get("positionInQueue") == 1, 20)

    # Team B asks for its nominal quota: the borrower is preempted to give it back.
    _apply(management, team_b, _gpr("b-own", "A100-80GB", 1, 8))
    eventually(lambda: _phase(management, team_b, "b-own", "Ready"), 40)
    evicted = _status(management, namespace, "a-big")
    assert evicted["phase"] == "Queued" and evicted["evictedBy"] == f"{team_b}/b-own"
    # Team A still gets its own nominal 8.
    eventually(lambda: _ready(management, namespace, "a-more"), 40)

    def team_a_usage() -> bool:
        usage = management.get_json("gpuqueue", f"team-a-{suffix}").get("status") or {}
        return usage.get("admitted") == 1 and usage.get("usage") == [
            {"gpuType": "A100-80GB", "used": 8, "borrowed": 0}
        ]

    eventually(team_a_usage, 15)  # queue status follows one pass later


def test_a_shortest_first_queue_admits_the_shorter_request_before_an_earlier_longer_one(
    management: LocalCluster,
    gpr_cluster: LocalCluster,
    namespace: str,
    operator_process: ManagedProcess,
    cleanup: list[tuple[str, ...]],
) -> None:
    queue = {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "GPUQueue",
        "metadata": {"name": f"sjf-{namespace[2:]}"},
        "spec": {
            "namespaces": [namespace],
            "quotas": [{"gpuType": "*", "nominal": 64}],
            "queueingStrategy": "ShortestFirst",
        },
    }
    management.apply([queue])
    cleanup += [("gpr", "--all", "-n", namespace), ("gpuqueue", queue["metadata"]["name"])]
    row = management.kubectl("get", "gpuqueue", queue["metadata"]["name"], "--no-headers").stdout
    assert "ShortestFirst" in row
    _colony(management, gpr_cluster, namespace)
    _apply(management, namespace, _gpr("blocker", "H100", 1, 8, exitDuration="15s"))
    eventually(lambda: _phase(management, namespace, "blocker", "Ready"), 30)
    _apply(management, namespace, _gpr("long", "H100", 1, 8, exitDuration="10m"))
    eventually(lambda: _status(management, namespace, "long").get("positionInQueue") == 1, 20)
    _apply(management, namespace, _gpr("short", "H100", 1, 8, exitDuration="1m"))
    # submitted later, but 8 GPU-minutes against 80: first in the queue, and admitted first
    eventually(lambda: _status(management, namespace, "short").get("positionInQueue") == 1, 20)
    assert _status(management, namespace, "long").get("positionInQueue") == 2
    eventually(lambda: _phase(management, namespace, "short", "Ready"), 60)
    assert _status(management, namespace, "long")["phase"] == "Queued"
    # the operator's queue policy (COLONY_QUEUE_POLICY, "default" here) shows beside the strategy
    name = queue["metadata"]["name"]
    policy = lambda: management.kubectl("get", "gpuqueue", name, "-o", "jsonpath={.status.policy}").stdout  # noqa: E731
    eventually(lambda: policy() == "default", 20)
    header, row = management.kubectl("get", "gpuqueue", name).stdout.splitlines()[:2]
    assert header.split()[:4] == ["NAME", "COHORT", "POLICY", "STRATEGY"]
    assert "default" in row.split() and "ShortestFirst" in row.split()


def test_idle_reserved_gpus_are_released_and_used_ones_are_kept(
    management: LocalCluster,
    gpr_cluster: LocalCluster,
    namespace: str,
    operator_process: ManagedProcess,
    cleanup: list[tuple[str, ...]],
) -> None:
    _colony(management, gpr_cluster, namespace)
    cleanup += [("gpr", "--all", "-n", namespace)]
    _apply(management, namespace, _gpr("idle", "A100-80GB", 1, 4, idleTimeOutDuration="3s"))
    _apply(management, namespace, _gpr("busy", "A100-80GB", 1, 4, idleTimeOutDuration="3s"))
    busy = eventually(lambda: _phase(management, namespace, "busy", "Ready"), 30)
    gpr_cluster.kubectl("create", "namespace", namespace)
    gpr_cluster.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "trainer", "namespace": namespace},
                "spec": {
                    "nodeSelector": {busy["reservationLabel"]: str(busy["nodes"][0]["gpus"])},
                    "containers": [
                        {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}
                    ],
                },
            }
        ]
    )
    released = eventually(lambda: _phase(management, namespace, "idle", "Released"), 30)
    assert "idleTimeOutDuration 3s" in released["message"]
    time.sleep(2)
    assert _status(management, namespace, "busy")["phase"] == "Ready"
    gpr_cluster.kubectl("delete", "namespace", namespace, "--wait=false")


def test_auto_provisioning_creates_the_cheapest_aws_colony_and_tears_it_down(
    management: LocalCluster,
    capi: CapiHarness,
    namespace: str,
    operator_process: ManagedProcess,
    cleanup: list[tuple[str, ...]],
) -> None:
    cleanup += [("gpr", "--all", "-n", namespace)]
    # One GPU: AWS sells A100-80GB only as p4de.24xlarge (8 per node), so that is still the offer, and the
    # session colony cluster the harness hands out (shared with other tests' pods) surely has one free.
    _apply(management, namespace, _gpr("burst", "A100-80GB", 1, 1, autoProvision=True, exitDuration="8s"))
    provisioning = eventually(lambda: _phase(management, namespace, "burst", "Provisioning"), 30)
    name = provisioning["provisionedColony"]
    colony = management.get_json("colony", name, "-n", namespace)
    assert colony["metadata"]["labels"]["colony.exalsius.ai/ephemeral"] == "true"
    (cluster,) = colony["spec"]["colonyClusters"]
    # The cheapest AWS offer with an A100-80GB in the shipped catalog.
    assert cluster["aws"]["instanceType"] == "p4de.24xlarge"
    assert "p4de.24xlarge" in colony["metadata"]["annotations"]["colony.exalsius.ai/offer"]

    ready = eventually(lambda: _phase(management, namespace, "burst", "Ready"), 60)
    assert ready["colony"] == f"{namespace}/{name}"
    eventually(lambda: _phase(management, namespace, "burst", "Expired"), 30)

    def torn_down() -> bool:
        found = management.kubectl("get", "colony", name, "-n", namespace, "-o", "json", check=False)
        return found.returncode != 0 or '"deletionTimestamp"' in found.stdout

    eventually(torn_down, 30)
    events = management.kubectl("get", "events", "-n", namespace).stdout
    assert "ColonyProvisioning" in events and "ColonyTornDown" in events
