"""DDPJob rendering: torchrun rendezvous, PET_* env, GPUs, gang PodGroup, attempts; a golden file."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

from colony.api.base import SecretKeyReference
from colony.api.ddpjob import DDPJobSpec
from colony.render.ddpjob import (
    GROUP_ANNOTATION,
    JobRef,
    RenderedJob,
    render_ddpjob,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GOLDEN = Path(__file__).with_name("golden") / "ddpjob" / "seed.yaml"
JOB = JobRef(name="test-ddp-job", namespace="team-a", uid="0b6d6a4e-uid")
SEED: dict[str, Any] = yaml.safe_load((EXAMPLES / "ddpjob.yaml").read_text())["spec"]
WANDB = SecretKeyReference(name="test-ddp-job-wandb", key="apiKey")


def _render(attempt: int = 0, **changes: Any) -> RenderedJob:
    return render_ddpjob(JOB, DDPJobSpec.model_validate(SEED | changes), attempt=attempt, wandb_secret=WANDB)


def _env(pod: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in pod["spec"]["containers"][0]["env"]}


def test_seed_job_matches_golden_file() -> None:
    rendered = yaml.safe_dump_all(list(_render().manifests), sort_keys=False)
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(rendered)
    assert rendered == GOLDEN.read_text()


def test_every_worker_joins_one_rendezvous() -> None:
    pods = _render().pods
    assert len(pods) == 2
    endpoint = "test-ddp-job-worker-0.test-ddp-job.team-a.svc:29500"
    for rank, pod in enumerate(pods):
        command = pod["spec"]["containers"][0]["command"]
        assert command == [
            "torchrun",
            "--nnodes=2",
            "--nproc-per-node=1",
            f"--node-rank={rank}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={endpoint}",
            "--rdzv-id=0b6d6a4e-uid-0",
            "/app/training/trainer.py",
            "--per_device_train_batch_size",
            "16",
            "--batch_size",
            "256",
            "--lr",
            "1e-3",
        ]
        env = _env(pod)
        assert env["PET_NNODES"] == "2" and env["PET_NODE_RANK"] == str(rank)
        assert env["PET_RDZV_ENDPOINT"] == endpoint and env["PET_MASTER_PORT"] == "29500"
        assert pod["spec"]["hostname"] == f"test-ddp-job-worker-{rank}"
        assert pod["spec"]["subdomain"] == "test-ddp-job"
        assert pod["spec"]["restartPolicy"] == "Never"


def test_gpus_gang_and_secret() -> None:
    rendered = _render()
    group = rendered.pod_group
    assert group is not None
    assert group["spec"] == {"minMember": 2, "queue": "default", "minResources": {"nvidia.com/gpu": "2"}}
    for pod in rendered.pods:
        assert pod["metadata"]["annotations"][GROUP_ANNOTATION] == group["metadata"]["name"]
        assert pod["spec"]["schedulerName"] == "volcano"
        assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
        assert _env(pod)["WANDB_API_KEY"] == {"secretKeyRef": {"name": "test-ddp-job-wandb", "key": "apiKey"}}
    assert SEED["wandbApiKey"] not in json.dumps(list(rendered.manifests))


def test_a_new_attempt_gets_new_pods_group_and_rendezvous_but_same_hostnames() -> None:
    first, second = _render(attempt=0), _render(attempt=1)
    assert {p["metadata"]["name"] for p in first.pods}.isdisjoint(p["metadata"]["name"] for p in second.pods)
    assert first.pod_group and second.pod_group
    assert first.pod_group["metadata"]["name"] != second.pod_group["metadata"]["name"]
    assert _env(second.pods[0])["PET_RDZV_ID"] == "0b6d6a4e-uid-1"
    assert [p["spec"]["hostname"] for p in first.pods] == [p["spec"]["hostname"] for p in second.pods]


def test_cpu_job_default_scheduler_and_extension_fields() -> None:
    rendered = _render(
        cpuJob=True,
        gangScheduler="default",
        resources={"requests": {"cpu": 2, "memory": "4Gi"}},
        nodeSelector={"pool": "cpu"},
        tolerations=[{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        env=[{"name": "NCCL_DEBUG", "value": "INFO"}],
    )
    assert rendered.pod_group is None
    pod = rendered.pods[0]
    assert "schedulerName" not in pod["spec"] and "annotations" not in pod["metadata"]
    assert pod["spec"]["containers"][0]["resources"] == {"requests": {"cpu": 2, "memory": "4Gi"}}
    assert pod["spec"]["nodeSelector"] == {"pool": "cpu"}
    assert pod["spec"]["tolerations"] == [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    assert _env(pod)["NCCL_DEBUG"] == "INFO"


def test_gang_min_resources_scale_with_parallelism() -> None:
    group = _render(parallelism=4, nprocPerNode=8, resources={"requests": {"cpu": 16}}).pod_group
    assert group is not None
    assert group["spec"]["minResources"] == {"nvidia.com/gpu": "32", "cpu": "64"}


def test_workers_mount_no_service_account_token_unless_the_job_asks() -> None:
    assert all(pod["spec"]["automountServiceAccountToken"] is False for pod in _render().pods)
    asked = _render(automountServiceAccountToken=True).pods
    assert all(pod["spec"]["automountServiceAccountToken"] is True for pod in asked)


def test_a_plain_wandb_key_is_never_rendered_into_a_worker() -> None:
    """The pods read the key through secretKeyRef; the plain value appears in no rendered object."""
    planted = "wb-plain-value-never-rendered"
    rendered = yaml.safe_dump_all(list(_render(wandbApiKey=planted).manifests))
    assert planted not in rendered
    assert _env(_render(wandbApiKey=planted).pods[0])["WANDB_API_KEY"] == {
        "secretKeyRef": {"name": WANDB.name, "key": WANDB.key}
    }
