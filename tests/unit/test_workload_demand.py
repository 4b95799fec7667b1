"""Demand of framework custom resources, read through the shipped definitions.

The expected numbers were read off the vendored upstream example manifests
(tests/data/upstream-examples, README there names each source); a comment per case says how.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes.utils.quantity import parse_quantity as kubernetes_parse_quantity

from colony.workloads.definition import load_builtin_definitions
from colony.workloads.demand import (
    DemandError,
    PodSetDemand,
    RequestShape,
    WorkloadDemand,
    compute_demand,
    parse_quantity,
    pod_resources,
    template_gpu_types,
)
from tests.unit.workload_examples import builtin, example

GI = 1024**3

# file -> (kind, {pod set name: (pods, gpus per pod)}, request shape or None when it asks for no GPUs)
UPSTREAM: dict[str, tuple[str, dict[str, tuple[int, int]], RequestShape | None]] = {
    # Master replicas 1 + Worker replicas 1, no resources
    "pytorchjob/simple.yaml": ("PyTorchJob", {"master": (1, 0), "worker": (1, 0)}, None),
    # Master 1 + Worker 1, each limits nvidia.com/gpu: 1
    "pytorchjob/pytorch_job_mnist_nccl.yaml": (
        "PyTorchJob",
        {"master": (1, 1), "worker": (1, 1)},
        RequestShape(2, 1, ()),
    ),
    "pytorchjob/pytorch_deepspeed_demo.yaml": (
        "PyTorchJob",
        {"master": (1, 1), "worker": (1, 1)},
        RequestShape(2, 1, ()),
    ),
    # elastic: Worker only, replicas 2, requests cpu 4
    "pytorchjob/imagenet.yaml": ("PyTorchJob", {"worker": (2, 0)}, None),
    # head + worker group small-group replicas 1, CPU only
    "rayjob/ray-job.sample.yaml": ("RayJob", {"head": (1, 0), "worker/small-group": (1, 0)}, None),
    # head without GPUs + gpu-group replicas 4 (min 4, max 4), nvidia.com/gpu "1" each
    "rayjob/ray-job.pytorch-image-classifier.yaml": (
        "RayJob",
        {"head": (1, 0), "worker/gpu-group": (4, 1)},
        RequestShape(4, 1, ()),
    ),
    # head only, nvidia.com/gpu "4", nodeSelector cloud.google.com/gke-accelerator: nvidia-tesla-t4
    "rayjob/ray-job.batch-inference.yaml": ("RayJob", {"head": (1, 4)}, RequestShape(1, 4, ("T4",))),
    # head + workergroup replicas 1, CPU only
    "raycluster/ray-cluster.sample.yaml": (
        "RayCluster",
        {"head": (1, 0), "worker/workergroup": (1, 0)},
        None,
    ),
    # head only, nvidia.com/gpu "4"
    "raycluster/ray-cluster.verl.yaml": ("RayCluster", {"head": (1, 4)}, RequestShape(1, 4, ())),
    # tpu-group replicas 1 x numOfHosts 2 (TPUs are not GPUs)
    "raycluster/ray-cluster.tpu-v4-multihost.yaml": (
        "RayCluster",
        {"head": (1, 0), "worker/tpu-group": (2, 0)},
        None,
    ),
    # workers parallelism 4, driver parallelism 1, replicas default 1
    "jobset/paralleljobs.yaml": (
        "JobSet",
        {"replicated-job/workers": (4, 0), "replicated-job/driver": (1, 0)},
        None,
    ),
    # workers replicas 3 x parallelism 3
    "jobset/exclusive-placement.yaml": ("JobSet", {"replicated-job/workers": (9, 0)}, None),
    # rj-1 and rj-2: replicas 1 x parallelism 2 each
    "jobset/group.yaml": ("JobSet", {"replicated-job/rj-1": (2, 0), "replicated-job/rj-2": (2, 0)}, None),
    # workers parallelism 4
    "jobset/resnet.yaml": ("JobSet", {"replicated-job/workers": (4, 0)}, None),
    # replicas 2 groups of size 2: 2 leaders + 2 workers, nvidia.com/gpu "8" each
    "leaderworkerset/vllm-gpu-lws.yaml": (
        "LeaderWorkerSet",
        {"leader": (2, 8), "worker": (2, 8)},
        RequestShape(4, 8, ()),
    ),
    # replicas 2, size 2, nvidia.com/gpu "1" in both templates
    "leaderworkerset/sglang-lws.yaml": (
        "LeaderWorkerSet",
        {"leader": (2, 1), "worker": (2, 1)},
        RequestShape(4, 1, ()),
    ),
    # replicas 3, size 4, workerTemplate only (it is the leader's template too): 3 + 9 pods
    "leaderworkerset/lws.yaml": ("LeaderWorkerSet", {"leader": (3, 0), "worker": (9, 0)}, None),
    "leaderworkerset/lws-multi-template.yaml": (
        "LeaderWorkerSet",
        {"leader": (3, 0), "worker": (9, 0)},
        None,
    ),
}


def _by_name(demand: WorkloadDemand) -> dict[str, tuple[int, int]]:
    return {p.name: (p.pods, p.gpus_per_pod) for p in demand.pod_sets}


def test_every_shipped_definition_is_checked_against_upstream_examples() -> None:
    kinds = {kind for kind, _, _ in UPSTREAM.values()}
    assert kinds == {d.kind for d in load_builtin_definitions()}
    with_gpus = {kind for kind, _, shape in UPSTREAM.values() if shape is not None}
    assert with_gpus == kinds - {"JobSet"}  # no upstream JobSet example asks for GPUs (see README)


@pytest.mark.parametrize("relative", sorted(UPSTREAM))
def test_demand_of_upstream_examples(relative: str) -> None:
    kind, pod_sets, shape = UPSTREAM[relative]
    obj = example(relative)
    assert obj["kind"] == kind
    demand = compute_demand(builtin(kind), obj)
    assert _by_name(demand) == pod_sets
    assert demand.total_pods == sum(pods for pods, _ in pod_sets.values())
    assert demand.total_gpus == sum(pods * gpus for pods, gpus in pod_sets.values())
    assert demand.gpu_pods == sum(pods for pods, gpus in pod_sets.values() if gpus)
    if shape is None:
        with pytest.raises(DemandError, match="asks for no GPUs"):
            demand.request_shape()
    else:
        assert demand.request_shape() == shape


def test_jobset_with_gpus_upstream_resnet_plus_a_gpu_limit() -> None:
    obj = example("jobset/resnet.yaml")
    job = obj["spec"]["replicatedJobs"][0]
    job["replicas"] = 2
    job["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": 2}
    }
    demand = compute_demand(builtin("JobSet"), obj)
    assert _by_name(demand) == {"replicated-job/workers": (8, 2)}  # 2 replicas x parallelism 4
    assert demand.total_gpus == 16
    assert demand.request_shape() == RequestShape(8, 2, ())


def test_cpu_and_memory_per_pod_of_upstream_examples() -> None:
    vllm = compute_demand(builtin("LeaderWorkerSet"), example("leaderworkerset/vllm-gpu-lws.yaml"))
    leader = vllm.pod_sets[0]
    # requests cpu 125; memory only as a limit (1124Gi), which is then the request
    assert (leader.cpu_millis, leader.memory_bytes) == (125_000, 1124 * GI)
    verl = compute_demand(builtin("RayCluster"), example("raycluster/ray-cluster.verl.yaml"))
    # requests cpu "36", memory 144G (limits 48 / 192G are not what the scheduler reserves)
    assert (verl.pod_sets[0].cpu_millis, verl.pod_sets[0].memory_bytes) == (36_000, 144 * 10**9)
    sample = compute_demand(builtin("RayJob"), example("rayjob/ray-job.sample.yaml"))
    assert [(p.cpu_millis, p.memory_bytes) for p in sample.pod_sets] == [(200, 0), (200, 0)]
    imagenet = compute_demand(builtin("PyTorchJob"), example("pytorchjob/imagenet.yaml"))
    assert imagenet.pod_sets[0].cpu_millis == 4000


def test_scheduler_name_of_pod_sets() -> None:
    obj = example("pytorchjob/pytorch_job_mnist_nccl.yaml")
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["schedulerName"] = "volcano"
    demand = compute_demand(builtin("PyTorchJob"), obj)
    assert [p.scheduler_name for p in demand.pod_sets] == [None, "volcano"]


def test_gangs_sum_their_components() -> None:
    demand = compute_demand(builtin("PyTorchJob"), example("pytorchjob/pytorch_job_mnist_nccl.yaml"))
    assert [(g.name, g.components, g.pods, g.total_gpus) for g in demand.gangs] == [
        ("job", ("master", "worker"), 2, 2)
    ]
    ray = compute_demand(builtin("RayJob"), example("rayjob/ray-job.pytorch-image-classifier.yaml"))
    assert [(g.name, g.pods, g.total_gpus) for g in ray.gangs] == [("all", 5, 4)]


# --- synthetic objects ----------------------------------------------------------------------------


def _pytorchjob(master: dict[str, Any] | None, worker: dict[str, Any], workers: int = 2) -> dict[str, Any]:
    specs: dict[str, Any] = {"Worker": {"replicas": workers, "template": {"spec": worker}}}
    if master is not None:
        specs["Master"] = {"replicas": 1, "template": {"spec": master}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "job", "namespace": "team"},
        "spec": {"pytorchReplicaSpecs": specs},
    }


def _gpu_pod(gpus: int, **spec: Any) -> dict[str, Any]:
    return {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}], **spec}


def test_gpu_types_from_node_selector_are_canonical() -> None:
    spec = _gpu_pod(8, nodeSelector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})
    demand = compute_demand(builtin("PyTorchJob"), _pytorchjob(spec, spec))
    assert {p.gpu_types for p in demand.pod_sets} == {("A100-80GB",)}
    assert demand.request_shape() == RequestShape(3, 8, ("A100-80GB",))
    assert demand.gpus_by_type() == {("A100-80GB",): 24}


def _affinity(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": list(term)} for term in terms]
            }
        }
    }


def _in(*values: str, key: str = "nvidia.com/gpu.product") -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


@pytest.mark.parametrize(
    ("spec", "types"),
    [
        ({}, ()),
        ({"affinity": _affinity([_in("NVIDIA-H100-80GB-HBM3", "H100")])}, ("H100",)),
        ({"affinity": _affinity([_in("H100")], [_in("NVIDIA-A100-SXM4-40GB")])}, ("A100", "H100")),
        # a term that does not name the GPU admits any type: the terms are ORed
        ({"affinity": _affinity([_in("H100")], [_in("a", key="zone")])}, ()),
        # expressions of one term are ANDed
        ({"affinity": _affinity([_in("H100", "A100"), _in("A100", "L4")])}, ("A100",)),
        # NotIn cannot be turned into a list of accepted types: it does not constrain
        (
            {
                "affinity": _affinity(
                    [{"key": "nvidia.com/gpu.product", "operator": "NotIn", "values": ["T4"]}]
                )
            },
            (),
        ),
        (
            {
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                "affinity": _affinity([_in("H100", "A100")]),
            },
            ("H100",),
        ),
        ({"nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"}}, ("L4",)),
    ],
)
def test_gpu_types_from_affinity(spec: dict[str, Any], types: tuple[str, ...]) -> None:
    assert template_gpu_types(spec) == types


def test_contradicting_gpu_type_constraints_are_an_error() -> None:
    spec = _gpu_pod(1, nodeSelector={"nvidia.com/gpu.product": "T4"}, affinity=_affinity([_in("H100")]))
    with pytest.raises(DemandError, match=r"PyTorchJob team/job, component master: .*admit no GPU type"):
        compute_demand(builtin("PyTorchJob"), _pytorchjob(spec, _gpu_pod(1)))


def test_request_shape_combines_gpu_types() -> None:
    h100 = _gpu_pod(8, affinity=_affinity([_in("H100", "A100")]))
    any_type = _gpu_pod(4)
    cpu_only = {"containers": [{"name": "c"}]}
    demand = compute_demand(builtin("PyTorchJob"), _pytorchjob(cpu_only, h100, workers=3))
    assert demand.request_shape() == RequestShape(3, 8, ("A100", "H100"))
    mixed = compute_demand(builtin("PyTorchJob"), _pytorchjob(any_type, h100, workers=3))
    assert mixed.request_shape() == RequestShape(4, 8, ("A100", "H100"))
    narrowed = _gpu_pod(1, nodeSelector={"nvidia.com/gpu.product": "A100"})
    both = compute_demand(builtin("PyTorchJob"), _pytorchjob(narrowed, h100))
    assert both.request_shape().gpu_types == ("A100",)


def test_request_shape_refuses_gpu_types_that_cannot_be_combined() -> None:
    h100 = _gpu_pod(8, nodeSelector={"nvidia.com/gpu.product": "H100"})
    l4 = _gpu_pod(1, nodeSelector={"nvidia.com/gpu.product": "NVIDIA-L4"})
    demand = compute_demand(builtin("PyTorchJob"), _pytorchjob(l4, h100))
    with pytest.raises(DemandError, match=r"cannot be combined .*master: L4; worker: H100"):
        demand.request_shape()


def test_no_gpu_message_names_the_object_and_definition() -> None:
    demand = compute_demand(builtin("PyTorchJob"), example("pytorchjob/simple.yaml"))
    with pytest.raises(DemandError) as error:
        demand.request_shape()
    assert str(error.value).startswith("PyTorchJob kubeflow/pytorch-simple asks for no GPUs")
    assert "pytorchjobs.kubeflow.org" in str(error.value)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        # GPUs: limits, else requests
        ({"containers": [{"resources": {"requests": {"nvidia.com/gpu": "2"}}}]}, (2, 0, 0)),
        # CPU and memory: requests, else limits
        (
            {
                "containers": [
                    {"resources": {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "500m"}}}
                ]
            },
            (0, 500, 1024**3),
        ),
        # app containers add up; a larger init container sets the pod's need
        (
            {
                "containers": [_gpu_pod(1)["containers"][0], _gpu_pod(2)["containers"][0]],
                "initContainers": [{"resources": {"limits": {"nvidia.com/gpu": 4}}}],
            },
            (4, 0, 0),
        ),
        (
            {
                "containers": [{"resources": {"requests": {"cpu": "1"}}}],
                "initContainers": [{"resources": {"requests": {"cpu": "250m"}}}],
            },
            (0, 1000, 0),
        ),
        # a sidecar (restartPolicy Always) runs alongside the app and the init containers after it
        (
            {
                "containers": [{"resources": {"requests": {"cpu": "1"}}}],
                "initContainers": [
                    {"restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
                    {"resources": {"requests": {"cpu": "2"}}},
                ],
            },
            (0, 2500, 0),
        ),
        (
            {
                "containers": [{"resources": {"requests": {"cpu": "3"}}}],
                "initContainers": [
                    {"restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
                    {"resources": {"requests": {"cpu": "2"}}},
                ],
            },
            (0, 3500, 0),
        ),
        # pod overhead is added
        (
            {"containers": [{"resources": {"requests": {"memory": "1G"}}}], "overhead": {"memory": "120Mi"}},
            (0, 0, 10**9 + 120 * 1024**2),
        ),
        ({}, (0, 0, 0)),
    ],
)
def test_pod_resources_count_like_kubernetes(spec: dict[str, Any], expected: tuple[int, int, int]) -> None:
    resources = pod_resources(spec)
    assert (resources.gpus, resources.cpu_millis, resources.memory_bytes) == expected


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Decimal("0.5")),
        ("2", Decimal(2)),
        (3, Decimal(3)),
        ("1.5Gi", Decimal(3 * 512 * 1024**2)),
        ("128974848", Decimal(128974848)),
        ("129e6", Decimal(129 * 10**6)),
        ("123Mi", Decimal(123 * 1024**2)),
        ("1k", Decimal(1000)),
        ("100u", Decimal("0.0001")),
    ],
)
def test_parse_quantity(text: str | int, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "1ki", "Gi", "1.2.3", "one", "1 Gi", "1Gb"])
def test_parse_quantity_rejects_malformed(text: str) -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        parse_quantity(text)


@settings(max_examples=300, deadline=None)
@given(
    number=st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False, allow_infinity=False),
    suffix=st.sampled_from(["", "m", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti"]),
)
def test_parse_quantity_agrees_with_the_kubernetes_client(number: Decimal, suffix: str) -> None:
    text = f"{number}{suffix}"
    assert parse_quantity(text) == kubernetes_parse_quantity(text)


def test_malformed_quantity_names_the_component() -> None:
    bad = {"containers": [{"resources": {"requests": {"memory": "lots"}}}]}
    with pytest.raises(DemandError, match=r"PyTorchJob team/job, component worker: not a quantity: 'lots'"):
        compute_demand(builtin("PyTorchJob"), _pytorchjob(None, bad))


def test_fractional_gpu_is_an_error() -> None:
    half = {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "500m"}}}]}
    with pytest.raises(DemandError, match="whole number"):
        compute_demand(builtin("PyTorchJob"), _pytorchjob(None, half))


def _raycluster(group: dict[str, Any]) -> dict[str, Any]:
    template = {"spec": _gpu_pod(1)}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rc"},
        "spec": {
            "headGroupSpec": {"template": {"spec": {"containers": [{"name": "head"}]}}},
            "workerGroupSpecs": [{"groupName": "g", "template": template, **group}],
        },
    }


@pytest.mark.parametrize(
    ("group", "pods"),
    [
        ({"replicas": 3}, 3),
        ({"replicas": 10, "maxReplicas": 5}, 5),
        ({"replicas": 1, "minReplicas": 2}, 2),
        ({"minReplicas": 2}, 2),
        ({}, 0),
        ({"replicas": 2, "numOfHosts": 4}, 8),
        ({"replicas": 3, "suspend": True}, 0),
    ],
)
def test_ray_worker_replicas_follow_kuberay(group: dict[str, Any], pods: int) -> None:
    demand = compute_demand(builtin("RayCluster"), _raycluster(group))
    assert _by_name(demand)["worker/g"] == (pods, 1)


def test_raycluster_without_worker_groups_and_rayjob_without_cluster_spec() -> None:
    cluster = _raycluster({})
    del cluster["spec"]["workerGroupSpecs"]
    assert [p.name for p in compute_demand(builtin("RayCluster"), cluster).pod_sets] == ["head"]
    job = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "j"},
        "spec": {"clusterSelector": {}},
    }
    assert compute_demand(builtin("RayJob"), job).pod_sets == ()


def test_lws_leader_template_defaults_to_worker_template_and_size_one_has_no_workers() -> None:
    obj = example("leaderworkerset/lws.yaml")
    obj["spec"]["leaderWorkerTemplate"]["size"] = 1
    obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": 4}
    }
    demand = compute_demand(builtin("LeaderWorkerSet"), obj)
    assert _by_name(demand) == {"leader": (3, 4), "worker": (0, 4)}
    assert demand.request_shape() == RequestShape(3, 4, ())


def test_bad_replicas_and_templates_are_demand_errors() -> None:
    job = _pytorchjob(None, _gpu_pod(1))
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "two"
    with pytest.raises(
        DemandError,
        match=r"component worker: replicas must be a whole number >= 0 \(at most 1000000\), got 'two'",
    ):
        compute_demand(builtin("PyTorchJob"), job)
    job = _pytorchjob(None, _gpu_pod(1))
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"] = "oops"
    with pytest.raises(DemandError, match="yields str, not a pod template"):
        compute_demand(builtin("PyTorchJob"), job)


def test_jq_failure_on_an_object_names_definition_field_and_object() -> None:
    obj = example("jobset/paralleljobs.yaml")
    obj["spec"]["replicatedJobs"][1]["template"] = 5
    with pytest.raises(DemandError) as error:
        compute_demand(builtin("JobSet"), obj)
    message = str(error.value)
    assert "WorkloadDefinition 'jobsets.jobset.x-k8s.io'" in message
    assert "spec.components[0].podTemplatePath" in message
    assert "JobSet paralleljobs" in message
    assert "Cannot index number" in message


def test_pod_set_names() -> None:
    assert PodSetDemand("worker", "g", 2, 1, (), 0, 0).name == "worker/g"
    assert PodSetDemand("master", None, 1, 1, (), 0, 0).total_gpus == 1
