"""Hostile framework objects against the pure demand parser (issue 17, per-object isolation).

A placement pass reads every selected object through `compute_demand`; whatever a tenant writes
there (huge or negative quantities, wrong types, missing fields, deep nesting) must either parse or
raise the project's own `DemandError`, so the pass can mark that one object and go on. Anything
else (decimal.Overflow, AttributeError, RecursionError...) would stop the pass for every tenant.
"""

from __future__ import annotations

import contextlib
import copy
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
def test_hostile_quantities_raise_value_error(value: Any) -> None:
    with pytest.raises(ValueError):
        parse_quantity(value)


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
