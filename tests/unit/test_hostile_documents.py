"""Hostile tenant documents against the pure parsers the loops read them with (issue 17,
per-object isolation).

A placement pass reads every selected object through `compute_demand` (quantities through
`parse_quantity`); the GPR loop validates each request's spec (`GPRSpec`, its errors pydantic's
ValidationError) and turns it into the core's view (`gpu_request`, `running_request`, and a
GPUQueue's `queue_quota`). Whatever a tenant writes there (huge or negative quantities, wrong
types, missing fields, deep nesting) must either parse or raise the project's own error type
(`DemandError`, `ObjectError`, a spec's ValidationError), so the loop can mark that one object and
go on. Anything else (decimal.Overflow, AttributeError, RecursionError...) would stop the pass for
every tenant.

Trusted, not fuzzed here: Nodes (written by kubelets and the cluster admin) and the operator's own
kubeconfig parsing (tests/unit/test_safe_kubeconfig.py).
"""

from __future__ import annotations

import contextlib
import copy
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from colony.api.gpr import GPRSpec
from colony.scheduling.queueing.objects import ObjectError, gpu_request, queue_quota, running_request
from colony.workloads.demand import (
    MAX_QUANTITY,
    DemandError,
    compute_demand,
    parse_quantity,
    pod_resources,
)
from tests.unit.test_workload_demand import UPSTREAM
from tests.unit.workload_examples import builtin, example

HOSTILE_QUANTITIES = [
    "1e999999999",
    "-1e999999999",
    "9" * 200,
    "1e-999999999",
    "1E30000Ki",
    "99999999999999999999Ei",
    10**400,
    float("inf"),
    float("nan"),
    "",
    "1..0",
    True,
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([q for q in HOSTILE_QUANTITIES if isinstance(q, str)]),
    st.text(max_size=12),
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(
                [
                    "spec",
                    "containers",
                    "resources",
                    "limits",
                    "requests",
                    "nvidia.com/gpu",
                    "cpu",
                    "memory",
                    "replicas",
                    "template",
                    "initContainers",
                    "overhead",
                    "nodeSelector",
                    "affinity",
                    "x",
                ]
            ),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=20,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON-like document (dict keys and list indexes)."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*prefix, index))
    return found


def _replace(document: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(document)
    parent: Any = changed
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return changed


@pytest.mark.parametrize("value", HOSTILE_QUANTITIES, ids=repr)
def test_hostile_quantities_raise_demand_error(value: Any) -> None:
    with pytest.raises(DemandError):
        parse_quantity(value)


quantity_like = st.one_of(
    scalars,
    st.from_regex(
        r"\A[+-]?[0-9]{0,25}(\.[0-9]{0,25})?([eE][+-]?[0-9]{1,12})?(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?\Z"
    ),
    st.decimals(allow_nan=True, allow_infinity=True).map(str),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=quantity_like)
def test_any_quantity_parses_within_bounds_or_raises_demand_error(value: Any) -> None:
    try:
        parsed = parse_quantity(value)
    except DemandError:
        return
    assert parsed.is_finite() and abs(parsed) <= MAX_QUANTITY


def test_the_largest_quantity_still_parses() -> None:
    assert parse_quantity(str(MAX_QUANTITY)) == MAX_QUANTITY
    assert parse_quantity("7Ei") == Decimal(7 * 1024**6)


def test_a_negative_request_is_an_error() -> None:
    with pytest.raises(ValueError, match="cpu must not be negative"):
        pod_resources({"containers": [{"resources": {"requests": {"cpu": "-5"}}}]})


def test_a_cpu_of_1e999999999_is_a_demand_error_naming_the_object() -> None:
    obj = example("pytorchjob/pytorch_job_mnist_nccl.yaml")
    template = obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
    template["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1e999999999"}}
    with pytest.raises(DemandError, match="quantity out of range"):
        compute_demand(builtin("PyTorchJob"), obj)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pod_spec=documents)
def test_pod_resources_parse_or_raise_value_error(pod_spec: Any) -> None:
    with contextlib.suppress(ValueError):
        pod_resources(pod_spec)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), hostile=documents)
def test_any_subtree_of_an_upstream_example_replaced_parses_or_raises_demand_error(
    data: st.DataObject, hostile: Any
) -> None:
    relative = data.draw(st.sampled_from(sorted(UPSTREAM)))
    kind = UPSTREAM[relative][0]
    original = example(relative)
    spec_paths = [p for p in _paths(original) if len(p) > 1 and p[0] == "spec"]
    path = data.draw(st.sampled_from(spec_paths))
    obj = _replace(original, path, hostile)
    try:
        demand = compute_demand(builtin(kind), obj)
    except DemandError:
        return
    with contextlib.suppress(DemandError):
        demand.request_shape()


