"""DDPJob controller on a Ready colony (an existing cluster with kwok GPU nodes, real scheduler)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from colony.devenv.capi_harness import CapiHarness
from colony.devenv.cluster import LocalCluster
from colony.devenv.kwok import EXIT_CODE_ANNOTATION, OUTCOME_ANNOTATION
from colony.devenv.process import ManagedProcess
from colony.labels import JOB_LABEL
from colony.render.offer_colony import ephemeral_colony_name
from tests.integration.conftest import EXAMPLES, eventually, start_operator
from tests.integration.test_colony_controller import _apply, _existing_colony, _kubeconfig_secret, _phase_is


def _ready_colony(management: LocalCluster, colony_cluster: LocalCluster, namespace: str) -> None:
    _kubeconfig_secret(management, namespace, "gpu-kubeconfig", colony_cluster.kubeconfig())
    colony = _existing_colony("test-colony", "gpu-kubeconfig")
    _apply(management, namespace, colony)
    eventually(lambda: _phase_is(management, namespace, "test-colony", "Ready"), 30)


def _job(**changes: Any) -> dict[str, Any]:
    """The seed DDPJob (gang-scheduled by Volcano), with `changes` to its spec."""
    job: dict[str, Any] = yaml.safe_load((EXAMPLES / "ddpjob.yaml").read_text())
    job["spec"] |= changes
    return job


def _status(management: LocalCluster, namespace: str, name: str = "test-ddp-job") -> dict[str, Any]:
    status: dict[str, Any] = management.get_json("ddpjob", name, "-n", namespace).get("status") or {}
    return status


def _pods(cluster: LocalCluster, namespace: str, attempt: int) -> list[dict[str, Any]]:
    selector = f"training.exalsius.ai/job-name=test-ddp-job,training.exalsius.ai/attempt={attempt}"
    pods: list[dict[str, Any]] = cluster.get_json("pods", "-n", namespace, "-l", selector)["items"]
    return pods


def _finish(cluster: LocalCluster, namespace: str, pod: str, outcome: str, exit_code: int = 0) -> None:
    cluster.kubectl(
        "annotate",
        "pod",
        pod,
        "-n",
        namespace,
        f"{OUTCOME_ANNOTATION}={outcome}",
        f"{EXIT_CODE_ANNOTATION}={exit_code}",
        "--overwrite",
    )


def test_seed_job_runs_on_the_colony_and_succeeds(
    management: LocalCluster, colony_cluster: LocalCluster, namespace: str, operator_process: ManagedProcess
) -> None:
    _ready_colony(management, colony_cluster, namespace)
    _apply(management, namespace, _job())

    eventually(lambda: _status(management, namespace).get("phase") == "Running", 40)
    pods = _pods(colony_cluster, namespace, 0)
    assert len(pods) == 2
    group = colony_cluster.get_json("podgroup", "test-ddp-job-a0", "-n", namespace)
    assert group["spec"]["minMember"] == 2
    assert all(p["spec"]["schedulerName"] == "volcano" and p["spec"]["nodeName"] for p in pods)
    for rank, pod in enumerate(sorted(pods, key=lambda p: p["metadata"]["name"])):
        command = pod["spec"]["containers"][0]["command"]
        assert command[:4] == ["torchrun", "--nnodes=2", "--nproc-per-node=1", f"--node-rank={rank}"]
        assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
        env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
        assert env["WANDB_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "test-ddp-job-wandb"
    # The plain W&B key left the spec for a Secret, in both clusters.
    spec = management.get_json("ddpjob", "test-ddp-job", "-n", namespace)["spec"]
    assert "wandbApiKey" not in spec and spec["wandbApiKeySecretRef"]["name"] == "test-ddp-job-wandb"
    colony_cluster.get_json("secret", "test-ddp-job-wandb", "-n", namespace)
    status = _status(management, namespace)
    assert (status["cluster"], status["colony"], status["workersReady"]) == ("onprem", "test-colony", 2)

    for pod in pods:
        _finish(colony_cluster, namespace, pod["metadata"]["name"], "Succeeded")
    eventually(lambda: _status(management, namespace).get("phase") == "Succeeded", 30)
    assert _status(management, namespace)["completionTime"]
    row = management.kubectl("get", "ddpjobs", "-n", namespace, "--no-headers").stdout.split()
    assert row[4] == "Succeeded"

    management.kubectl("delete", "ddpjob", "test-ddp-job", "-n", namespace, "--wait=true", "--timeout=60s")
    assert _pods(colony_cluster, namespace, 0) == []
    # The copied W&B Secret goes with the job (deleted by name: the operator lists no Secrets).
    gone = colony_cluster.kubectl("get", "secret", "test-ddp-job-wandb", "-n", namespace, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr


def test_worker_failure_restarts_the_gang_then_fails(
    management: LocalCluster, colony_cluster: LocalCluster, namespace: str, operator_process: ManagedProcess
) -> None:
    _ready_colony(management, colony_cluster, namespace)
    _apply(management, namespace, _job(backoffLimit=1))
    eventually(lambda: _status(management, namespace).get("phase") == "Running", 40)
    first = sorted(p["metadata"]["name"] for p in _pods(colony_cluster, namespace, 0))
    _finish(colony_cluster, namespace, first[1], "Failed", 3)

    eventually(lambda: _status(management, namespace).get("attempt") == 1, 30)
    status = _status(management, namespace)
    assert status["restarts"] == 1
    assert _pods(colony_cluster, namespace, 0) == [] or all(
        p["metadata"].get("deletionTimestamp") for p in _pods(colony_cluster, namespace, 0)
    )
    eventually(lambda: _status(management, namespace).get("phase") == "Running", 40)
    second = sorted(p["metadata"]["name"] for p in _pods(colony_cluster, namespace, 1))
    assert len(second) == 2 and not set(second) & set(first)

    _finish(colony_cluster, namespace, second[0], "Failed", 7)
    eventually(lambda: _status(management, namespace).get("phase") == "Failed", 30)
    message = _status(management, namespace)["message"]
    assert second[0] in message and "exit code 7" in message and "backoffLimit 1" in message
    events = management.kubectl("get", "events", "-n", namespace).stdout
    assert "GangRestarted" in events


def test_job_that_does_not_fit_waits_with_a_reason_and_no_pods(
    management: LocalCluster, colony_cluster: LocalCluster, namespace: str, operator_process: ManagedProcess
) -> None:
    _ready_colony(management, colony_cluster, namespace)
    _apply(management, namespace, _job(parallelism=4, nprocPerNode=8))
    eventually(lambda: "needs 32 GPU(s)" in (_status(management, namespace).get("message") or ""), 30)
    assert _status(management, namespace)["phase"] == "Pending"
    assert colony_cluster.kubectl("get", "pods", "-n", namespace, "-o", "name", check=False).stdout == ""


def test_seed_job_with_gpu_types_provisions_runs_and_tears_down(
    management: LocalCluster,
    colony_cluster: LocalCluster,
    capi: CapiHarness,
    namespace: str,
    operator_process: ManagedProcess,
) -> None:
    job = _job(gpuTypes=["A100-80GB"])
    del job["spec"]["targetColony"]
    management.kubectl("apply", "-n", namespace, "-f", "-", input_text=json.dumps(job))
    eventually(lambda: "waiting for GPU request" in (_status(management, namespace).get("message") or ""), 20)
    request = management.get_json("gpr", "test-ddp-job-gpus", "-n", namespace)
    assert request["spec"]["numberOfGPUNodes"] == 2 and request["spec"]["numberOfGPUs"] == 1

    eventually(lambda: _status(management, namespace).get("phase") == "Running", 90)
    status = _status(management, namespace)
    colony = status["colony"]
    # the ephemeral colony is named from its request's uid (issue 17.4: never two requests' alike)
    assert colony == ephemeral_colony_name(request["metadata"]["uid"])
    assert status["gpuRequest"] == "test-ddp-job-gpus"
    provisioned = management.get_json("colony", colony, "-n", namespace)
    assert provisioned["spec"]["colonyClusters"][0]["aws"]["instanceType"] == "p4de.24xlarge"
    pods = _pods(colony_cluster, namespace, 0)
    assert {p["spec"]["nodeSelector"][status["reservationLabel"]] for p in pods} == {"1"}
    assert len({p["spec"]["nodeName"] for p in pods}) == 2  # one reserved node per worker

    for pod in pods:
        _finish(colony_cluster, namespace, pod["metadata"]["name"], "Succeeded")
    eventually(lambda: _status(management, namespace).get("phase") == "Succeeded", 30)

    def torn_down() -> bool:
        found = management.kubectl("get", "colony", colony, "-n", namespace, "-o", "json", check=False)
        return found.returncode != 0 or '"deletionTimestamp"' in found.stdout

    eventually(torn_down, 30)
    gone = ("get", "gpr", "test-ddp-job-gpus", "-n", namespace)
    eventually(lambda: management.kubectl(*gone, check=False).returncode != 0, 30)  # released and deleted


def test_ephemeral_colony_is_torn_down_after_its_last_job(
    management: LocalCluster, colony_cluster: LocalCluster, namespace: str, operator_process: ManagedProcess
) -> None:
    _ready_colony(management, colony_cluster, namespace)
    management.kubectl("label", "colony", "test-colony", "-n", namespace, "colony.exalsius.ai/ephemeral=true")
    _apply(management, namespace, _job(parallelism=1))
    second = _job(parallelism=1)
    second["metadata"]["name"] = "second"
    _apply(management, namespace, second)
    eventually(lambda: _status(management, namespace).get("phase") == "Running", 40)
    eventually(lambda: _status(management, namespace, "second").get("phase") == "Running", 40)

    (pod,) = _pods(colony_cluster, namespace, 0)
    _finish(colony_cluster, namespace, pod["metadata"]["name"], "Succeeded")
    eventually(lambda: _status(management, namespace).get("phase") == "Succeeded", 30)
    assert "teardownRequestedAt" not in _status(management, namespace)  # "second" still runs
    assert management.kubectl("get", "colony", "test-colony", "-n", namespace, check=False).returncode == 0

    selector = "training.exalsius.ai/job-name=second"
    (other,) = colony_cluster.get_json("pods", "-n", namespace, "-l", selector)["items"]
    _finish(colony_cluster, namespace, other["metadata"]["name"], "Succeeded")
    eventually(lambda: _status(management, namespace, "second").get("teardownRequestedAt"), 30)
    eventually(
        lambda: (
            management.kubectl("get", "colony", "test-colony", "-n", namespace, check=False).returncode != 0
        ),
        30,
    )


def test_active_deadline_fails_the_job_and_removes_its_workers(
    management: LocalCluster, colony_cluster: LocalCluster, namespace: str, operator_process: ManagedProcess
) -> None:
    _ready_colony(management, colony_cluster, namespace)
    _apply(management, namespace, _job(activeDeadlineSeconds=4))
    eventually(lambda: _status(management, namespace).get("phase") == "Failed", 40)
    assert "activeDeadlineSeconds 4 exceeded" in _status(management, namespace)["message"]
    eventually(
        lambda: all(p["metadata"].get("deletionTimestamp") for p in _pods(colony_cluster, namespace, 0)), 20
    )


def test_deleting_a_job_on_an_unreachable_cluster_retries_then_gives_up_with_events(
    management: LocalCluster, colony_cluster: LocalCluster, namespace: str, operator_process: ManagedProcess
) -> None:
    _ready_colony(management, colony_cluster, namespace)
    _apply(management, namespace, _job())
    eventually(lambda: _status(management, namespace).get("phase") == "Running", 40)
    management.kubectl(
        "delete", "secret", "gpu-kubeconfig", "-n", namespace
    )  # the cluster becomes unreachable
    management.kubectl("delete", "ddpjob", "test-ddp-job", "-n", namespace, "--wait=false")
    eventually(
        lambda: (
            management.kubectl("get", "ddpjob", "test-ddp-job", "-n", namespace, check=False).returncode != 0
        ),
        40,
    )
    events = management.kubectl("get", "events", "-n", namespace).stdout
    assert "ClusterUnreachable" in events and "CleanupAbandoned" in events


def test_deleting_a_job_whose_cluster_forbids_cleanup_ends_and_names_what_was_left(
    management: LocalCluster, colony_cluster: LocalCluster, namespace: str, operator_process: ManagedProcess
) -> None:
    """A 403 from the colony is retried a bounded number of times like an unreachable cluster, then
    the finalizer goes and a CleanupAbandoned Event lists what is left (issue 17, point 6)."""
    _ready_colony(management, colony_cluster, namespace)
    _apply(management, namespace, _job())
    eventually(lambda: _status(management, namespace).get("phase") == "Running", 40)
    account = f"nobody-{namespace}"
    colony_cluster.kubectl("create", "serviceaccount", account, "-n", "default")
    token = colony_cluster.kubectl("create", "token", account, "-n", "default").stdout.strip()
    forbidden: dict[str, Any] = yaml.safe_load(colony_cluster.kubeconfig())
    forbidden["users"][0]["user"] = {"token": token}  # authenticated, but granted nothing
    _kubeconfig_secret(management, namespace, "gpu-kubeconfig", yaml.safe_dump(forbidden))
    management.kubectl("delete", "ddpjob", "test-ddp-job", "-n", namespace, "--wait=false")
    eventually(
        lambda: (
            management.kubectl("get", "ddpjob", "test-ddp-job", "-n", namespace, check=False).returncode != 0
        ),
        60,
    )
    events = management.kubectl("get", "events", "-n", namespace).stdout
    assert "CleanupFailed" in events and "CleanupAbandoned" in events
    assert "forbidden" in events.lower()
    # the workers are still there (nobody could delete them): clean up for the next tests
    selector = f"{JOB_LABEL}=test-ddp-job"
    colony_cluster.kubectl("delete", "pods", "-n", namespace, "-l", selector, "--wait=false", check=False)


def _job_pods(cluster: LocalCluster, namespace: str, job: str) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = cluster.get_json("pods", "-n", namespace, "-l", f"{JOB_LABEL}={job}")[
        "items"
    ]
    return pods


@pytest.fixture
def json_logging_operator(management: LocalCluster, tmp_path: Path) -> Iterator[tuple[str, ManagedProcess]]:
    """An operator of this test's own (JSON logs: every line of a handler names its object) and the
    fresh `k-` namespace it alone watches."""
    namespace = f"k-{uuid.uuid4().hex[:8]}"
    management.kubectl("create", "namespace", namespace)
    process = start_operator(management, tmp_path / "operator.log", namespace, extra_args=["--json-logs"])
    try:
        yield namespace, process
    finally:
        management.kubectl(
            "delete", "ddpjob", "--all", "-n", namespace, "--wait=true", "--timeout=60s", check=False
        )
        process.stop()


def _object_lines(log: Path, offset: int, name: str) -> list[str]:
    """The operator's log lines since `offset` about the object `name` (JSON logs)."""
    lines = [json.loads(line) for line in _log_since(log, offset) if line.startswith("{")]
    return [line["message"] for line in lines if (line.get("object") or {}).get("name") == name]


