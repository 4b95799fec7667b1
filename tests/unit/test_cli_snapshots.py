"""80-column snapshots of `colony queue` and `colony jobs list` (offers: test_cli_offers.py), and
the pure rules behind the queue view."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from colony.cli.jobs import jobs_table
from colony.cli.kube import VIEW
from colony.cli.queue import queue_view, quota_usage
from tests.unit.cli_snapshots import assert_snapshot, render_80

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def _gpr(name: str, phase: str, **status: Any) -> dict[str, Any]:
    spec = status.pop("spec", {"gpuShape": "A100", "numberOfGPUs": 8, "numberOfGPUNodes": 1})
    return {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "GPUProvisioningRequest",
        "metadata": {"name": name, "namespace": status.pop("namespace", "team-a")},
        "spec": spec,
        "status": {"phase": phase, **status},
    }


QUEUES = [
    {
        "metadata": {"name": "research"},
        "spec": {
            "cohort": "ml",
            "quotas": [{"gpuType": "A100", "nominal": 16}, {"gpuType": "H100", "nominal": 8}],
        },
        "status": {"usage": [{"gpuType": "A100", "used": 24, "borrowed": 8}]},
    },
    {"metadata": {"name": "idle"}, "spec": {"quotas": [{"gpuType": "L4", "nominal": 4}]}, "status": {}},
]
GPRS = [
    _gpr(
        "pretrain-llama-70b-with-a-very-long-name",
        "Queued",
        queue="research",
        positionInQueue=2,
        estimatedStartTime="2026-12-03T12:45:00Z",
        message="waiting for 16 A100 GPUs: 0 free in cohort ml, 8 would be reclaimed at 12:40",
        spec={"gpuShape": "A100", "numberOfGPUs": 8, "numberOfGPUNodes": 2, "priority": 200},
    ),
    _gpr(
        "finetune",
        "Queued",
        queue="research",
        positionInQueue=1,
        estimatedStartTime="2026-12-03T12:00:00Z",
        message="no colony has 8 free H100 GPUs",
        spec={"gpuShapes": ["H100", "A100-80GB"], "numberOfGPUs": 8},
    ),
    _gpr("eval", "Admitted", queue="research", colony="gpu-farm", admittedAt="2026-12-03T11:00:00Z"),
    _gpr(
        "sweep",
        "Ready",
        queue="research",
        colony="gpu-farm",
        admittedAt="2026-12-03T11:30:00Z",
        namespace="team-b",
    ),
    _gpr("done", "Released", queue="research"),
    _gpr(
        "orphan",
        "Queued",
        positionInQueue=1,
        message="no GPUQueue serves namespace team-c",
        namespace="team-c",
    ),
]


def test_queue_view_snapshot() -> None:
    assert_snapshot(render_80(queue_view(QUEUES, GPRS, namespaces=True, now=NOW)), "queue.txt")


def test_queue_view_rules() -> None:
    text = render_80(queue_view(QUEUES, GPRS, namespaces=False, now=NOW))
    lines = text.splitlines()
    assert lines[0].startswith("idle  L4 0/4  pending 0, admitted 0")
    research = next(i for i, line in enumerate(lines) if line.startswith("research"))
    assert "A100 24/16 (+8 borrowed), H100 0/8  cohort ml  pending 2, admitted 2" in lines[research]
    rows = [line.split()[:2] for line in lines[research + 2 : research + 6]]
    assert [position for position, _ in rows] == ["1", "2", "-", "-"]
    assert [name[:4] for _, name in rows] == ["fine", "pret", "eval", "swee"]
    assert "done" not in text  # released requests hold nothing and wait for nothing
    assert lines[-3].startswith("(no queue)")
    assert "in 45m" in text and "now" in text


def test_quota_usage_of_a_type_without_quota() -> None:
    queue = {"spec": {"quotas": []}, "status": {"usage": [{"gpuType": "T4", "used": 2}]}}
    assert quota_usage(queue) == "T4 2/0"
    assert quota_usage({"spec": {}, "status": {}}) == "no quota"


JOBS = [
    {
        "apiVersion": "training.exalsius.ai/v1",
        "kind": "DDPJob",
        "metadata": {
            "name": "resnet50-imagenet-baseline",
            "namespace": "team-a",
            "creationTimestamp": "2026-12-03T10:30:00Z",
        },
        "spec": {"parallelism": 4, "targetColony": "gpu-farm"},
        "status": {
            "phase": "Running",
            "colony": "gpu-farm",
            "cluster": "aws-us-east-1",
            "workersReady": 4,
            "workersTotal": 4,
            "restarts": 1,
            "gpuHours": 37.5,
            "cost": 112.5,
        },
    },
    {
        "apiVersion": "training.exalsius.ai/v1",
        "kind": "DDPJob",
        "metadata": {"name": "llm-sft", "namespace": "team-b", "creationTimestamp": "2026-12-03T11:58:00Z"},
        "spec": {"parallelism": 2, "gpuTypes": ["H100"]},
        "status": {"phase": "Pending"},
    },
]


def test_jobs_list_snapshot() -> None:
    VIEW.wide, VIEW.all_namespaces = False, True
    try:
        text = render_80(jobs_table(JOBS, now=NOW))
    finally:
        VIEW.all_namespaces = False
    assert text.splitlines()[0].split() == [
        "NAMESPACE",
        "NAME",
        "PHASE",
        "COLONY",
        "CLUSTER",
        "WORKERS",
        "RESTARTS",
        "AGE",
    ]
    assert_snapshot(text, "jobs-list.txt")
    VIEW.wide = True
    try:
        wide = render_80(jobs_table(JOBS, now=NOW))
    finally:
        VIEW.wide = False
    assert "GPU-H" in wide and "$112.50" in wide
