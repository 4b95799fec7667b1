"""The pure parts of DDPJob tracking's pod watch (controllers/job_pods.py): what a pod view keeps,
when the watch can be trusted for a job, and how the informer stores views and versions."""

from __future__ import annotations

from typing import Any

from colony.controllers.job_pods import JobPods, covers, pod_view
from colony.kube.informer import SelectedInformer, resource_version
from colony.kube.resources import Kube
from colony.labels import ATTEMPT_LABEL, JOB_LABEL
from colony.status.ddpjob import job_progress


def _pod(name: str, phase: str, version: str, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "resourceVersion": version,
            "labels": {JOB_LABEL: "j", ATTEMPT_LABEL: "0"},
            "managedFields": [{"manager": "kubelet"}],
            "annotations": {"big": "x" * 1000},
        },
        "spec": {"containers": [{"name": "w", "image": "i", "env": [{"name": "A", "value": "1"}]}]},
        "status": {"phase": phase, **status},
    }


def test_a_pod_view_keeps_what_tracking_reads_and_nothing_else() -> None:
    failed = _pod(
        "j-0",
        "Failed",
        "12",
        reason="Evicted",
        conditions=[{"type": "PodScheduled", "status": "True"}],
        containerStatuses=[
            {"name": "w", "image": "i", "state": {"terminated": {"exitCode": 3, "reason": "Error"}}},
            {"name": "sidecar", "state": {"running": {"startedAt": "now"}}},
        ],
        podIP="10.0.0.1",
    )
    view = pod_view(failed)
    assert "spec" not in view and "annotations" not in view["metadata"]
    assert "managedFields" not in view["metadata"] and "podIP" not in view["status"]
    assert view["metadata"]["resourceVersion"] == "12" and view["status"]["reason"] == "Evicted"
    assert view["status"]["containerStatuses"] == [
        {
            "name": "w",
            "state": {"terminated": failed["status"]["containerStatuses"][0]["state"]["terminated"]},
        }
    ]
    # the decision taken on views is the one taken on whole pods
    pods = [failed, _pod("j-1", "Running", "13")]
    assert job_progress([pod_view(p) for p in pods], 2, 0, 3) == job_progress(pods, 2, 0, 3)


def test_the_watch_is_trusted_only_when_current_and_past_the_jobs_launch() -> None:
    assert covers(True, 10, None)  # nothing launched by this process: the watch's LIST has it all
    assert covers(True, 10, 10) and covers(True, 11, 10)
    assert not covers(True, 9, 10)  # the launch's newest pod not delivered yet
    assert not covers(False, 99, None)  # starting, or cut off: maybe stale
    assert resource_version({"metadata": {"resourceVersion": "42"}}) == 42
    assert resource_version({"metadata": {}}) is None and resource_version(None) is None


def test_launch_versions_are_kept_per_job_until_forgotten() -> None:
    pods = JobPods()
    pods.wrote("a", 5)
    pods.wrote("a", 3)  # an older write never lowers the bar
    pods.wrote("b", None)
    assert pods._written == {"a": 5}
    pods.forget("a")
    pods.forget("never")
    assert pods._written == {}


def test_the_informer_stores_views_and_the_newest_version_seen() -> None:
    informer = SelectedInformer(Kube(object()), "v1", "Pod", "ns", "l=v", view=pod_view)  # type: ignore[arg-type]
    informer.apply("ADDED", _pod("j-0", "Pending", "7"))
    informer.apply("MODIFIED", _pod("j-0", "Running", "9"))
    informer.apply("MODIFIED", _pod("j-0", "Pending", "8"))  # late: an older version is ignored
    (stored,) = informer.objects()
    assert stored["apiVersion"] == "v1" and stored["kind"] == "Pod"
    assert stored["status"]["phase"] == "Running" and "spec" not in stored
    informer._saw("15")
    informer._saw("not-a-number")
    informer._saw(3)
    assert informer.seen_version == 15


def test_the_informer_keeps_pods_by_job_through_changes_deletions_and_relists() -> None:
    informer = SelectedInformer(
        Kube(object()), "v1", "Pod", "ns", "l=v", view=pod_view, index_label=JOB_LABEL
    )  # type: ignore[arg-type]
    first, second = _pod("j-0", "Pending", "1"), _pod("k-0", "Pending", "2")
    second["metadata"]["labels"][JOB_LABEL] = "k"
    informer.apply("ADDED", first)
    informer.apply("ADDED", second)
    assert [p["metadata"]["name"] for p in informer.labelled("j")] == ["j-0"]
    assert [p["metadata"]["name"] for p in informer.labelled("k")] == ["k-0"]
    informer.apply("MODIFIED", _pod("j-0", "Running", "3"))
    assert informer.labelled("j")[0]["status"]["phase"] == "Running"
    informer.apply("DELETED", _pod("j-0", "Running", "4"))
    assert informer.labelled("j") == [] and informer._keys_by_value.keys() == {"k"}
    informer.replace([_pod("j-1", "Pending", "5")])  # a relist: k-0 is gone, j-1 is new
    assert [p["metadata"]["name"] for p in informer.labelled("j")] == ["j-1"]
    assert informer.labelled("k") == [] and informer._keys_by_value.keys() == {"j"}
