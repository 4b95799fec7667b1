"""Pinning copies of framework custom resources to nodes, and stripping them for another cluster."""

from __future__ import annotations

import copy
from typing import Any

import kopf
import pytest

from colony.workloads import jqexpr
from colony.workloads.demand import compute_demand
from colony.workloads.pinning import pin_to_nodes, pod_template_paths, strip_for_copy
from colony.workloads.status import workload_phase
from tests.unit.test_workload_demand import UPSTREAM
from tests.unit.workload_examples import builtin, example

SELECTOR = {"colony.exalsius.ai/reservation": "gpr-abc", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
TOLERATIONS = [
    {"key": "colony.exalsius.ai/reserved", "operator": "Equal", "value": "gpr-abc", "effect": "NoSchedule"},
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
]

# upstream example -> the pod templates it has (every one must be pinned)
TEMPLATES = {
    "pytorchjob/pytorch_job_mnist_nccl.yaml": [
        ["spec", "pytorchReplicaSpecs", "Master", "template"],
        ["spec", "pytorchReplicaSpecs", "Worker", "template"],
    ],
    "pytorchjob/imagenet.yaml": [["spec", "pytorchReplicaSpecs", "Worker", "template"]],
    "rayjob/ray-job.pytorch-image-classifier.yaml": [
        ["spec", "rayClusterSpec", "headGroupSpec", "template"],
        ["spec", "rayClusterSpec", "workerGroupSpecs", 0, "template"],
    ],
    "raycluster/ray-cluster.sample.yaml": [
        ["spec", "headGroupSpec", "template"],
        ["spec", "workerGroupSpecs", 0, "template"],
    ],
    "jobset/paralleljobs.yaml": [
        ["spec", "replicatedJobs", 0, "template", "spec", "template"],
        ["spec", "replicatedJobs", 1, "template", "spec", "template"],
    ],
    "leaderworkerset/vllm-gpu-lws.yaml": [
        ["spec", "leaderWorkerTemplate", "leaderTemplate"],
        ["spec", "leaderWorkerTemplate", "workerTemplate"],
    ],
    "leaderworkerset/lws.yaml": [["spec", "leaderWorkerTemplate", "workerTemplate"]],
}


def _without_pinning(obj: dict[str, Any], paths: list[list[Any]]) -> dict[str, Any]:
    """The object with nodeSelector and tolerations removed from the given pod templates."""
    result = copy.deepcopy(obj)
    for path in paths:
        spec = jqexpr.get_path(result, path).setdefault("spec", {})
        spec.pop("nodeSelector", None)
        spec.pop("tolerations", None)
    return result


@pytest.mark.parametrize("relative", sorted(TEMPLATES))
def test_pod_template_paths(relative: str) -> None:
    obj = example(relative)
    assert pod_template_paths(builtin(obj["kind"]), obj) == TEMPLATES[relative]


@pytest.mark.parametrize("relative", sorted(UPSTREAM))
def test_every_pod_template_is_pinned_and_nothing_else_changes(relative: str) -> None:
    obj = example(relative)
    original = copy.deepcopy(obj)
    definition = builtin(obj["kind"])
    paths = pod_template_paths(definition, obj)
    assert paths, relative
    pinned = pin_to_nodes(definition, obj, SELECTOR, TOLERATIONS)
    assert obj == original  # the input is not modified
    for path in paths:
        spec = jqexpr.get_path(pinned, path)["spec"]
        before = jqexpr.get_path(original, path)["spec"]
        assert spec["nodeSelector"] == {**(before.get("nodeSelector") or {}), **SELECTOR}
        for toleration in TOLERATIONS:
            assert toleration in spec["tolerations"]
        for toleration in before.get("tolerations") or []:
            assert toleration in spec["tolerations"]
    assert _without_pinning(pinned, paths) == _without_pinning(original, paths)
    assert pin_to_nodes(definition, pinned, SELECTOR, TOLERATIONS) == pinned  # idempotent


def test_existing_selector_is_merged_and_equal_tolerations_are_not_duplicated() -> None:
    obj = example("rayjob/ray-job.pytorch-image-classifier.yaml")
    worker = obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    worker["nodeSelector"] = {"disk": "ssd", "nvidia.com/gpu.product": "A100"}
    # the upstream worker already tolerates nvidia.com/gpu Exists NoSchedule
    pinned = pin_to_nodes(builtin("RayJob"), obj, SELECTOR, TOLERATIONS)
    spec = pinned["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert spec["nodeSelector"] == {"disk": "ssd", **SELECTOR}
    assert spec["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        TOLERATIONS[0],
    ]


def test_lws_without_leader_template_pins_the_worker_template_once() -> None:
    obj = example("leaderworkerset/lws.yaml")
    pinned = pin_to_nodes(builtin("LeaderWorkerSet"), obj, SELECTOR, TOLERATIONS)
    template = pinned["spec"]["leaderWorkerTemplate"]
    assert "leaderTemplate" not in template
    assert template["workerTemplate"]["spec"]["tolerations"] == TOLERATIONS


def test_template_without_spec_gets_one() -> None:
    obj = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "j"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Worker": {"replicas": 1, "template": {"metadata": {"labels": {"a": "b"}}}}
            }
        },
    }
    pinned = pin_to_nodes(builtin("PyTorchJob"), obj, {"k": "v"}, [])
    assert pinned["spec"]["pytorchReplicaSpecs"]["Worker"]["template"] == {
        "metadata": {"labels": {"a": "b"}},
        "spec": {"nodeSelector": {"k": "v"}},
    }
    assert "Master" not in pinned["spec"]["pytorchReplicaSpecs"]


def test_strip_for_copy_removes_server_set_fields() -> None:
    obj = example("pytorchjob/pytorch_job_mnist_nccl.yaml")
    obj["metadata"].update(
        namespace="team",
        uid="1234",
        resourceVersion="42",
        generation=3,
        creationTimestamp="2026-01-01T00:00:00Z",
        managedFields=[{"manager": "kubectl"}],
        ownerReferences=[{"kind": "Thing", "name": "x", "uid": "9"}],
        finalizers=["colony.exalsius.ai/placement"],
        labels={"team": "a"},
        annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}", "note": "keep"},
    )
    obj["status"] = {"conditions": [{"type": "Running", "status": "True"}]}
    stripped = strip_for_copy(obj)
    assert stripped["metadata"] == {
        "name": "pytorch-dist-mnist-nccl",
        "namespace": "team",
        "labels": {"team": "a"},
        "annotations": {"note": "keep"},
    }
    assert "status" not in stripped
    assert stripped["spec"] == obj["spec"] and stripped["spec"] is not obj["spec"]
    assert obj["metadata"]["uid"] == "1234"  # the input is not modified


def test_kopf_bodies_are_read_like_dicts() -> None:
    raw = example("rayjob/ray-job.pytorch-image-classifier.yaml")
    raw["status"] = {"jobDeploymentStatus": "Running"}
    body = kopf.Body(raw)
    definition = builtin("RayJob")
    assert compute_demand(definition, body) == compute_demand(definition, raw)
    assert workload_phase(definition, body) == "Running"
    assert pin_to_nodes(definition, body, SELECTOR, TOLERATIONS) == pin_to_nodes(
        definition, raw, SELECTOR, TOLERATIONS
    )
    assert strip_for_copy(body) == strip_for_copy(raw)
    assert type(strip_for_copy(body)["spec"]) is dict