def test_a_finished_job_costs_no_timer_ticks_and_a_ttl_costs_one_wait(
    management: LocalCluster, colony_cluster: LocalCluster, json_logging_operator: tuple[str, ManagedProcess]
) -> None:
    """Once a job finished and its follow-up is done (status.settledAt), its tracking daemon returns
    (one "Daemon 'track_ddpjob' succeeded." line) and nothing more runs or is logged for it (a kopf
    timer once logged a line every 0.5 s for ever). A job with ttlSecondsAfterFinished waits for it
    in the same daemon and is deleted on time."""
    namespace, operator = json_logging_operator
    _ready_colony(management, colony_cluster, namespace)
    kept, expiring = _job(), _job(ttlSecondsAfterFinished=6)
    expiring["metadata"]["name"] = "expiring-job"
    _apply(management, namespace, kept)
    _apply(management, namespace, expiring)
    for name in ("test-ddp-job", "expiring-job"):
        eventually(lambda name=name: _status(management, namespace, name).get("phase") == "Running", 40)
        for pod in _job_pods(colony_cluster, namespace, name):
            _finish(colony_cluster, namespace, pod["metadata"]["name"], "Succeeded")
    settled = eventually(lambda: _status(management, namespace).get("settledAt"), 30)
    assert _status(management, namespace)["phase"] == "Succeeded" and settled
    eventually(lambda: _status(management, namespace, "expiring-job").get("settledAt"), 30)
    finished = _status(management, namespace, "expiring-job")["completionTime"]
    log = operator.log_path
    done = "Daemon 'track_ddpjob' succeeded."
    eventually(lambda: done in _object_lines(log, 0, "test-ddp-job"), 10)  # tracked, then returned

    time.sleep(1)  # a tick in flight when settledAt was written
    start = log.stat().st_size
    time.sleep(5)
    ticks = _object_lines(log, start, "test-ddp-job")
    assert ticks == [], ticks  # a timer logged 10 lines of "Timer 'track_ddpjob' succeeded." in 5 s
    assert _status(management, namespace)["phase"] == "Succeeded"  # and it still exists, untouched

    gone = management.kubectl  # the expiring job is deleted by its TTL, by its daemon
    eventually(lambda: gone("get", "ddpjob", "expiring-job", "-n", namespace, check=False).returncode, 20)
    finished_at = datetime.strptime(finished, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert 6 <= time.time() - finished_at.timestamp() < 6 + 10
    lines = _object_lines(log, start, "expiring-job")
    assert not [m for m in lines if "Timer" in m or "tracking step failed" in m], lines
    assert lines.count(done) <= 1, lines  # one wait for the TTL, not a step every 0.5 s


def _log_since(log: Path, offset: int) -> list[str]:
    with log.open("rb") as stream:
        stream.seek(offset)
        return stream.read().decode(errors="replace").splitlines()
