"""Pure: the pods of one attempt of a DDPJob -> where the job stands and what to do next.

A job is Succeeded when every worker exited 0; any failed worker fails the attempt, which restarts
the whole gang (a new attempt) until backoffLimit restarts are used up, then the job is Failed
naming the pod and its exit code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class JobProgress:
    """The job's state for one observation of its pods."""

    phase: str
    """Scheduling, Running, Succeeded, Failed or Restarting."""
    workers_ready: int
    message: str
    restart: bool = False
    """True when the attempt failed and a new attempt must start."""


def _exit(pod: Mapping[str, Any]) -> tuple[int | None, str]:
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated")
        if terminated and terminated.get("exitCode", 0) != 0:
            return int(terminated["exitCode"]), str(terminated.get("reason") or "Error")
    return None, str((pod.get("status") or {}).get("reason") or "Failed")


def job_progress(
    pods: Sequence[Mapping[str, Any]], workers: int, restarts: int, backoff_limit: int
) -> JobProgress:
    """Decide from the pods of the current attempt (`workers` expected)."""
    phases = [(p.get("status") or {}).get("phase", "Pending") for p in pods]
    running = phases.count("Running")
    failed = [
        p
        for p in pods
        if (p.get("status") or {}).get("phase") == "Failed" or p["metadata"].get("deletionTimestamp")
    ]
    if failed:
        pod = failed[0]
        code, reason = _exit(pod)
        what = f"worker {pod['metadata']['name']} failed ({reason}" + (
            f", exit code {code})" if code is not None else ")"
        )
        if restarts < backoff_limit:
            return JobProgress(
                "Restarting", running, f"{what}; restarting the gang ({restarts + 1}/{backoff_limit})", True
            )
        return JobProgress("Failed", running, f"{what}; backoffLimit {backoff_limit} reached")
    if len(pods) == workers and phases.count("Succeeded") == workers:
        return JobProgress("Succeeded", 0, f"all {workers} worker(s) exited 0")
    if len(pods) == workers and running + phases.count("Succeeded") == workers:
        return JobProgress("Running", running, f"{running}/{workers} worker(s) running")
    pending = [p for p in pods if (p.get("status") or {}).get("phase", "Pending") == "Pending"]
    reason = ""
    for pod in pending:
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                reason = f": {condition.get('reason')}: {condition.get('message', '')}".rstrip(": ")
                break
        if reason:
            break
    return JobProgress("Scheduling", running, f"waiting for {workers - running} worker(s) to start{reason}")
