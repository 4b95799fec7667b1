"""DDPJob tracking reads worker pods from one watch per cluster and namespace (controllers/job_pods.py)
on a real API server: a LIST until the watch is current and has delivered the job's launch, the
watch afterwards (slim pod views, only pods labelled as ours, only the job's own); a watch cut
half-open stops being trusted and recovers; an unread watch is stopped."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from prometheus_client import REGISTRY

from colony.controllers.job_pods import JobPods, WatchKey
from colony.devenv.cluster import LocalCluster
from colony.kube.informer import resource_version
from colony.kube.resources import Kube
from colony.labels import JOB_LABEL, MANAGED_BY, MANAGED_BY_LABEL
from tests.faultproxy import FaultProxy
from tests.integration.test_api_timeouts import SHORT, _wait_for, kube, proxy  # noqa: F401  (fixtures)

pytestmark = pytest.mark.integration


def _reads(source: str) -> float:
    return REGISTRY.get_sample_value("colony_job_pod_reads_total", {"source": source}) or 0.0


def _pod(name: str, namespace: str, job: str | None) -> dict[str, Any]:
    labels = {MANAGED_BY_LABEL: MANAGED_BY, **({JOB_LABEL: job} if job else {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"containers": [{"name": "worker", "image": "busybox:1", "command": ["true"]}]},
    }


async def test_tracking_reads_the_watch_once_it_has_the_launch_and_lists_before(
    kube: Kube,  # noqa: F811
    proxy: FaultProxy,  # noqa: F811
    management: LocalCluster,
    unwatched_namespace: str,
) -> None:
    namespace, job = unwatched_namespace, f"job-{uuid.uuid4().hex[:6]}"
    key: WatchKey = ("", "", "management", namespace)
    pods = JobPods(idle_s=60.0, stale_s=60.0, timeouts=SHORT)
    try:
        lists = _reads("list")
        assert await pods.pods(kube, key, job, "uid-1") == []  # the watch is not current yet: a LIST
        assert _reads("list") == lists + 1
        watch = pods._watches[key]
        assert await _wait_for(lambda: watch.informer.current, 10)

        # A launch: the job's pod, another job's pod, and a pod of ours without a job label.
        created = await kube.create(_pod(f"{job}-0", namespace, job))
        await kube.create(_pod(f"other-{job}-0", namespace, f"other-{job}"))
        await kube.create(_pod(f"bare-{job}", namespace, None))
        pods.wrote("uid-1", resource_version(created))
        # Whatever the read's source, the pod just created is in it (never a job short of workers).
        seen = await pods.pods(kube, key, job, "uid-1")
        assert [p["metadata"]["name"] for p in seen] == [f"{job}-0"]

        watched = _reads("watch")
        assert await _wait_for(lambda: watch.informer.seen_version >= (resource_version(created) or 0), 10)
        seen = await pods.pods(kube, key, job, "uid-1")
        assert _reads("watch") == watched + 1
        assert [p["metadata"]["name"] for p in seen] == [f"{job}-0"]
        assert "spec" not in seen[0] and seen[0]["status"]["phase"] == "Pending"

        # Half-open: nothing reaches the watch; once the stall bound passes it is no longer trusted,
        # and after the proxy passes again it lists and sees what was written meanwhile.
        proxy.mode = "hang"
        await asyncio.to_thread(management.apply, [_pod(f"{job}-1", namespace, job)])
        assert await _wait_for(lambda: not watch.informer.current, SHORT.watch_stall_s + 3)
        proxy.mode = "pass"
        proxy.reset_all()
        assert await _wait_for(lambda: watch.informer.current, 15)
        seen = await pods.pods(kube, key, job, "uid-1")
        assert sorted(p["metadata"]["name"] for p in seen) == [f"{job}-0", f"{job}-1"]
        assert len(pods) == 1
    finally:
        await pods.close()


async def test_an_unread_watch_is_stopped(kube: Kube, unwatched_namespace: str) -> None:  # noqa: F811
    pods = JobPods(idle_s=0.3, stale_s=60.0, timeouts=SHORT)
    first: WatchKey = ("", "", "management", unwatched_namespace)
    second: WatchKey = ("", "", "management", "default")
    try:
        await pods.pods(kube, first, "a", "uid-a")
        task = pods._watches[first].task
        await asyncio.sleep(0.4)
        await pods.pods(kube, second, "b", "uid-b")
        assert list(pods._watches) == [second]
        await asyncio.sleep(0.1)
        assert task.cancelled() or task.done()
    finally:
        await pods.close()
    assert len(pods) == 0