def test_deeply_nested_spec_is_a_demand_error_or_parses() -> None:
    deep: Any = "1"
    for _ in range(5000):
        deep = {"x": [deep]}
    obj = example("pytorchjob/pytorch_job_mnist_nccl.yaml")
    obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["resources"] = deep
    with pytest.raises(DemandError):
        compute_demand(builtin("PyTorchJob"), obj)


# -- GPU provisioning requests and queues (the GPR loop) ---------------------------------------------

spec_values = st.one_of(
    scalars,
    st.sampled_from(["H100", "A100", "*", "1h", "30m", "1d2h", "-1", "0", "1e999999999", "team/pool"]),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.lists(st.one_of(st.text(max_size=8), st.integers(), st.none()), max_size=3),
    documents,
)


valid_gpr_specs = st.fixed_dictionaries(
    {"numberOfGPUs": st.integers(1, 8)},
    optional={
        "gpuShape": st.sampled_from(["H100", "A100", "*", "L40S"]),
        "gpuShapes": st.lists(st.sampled_from(["H100", "A100", "*"]), max_size=2),
        "numberOfGPUNodes": st.integers(1, 4),
        "priority": st.integers(0, 300),
        "exitDuration": st.sampled_from(["1h", "30m", "1d2h3m4s"]),
        "idleTimeOutDuration": st.sampled_from(["10m", "1h"]),
        "enableEviction": st.booleans(),
        "autoProvision": st.booleans(),
        "maxPricePerHour": st.floats(0, 100),
        "colonies": st.lists(st.sampled_from(["pool", "other/pool"]), max_size=3),
        "fillAndSpill": st.booleans(),
        "queueName": st.sampled_from(["gold"]),
        "requeueOnFailure": st.booleans(),
    },
)
GPR_FIELDS = ["numberOfGPUs", "gpuShape", "gpuShapes", "numberOfGPUNodes", "priority", "exitDuration"]
GPR_FIELDS += ["idleTimeOutDuration", "maxPricePerHour", "colonies", "fillAndSpill", "queueName", "x"]
gpr_specs = st.one_of(
    valid_gpr_specs,
    st.tuples(valid_gpr_specs, st.sampled_from(GPR_FIELDS), spec_values).map(
        lambda t: {**t[0], t[1]: t[2]}  # one field replaced by anything
    ),
)


def _request(spec: Any, status: Any = None, metadata: Any = None) -> dict[str, Any]:
    meta = {"name": "r", "namespace": "team", "creationTimestamp": "2026-12-06T00:00:00Z"}
    return {"metadata": metadata if metadata is not None else meta, "spec": spec, "status": status or {}}


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=st.one_of(gpr_specs, documents))
def test_a_gpr_spec_validates_or_is_rejected_and_a_valid_one_is_read_by_the_core(spec: Any) -> None:
    """The loop's order: `GPRSpec` validation first (an invalid spec fails the request), then the
    core's view of a valid one, which must never fail."""
    try:
        GPRSpec.model_validate(spec)
    except ValidationError:
        with contextlib.suppress(ObjectError):
            gpu_request(_request(spec), "q", None)  # read without validation: still only ObjectError
        return
    request = gpu_request(_request(spec), "q", None)
    assert request.nodes >= 1 and request.gpus_per_node >= 1
    event("valid spec")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(status=documents, metadata=documents, allocation=st.lists(documents, max_size=3))
def test_a_running_request_with_any_status_is_read_or_raises_object_error(
    status: Any, metadata: Any, allocation: Any
) -> None:
    valid = {"gpuShape": "H100", "numberOfGPUs": 2}
    for current in (status, {"phase": "Ready", "colony": "team/pool", "nodes": allocation}):
        with contextlib.suppress(ObjectError):
            running_request(_request(valid, current), "q")
        with contextlib.suppress(ObjectError):
            running_request(_request(valid, current, metadata), "q")


queue_specs = st.dictionaries(
    st.sampled_from(["quotas", "cohort", "fairSharingWeight", "queueingStrategy", "namespaces", "x"]),
    st.one_of(
        spec_values,
        st.lists(
            st.dictionaries(
                st.sampled_from(["gpuType", "nominal", "borrowingLimit", "x"]), spec_values, max_size=3
            ),
            max_size=3,
        ),
    ),
    max_size=4,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=st.one_of(queue_specs, documents), metadata=st.one_of(st.just({"name": "gold"}), documents))
def test_a_gpu_queue_is_read_or_raises_object_error(spec: Any, metadata: Any) -> None:
    with contextlib.suppress(ObjectError):
        queue_quota({"metadata": metadata, "spec": spec})


def test_object_errors_name_the_kind_and_what_was_wrong() -> None:
    with pytest.raises(ObjectError, match=r"malformed GPUQueue: .*nominal"):
        queue_quota({"metadata": {"name": "gold"}, "spec": {"quotas": [{"gpuType": "H100"}]}})
    with pytest.raises(ObjectError, match="malformed GPUProvisioningRequest: ValueError: not a duration"):
        gpu_request(_request({"numberOfGPUs": 1, "exitDuration": "soon"}), "q", None)
