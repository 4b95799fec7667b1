"""Pure DDPJob decisions: job progress from pods, placement, ephemeral teardown and TTL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from colony.labels import EPHEMERAL_LABEL
from colony.scheduling.capacity import choose_cluster
from colony.scheduling.teardown import GRACE_ANNOTATION, expired, teardown_due
from colony.status.ddpjob import job_progress


def _pod(
    name: str, phase: str, exit_code: int | None = None, unschedulable: str = "", attempt: int = 0
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if exit_code is not None:
        status["containerStatuses"] = [{"state": {"terminated": {"exitCode": exit_code, "reason": "Error"}}}]
    if unschedulable:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": unschedulable}
        ]
    labels = {"training.exalsius.ai/attempt": str(attempt)}
    return {"metadata": {"name": name, "labels": labels}, "status": status}


def test_progress_phases() -> None:
    launching = job_progress([], 2, 0, 3)
    assert (launching.phase, launching.relaunch) == ("Scheduling", True)
    waiting = job_progress([_pod("a", "Pending", unschedulable="0/3 nodes"), _pod("b", "Pending")], 2, 0, 3)
    assert waiting.phase == "Scheduling" and "Unschedulable: 0/3 nodes" in waiting.message
    assert not waiting.relaunch
    running = job_progress([_pod("a", "Running"), _pod("b", "Running")], 2, 0, 3)
    assert (running.phase, running.workers_ready) == ("Running", 2)
    assert job_progress([_pod("a", "Succeeded"), _pod("b", "Running")], 2, 0, 3).phase == "Running"
    assert job_progress([_pod("a", "Succeeded"), _pod("b", "Succeeded")], 2, 0, 3).phase == "Succeeded"


def test_failure_restarts_until_backoff_limit_then_fails_naming_pod_and_exit_code() -> None:
    pods = [_pod("w-0", "Running", attempt=1), _pod("w-1", "Failed", exit_code=3, attempt=1)]
    restart = job_progress(pods, 2, 1, 2)
    assert restart.restart and restart.phase == "Restarting" and "(2/2)" in restart.message
    final = job_progress([_pod("w-0", "Running", attempt=2), _pod("w-1", "Failed", 3, attempt=2)], 2, 2, 2)
    assert not final.restart and final.phase == "Failed"
    assert "w-1" in final.message and "exit code 3" in final.message


def test_deleted_or_lost_worker_counts_as_a_failure() -> None:
    evicted = {
        "metadata": {"name": "w-0", "deletionTimestamp": "now", "labels": {}},
        "status": {"phase": "Running"},
    }
    assert job_progress([evicted, _pod("w-1", "Running")], 2, 0, 1).restart
    lost = job_progress([_pod("w-1", "Running")], 2, 0, 1)
    assert lost.restart and "disappeared" in lost.message


def test_converges_after_a_crash_between_pods_and_status() -> None:
    """Pods of a newer attempt than status says are current; older ones are stale."""
    pods = [
        _pod("old", "Failed", 1, attempt=0),
        _pod("n-0", "Pending", attempt=1),
        _pod("n-1", "Pending", attempt=1),
    ]
    progress = job_progress(pods, 2, 0, 3)
    assert (progress.attempt, progress.stale_pods, progress.restart) == (1, ("old",), False)
    half_launched = job_progress([_pod("n-0", "Pending", attempt=1)], 2, 1, 3)
    assert half_launched.relaunch and not half_launched.restart


def _cluster(name: str, phase: str, allocatable: int) -> dict[str, Any]:
    return {
        "name": name,
        "phase": phase,
        "gpus": [{"product": "A100", "capacity": 8, "allocatable": allocatable}],
    }


def test_placement_picks_the_ready_cluster_with_most_free_gpus() -> None:
    clusters = [_cluster("a", "Ready", 8), _cluster("b", "Ready", 16), _cluster("c", "Provisioning", 64)]
    assert choose_cluster(clusters, {}, 8)[0] == "b"
    assert choose_cluster(clusters, {"b": 12}, 8)[0] == "a"
    name, why = choose_cluster(clusters, {"a": 8, "b": 12}, 8)
    assert name is None and "most free in one Ready cluster is 4" in why
    assert choose_cluster([_cluster("c", "Failed", 8)], {}, 1) == (None, "no cluster of the colony is Ready")
    assert choose_cluster(clusters, {}, 0)[0] == "b"  # CPU job


def test_teardown_only_for_ephemeral_idle_colonies_after_grace() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    ephemeral = {"labels": {EPHEMERAL_LABEL: "true"}, "annotations": {GRACE_ANNOTATION: "30"}}
    assert not teardown_due({"labels": {}}, 0, now, now)
    assert not teardown_due(ephemeral, 1, now - timedelta(hours=1), now)
    assert not teardown_due(ephemeral, 0, now - timedelta(seconds=10), now)
    assert teardown_due(ephemeral, 0, now - timedelta(seconds=30), now)
    assert teardown_due({"labels": {EPHEMERAL_LABEL: "true"}}, 0, now, now)
    assert not teardown_due({**ephemeral, "deletionTimestamp": "x"}, 0, now - timedelta(hours=1), now)


def test_ttl() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert not expired(now, None, now)
    assert not expired(now - timedelta(seconds=5), 10, now)
    assert expired(now - timedelta(seconds=10), 10, now)
