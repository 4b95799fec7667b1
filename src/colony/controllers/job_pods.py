"""The worker pods of running DDPJobs, read from one watch per (cluster, namespace) instead of one
LIST per job per tracking tick (part of the OperatorContext).

With a LIST per tick, 200 jobs of 8 workers cost the colony's API server 400 LISTs a second while
they launch and run; a watch of the namespace's pods labelled as ours costs one stream, and each pod
change is parsed once. A reader trusts the watch only when it is current and has delivered the
newest write the operator made for that job (the resourceVersion of its launch): otherwise it
lists, as before, so a decision is never taken on pods that were created but not yet seen (a job
that looks short of workers would be restarted).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from colony import metrics
from colony.kube.informer import SelectedInformer
from colony.kube.resources import Kube
from colony.kube.timeouts import DEFAULT_TIMEOUTS, ApiTimeouts
from colony.labels import JOB_LABEL, MANAGED_BY, MANAGED_BY_LABEL

IDLE_S = 60.0
"""A watch nobody read for this long is stopped (its jobs finished or moved)."""
STALE_S = 10.0
"""A watch that has not been current for this long is replaced by one on the cluster's current
client (its credentials may have been rotated, its client closed)."""

WatchKey = tuple[str, str, str, str]
"""(colony namespace, colony, cluster, the jobs' namespace); colony "" is the management cluster."""

log = logging.getLogger(__name__)


def pod_view(pod: Mapping[str, Any]) -> dict[str, Any]:
    """What tracking reads of a pod (colony.status.ddpjob): name, labels, deletion, phase, reason,
    conditions and container exit states; not its spec (a few KB per pod, thousands of pods)."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    kept_meta = {
        key: meta[key]
        for key in ("name", "namespace", "labels", "resourceVersion", "deletionTimestamp")
        if key in meta
    }
    containers = [
        {"name": c.get("name"), "state": {"terminated": (c.get("state") or {}).get("terminated")}}
        for c in status.get("containerStatuses") or []
        if (c.get("state") or {}).get("terminated")
    ]
    kept_status: dict[str, Any] = {
        key: status[key] for key in ("phase", "reason", "conditions") if key in status
    }
    if containers:
        kept_status["containerStatuses"] = containers
    return {"metadata": kept_meta, "status": kept_status}


def covers(informer_current: bool, seen_version: int, written_version: int | None) -> bool:
    """Whether a watch's objects can be trusted for a job: it is current and has delivered the
    operator's newest write for the job (None: no write in this process, so the watch's first LIST,
    made after the process started, has every write)."""
    return informer_current and (written_version is None or seen_version >= written_version)


@dataclass
class _Watch:
    informer: SelectedInformer
    task: asyncio.Task[None]
    used_at: float
    started_at: float


@dataclass
class JobPods:
    """One pod watch per (cluster, namespace) where DDPJobs run, started on first read, stopped
    when unread for `idle_s`; plus the resourceVersion of each job's last launch."""

    idle_s: float = IDLE_S
    stale_s: float = STALE_S
    timeouts: ApiTimeouts = DEFAULT_TIMEOUTS
    _watches: dict[WatchKey, _Watch] = field(default_factory=dict)
    _written: dict[str, int] = field(default_factory=dict)

    def wrote(self, job_uid: str, version: int | None) -> None:
        """The operator wrote a job's objects (a launch); `version`: the newest write's version."""
        if version is not None:
            self._written[job_uid] = max(version, self._written.get(job_uid, 0))

    def forget(self, job_uid: str) -> None:
        """The job finished or is gone: nothing more to wait for."""
        self._written.pop(job_uid, None)

    async def pods(self, target: Kube, key: WatchKey, job_name: str, job_uid: str) -> list[dict[str, Any]]:
        """The pods of job `job_name` in namespace key[3] of the target cluster: from the watch when
        it covers the job's last launch, else from a LIST (the cluster's client `target`)."""
        now = time.monotonic()
        self._stop_idle(now)
        watch = self._watch(target, key, now)
        informer = watch.informer
        if covers(informer.current, informer.seen_version, self._written.get(job_uid)):
            metrics.record_job_pod_read("watch")
            return informer.labelled(job_name)
        metrics.record_job_pod_read("list")
        return await target.list("v1", "Pod", key[3], label_selector=f"{JOB_LABEL}={job_name}")

    def _watch(self, target: Kube, key: WatchKey, now: float) -> _Watch:
        watch = self._watches.get(key)
        if (
            watch is not None
            and not watch.informer.current
            and watch.informer.kube is not target
            and now - watch.started_at >= self.stale_s
        ):
            watch.task.cancel()
            watch = None
        if watch is None:
            informer = SelectedInformer(
                target,
                "v1",
                "Pod",
                key[3],
                f"{MANAGED_BY_LABEL}={MANAGED_BY}",
                view=pod_view,
                timeouts=self.timeouts,
                index_label=JOB_LABEL,
            )
            task = asyncio.create_task(informer.run(), name=f"job-pods-{'/'.join(key)}")
            watch = self._watches[key] = _Watch(informer, task, now, now)
        watch.used_at = now
        return watch

    def _stop_idle(self, now: float) -> None:
        for key in [k for k, w in self._watches.items() if now - w.used_at >= self.idle_s]:
            self._watches.pop(key).task.cancel()

    def __len__(self) -> int:
        """How many watches run."""
        return len(self._watches)

    async def close(self) -> None:
        """Stop every watch."""
        watches, self._watches = list(self._watches.values()), {}
        for watch in watches:
            watch.task.cancel()
        for watch in watches:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watch.task
