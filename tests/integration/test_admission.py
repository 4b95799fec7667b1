"""Invalid manifests are rejected by the real API server at admission, naming the field."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from colony.devenv.cluster import KubectlError, LocalCluster
from tests.integration.conftest import EXAMPLES


def _example(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return document


AWS_COLONY = _example("colony-aws.yaml")
DOCKER_COLONY = _example("colony-docker-ray.yaml")
DDPJOB = _example("ddpjob.yaml")
GPR: dict[str, Any] = {
    "apiVersion": "infra.exalsius.ai/v1",
    "kind": "GPUProvisioningRequest",
    "metadata": {"name": "gpr"},
    "spec": {"gpuShape": "A100", "numberOfGPUNodes": 1, "numberOfGPUs": 2},
}

GPUQUEUE: dict[str, Any] = {
    "apiVersion": "infra.exalsius.ai/v1",
    "kind": "GPUQueue",
    "metadata": {"name": "admission-queue"},
    "spec": {"namespaces": ["team-a"], "quotas": [{"gpuType": "A100", "nominal": 8}]},
}


def _mutate(base: dict[str, Any], change: Any) -> dict[str, Any]:
    document = copy.deepcopy(base)
    change(document["spec"])
    return document


def _set(path: str, value: Any) -> Any:
    def change(spec: dict[str, Any]) -> None:
        *parents, leaf = path.split(".")
        target: Any = spec
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        if value is _DELETE:
            del target[leaf]
        else:
            target[leaf] = value

    return change


_DELETE = object()
_AWS_CLUSTER = AWS_COLONY["spec"]["colonyClusters"][0]

INVALID = {
    "ddpjob-parallelism-zero": (DDPJOB, _set("parallelism", 0), "spec.parallelism"),
    "ddpjob-negative-nproc": (DDPJOB, _set("nprocPerNode", -1), "spec.nprocPerNode"),
    "ddpjob-missing-image": (DDPJOB, _set("image", _DELETE), "spec.image"),
    "ddpjob-empty-script": (DDPJOB, _set("scriptPath", ""), "spec.scriptPath"),
    "ddpjob-two-wandb-keys": (
        DDPJOB,
        _set("wandbApiKeySecretRef", {"name": "wandb"}),
        "set either wandbApiKey or wandbApiKeySecretRef",
    ),
    "ddpjob-unknown-gang-scheduler": (DDPJOB, _set("gangScheduler", "kueue"), "spec.gangScheduler"),
    "ddpjob-negative-backoff": (DDPJOB, _set("backoffLimit", -1), "spec.backoffLimit"),
    "ddpjob-bad-toleration": (
        DDPJOB,
        _set("tolerations", [{"key": "gpu", "operator": "In"}]),
        "spec.tolerations[0].operator",
    ),
    "ddpjob-env-without-name": (DDPJOB, _set("env", [{"value": "1"}]), "spec.env[0].name"),
    "colony-no-clusters": (AWS_COLONY, _set("colonyClusters", []), "spec.colonyClusters"),
    "colony-missing-clusters": (AWS_COLONY, _set("colonyClusters", _DELETE), "spec.colonyClusters"),
    "colony-bad-k8s-version": (AWS_COLONY, _set("k8sVersion", "1.30"), "spec.k8sVersion"),
    "aws-without-region": (AWS_COLONY, _set("colonyClusters.0.aws.region", _DELETE), "aws.region"),
    "aws-without-instance-type": (
        AWS_COLONY,
        _set("colonyClusters.0.aws.instanceType", _DELETE),
        "aws.instanceType",
    ),
    "duplicate-cluster-names": (
        AWS_COLONY,
        _set("colonyClusters", [_AWS_CLUSTER, _AWS_CLUSTER]),
        "spec.colonyClusters[1]: Duplicate value",
    ),
    "unknown-provider-block": (
        DOCKER_COLONY,
        _set("colonyClusters.0.gcp", {"replicas": 1}),
        'unknown field "spec.colonyClusters[0].gcp"',
    ),
    "no-provider-block": (
        DOCKER_COLONY,
        _set("colonyClusters", [{"clusterName": "empty"}]),
        "exactly one provider block",
    ),
    "two-provider-blocks": (
        DOCKER_COLONY,
        _set("colonyClusters.0.aws", _AWS_CLUSTER["aws"]),
        "exactly one provider block",
    ),
    "enabled-flag-without-block": (
        DOCKER_COLONY,
        _set("colonyClusters.0.awsEnabled", True),
        "awsEnabled must agree with the presence of the aws block",
    ),
    "negative-replicas": (
        DOCKER_COLONY,
        _set("colonyClusters.0.docker.replicas", -1),
        "spec.colonyClusters[0].docker.replicas",
    ),
    "cluster-name-not-dns": (
        DOCKER_COLONY,
        _set("colonyClusters.0.clusterName", "Docker_1"),
        "spec.colonyClusters[0].clusterName",
    ),
    "gpr-zero-gpus": (GPR, _set("numberOfGPUs", 0), "spec.numberOfGPUs"),
    "gpr-zero-nodes": (GPR, _set("numberOfGPUNodes", 0), "spec.numberOfGPUNodes"),
    "gpr-no-gpu-type": (GPR, _set("gpuShape", _DELETE), "name the GPU type"),
    "gpr-priority-out-of-range": (GPR, _set("priority", 500), "spec.priority"),
    "gpr-bad-duration": (GPR, _set("exitDuration", "forever"), "spec.exitDuration"),
    "gpuqueue-negative-nominal": (
        GPUQUEUE,
        _set("quotas", [{"gpuType": "A100", "nominal": -1}]),
        "spec.quotas[0].nominal",
    ),
    "gpuqueue-no-quotas": (GPUQUEUE, _set("quotas", []), "spec.quotas"),
    "gpuqueue-duplicate-type": (
        GPUQUEUE,
        _set("quotas", [{"gpuType": "A100", "nominal": 1}, {"gpuType": "A100", "nominal": 2}]),
        "Duplicate value",
    ),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_manifest_is_rejected_naming_the_field(
    management: LocalCluster, namespace: str, case: str
) -> None:
    base, change, expected = INVALID[case]
    document = _mutate(base, change)
    with pytest.raises(KubectlError) as rejected:
        management.kubectl("apply", "-n", namespace, "-f", "-", input_text=json.dumps(document))
    assert expected in rejected.value.stderr, rejected.value.stderr
    # Nothing was stored.
    kind = document["kind"].lower()
    listed = management.get_json(kind, "-n", namespace)["items"]
    assert [i for i in listed if i["metadata"]["name"] == document["metadata"]["name"]] == []


def test_extension_fields_are_accepted(management: LocalCluster, namespace: str) -> None:
    """The DDPJob extension fields users expect, with int-or-string quantities."""
    job = copy.deepcopy(DDPJOB)
    job["spec"] |= {
        "env": [
            {"name": "NCCL_DEBUG", "value": "INFO"},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        ],
        "resources": {"requests": {"cpu": 4, "memory": "32Gi"}, "limits": {"memory": "64Gi"}},
        "backoffLimit": 2,
        "ttlSecondsAfterFinished": 60,
        "activeDeadlineSeconds": 3600,
        "gangScheduler": "default",
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    management.kubectl("apply", "-n", namespace, "-f", "-", input_text=json.dumps(job))
    stored = management.get_json("ddpjob", "test-ddp-job", "-n", namespace)["spec"]
    assert stored["resources"]["requests"]["cpu"] == 4
    assert stored["env"][1]["valueFrom"] == {"secretKeyRef": {"name": "s", "key": "k"}}
    assert stored["queue"] == "default"  # defaulted


def test_there_are_at_least_twelve_invalid_cases() -> None:
    assert len(INVALID) >= 12


@pytest.mark.parametrize("base", [AWS_COLONY, DOCKER_COLONY, DDPJOB, GPR, GPUQUEUE], ids=lambda d: d["kind"])
def test_unmutated_bases_are_accepted(management: LocalCluster, namespace: str, base: dict[str, Any]) -> None:
    """The controls: the same documents without the mutation pass admission."""
    management.kubectl("apply", "-n", namespace, "-f", "-", input_text=json.dumps(base))
    if base["kind"] == "GPUQueue":  # cluster-scoped: no namespace takes it away
        management.kubectl("delete", "gpuqueue", base["metadata"]["name"])
