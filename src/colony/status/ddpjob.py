"""Pure: the pods of a DDPJob -> where the job stands and what to do next.

A job is Succeeded when every worker exited 0; any failed, evicted or lost worker fails the attempt,
which restarts the whole gang (a new attempt) until backoffLimit restarts are used up, then the
job is Failed naming the pod and its exit code.

The decision reads the attempt from the pods themselves (label), not only from status, so an
operator killed anywhere between creating pods and writing status converges on restart:
- pods of a newer attempt than status says: that attempt is current (its launch happened);
- pods of older attempts: stale, deleted;
- an attempt with missing pods and none started yet: its launch was interrupted, launch again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from colony.labels import ATTEMPT_LABEL

TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class JobProgress:
    """The job's state for one observation of its pods, and the actions it calls for."""

    phase: str
    """Scheduling, Running, Succeeded, Failed or Restarting."""
    attempt: int
    workers_ready: int
    message: str
    restart: bool = False
    """The attempt failed: start attempt + 1, then delete this attempt's pods."""
    relaunch: bool = False
    """The attempt's launch was interrupted: create its missing pods (same names)."""
    stale_pods: tuple[str, ...] = field(default_factory=tuple)
    """Pods of older attempts, to delete."""


def _attempt(pod: Mapping[str, Any]) -> int:
    try:
        return int((pod["metadata"].get("labels") or {}).get(ATTEMPT_LABEL, "0"))
    except ValueError:
        return 0


def _phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _exit(pod: Mapping[str, Any]) -> tuple[int | None, str]:
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated")
        if terminated and terminated.get("exitCode", 0) != 0:
            return int(terminated["exitCode"]), str(terminated.get("reason") or "Error")
    if pod["metadata"].get("deletionTimestamp"):
        return None, "deleted or evicted"
    return None, str((pod.get("status") or {}).get("reason") or "Failed")


def _unschedulable(pods: Sequence[Mapping[str, Any]]) -> str:
    for pod in pods:
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                return f": {condition.get('reason')}: {condition.get('message', '')}".rstrip(": ")
    return ""


def job_progress(
    all_pods: Sequence[Mapping[str, Any]], workers: int, status_attempt: int, backoff_limit: int
) -> JobProgress:
    """Decide from every pod of the job (all attempts); `workers` pods make one attempt.

    Restarts used so far equal the attempt number (attempt 0 is the first run).
    """
    attempt = max([status_attempt, *(_attempt(p) for p in all_pods)])
    stale = tuple(p["metadata"]["name"] for p in all_pods if _attempt(p) < attempt)
    pods = [p for p in all_pods if _attempt(p) == attempt]
    phases = [_phase(p) for p in pods]
    running = phases.count("Running")
    started = any(ph != "Pending" for ph in phases)

    def progress(phase: str, message: str, **actions: Any) -> JobProgress:
        return JobProgress(phase, attempt, running, message, stale_pods=stale, **actions)

    failed = [p for p in pods if _phase(p) == "Failed" or p["metadata"].get("deletionTimestamp")]
    if not failed and len(pods) < workers and started:
        lost = workers - len(pods)
        failed_message = f"{lost} worker(s) of attempt {attempt} disappeared (node lost or pod deleted)"
        if attempt < backoff_limit:
            return progress(
                "Restarting",
                f"{failed_message}; restarting the gang ({attempt + 1}/{backoff_limit})",
                restart=True,
            )
        return progress("Failed", f"{failed_message}; backoffLimit {backoff_limit} reached")
    if failed:
        pod = failed[0]
        code, reason = _exit(pod)
        what = f"worker {pod['metadata']['name']} failed ({reason}" + (
            f", exit code {code})" if code is not None else ")"
        )
        if attempt < backoff_limit:
            return progress(
                "Restarting", f"{what}; restarting the gang ({attempt + 1}/{backoff_limit})", restart=True
            )
        return progress("Failed", f"{what}; backoffLimit {backoff_limit} reached")
    if len(pods) < workers:
        return progress("Scheduling", f"creating {workers - len(pods)} missing worker(s)", relaunch=True)
    if phases.count("Succeeded") == workers:
        return progress("Succeeded", f"all {workers} worker(s) exited 0")
    if running + phases.count("Succeeded") == workers:
        return progress("Running", f"{running}/{workers} worker(s) running")
    return progress("Scheduling", f"waiting for {workers - running} worker(s) to start{_unschedulable(pods)}")
