"""User jq expressions bounded: output bounds in jqexpr, and the worker process of
colony.workloads.sandbox (time bound, memory bound, checks once per spec, cached readings).

These tests start the real worker process (a child Python), no mocks."""

from __future__ import annotations

import copy
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from colony.workloads import jqexpr
from colony.workloads.definition import DefinitionError, WorkloadDefinition, load_builtin_definitions
from colony.workloads.demand import compute_demand
from colony.workloads.pinning import pod_template_paths, strip_for_copy
from colony.workloads.sandbox import ExpressionSandbox, Limits
from colony.workloads.status import workload_phase
from tests.unit.workload_examples import builtin, example

TIMEOUT = 0.5

WIDGET: dict[str, Any] = {
    "apiVersion": "infra.exalsius.ai/v1",
    "kind": "WorkloadDefinition",
    "metadata": {"name": "widgets.example.com", "generation": 1},
    "spec": {
        "target": {"group": "example.com", "version": "v1", "kind": "Widget", "plural": "widgets"},
        "components": [
            {"name": "worker", "podTemplatePath": ".spec.template", "replicasPath": ".spec.replicas // 1"}
        ],
        "status": {"phasePath": ".status.state", "mappings": {"running": [{"phase": "Spinning"}]}},
    },
}


def _widget(replicas_path: str) -> dict[str, Any]:
    manifest = copy.deepcopy(WIDGET)
    manifest["spec"]["components"][0]["replicasPath"] = replicas_path
    return manifest


def _object(name: str, version: str = "1", **spec: Any) -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}", "resourceVersion": version},
        "spec": {"template": pod, **spec},
        "status": {"state": "Spinning"},
    }


@pytest.fixture
async def sandbox() -> AsyncIterator[ExpressionSandbox]:
    box = ExpressionSandbox(Limits(timeout_s=TIMEOUT))
    try:
        yield box
    finally:
        await box.close()


# -- output bounds (in process) ---------------------------------------------------------------------


def test_normal_results_are_unchanged() -> None:
    assert jqexpr.evaluate_all(".a[] | .b", {"a": [{"b": 1}, {"b": "x"}, {"b": None}]}) == [1, "x", None]
    assert jqexpr.evaluate_all("empty", {}) == []


@pytest.mark.parametrize(
    "expression",
    [
        "range(100000)",  # too many results
        '"x" * 10000000',  # one huge string
        "[range(200000)]",  # one huge array
    ],
)
def test_outputs_past_the_bounds_fail(expression: str) -> None:
    with pytest.raises(jqexpr.OutputTooLarge, match="yields more than"):
        jqexpr.evaluate_all(expression, None)


def test_outputs_just_within_the_bounds_pass() -> None:
    assert len(jqexpr.evaluate_all(f"range({jqexpr.MAX_OUTPUTS})", None)) == jqexpr.MAX_OUTPUTS


# -- definitions checked in the worker ---------------------------------------------------------------


async def test_a_valid_definition_is_accepted(sandbox: ExpressionSandbox) -> None:
    definition = await sandbox.definition(WIDGET)
    assert isinstance(definition, WorkloadDefinition)
    assert definition.kind == "Widget"


async def test_endless_recursion_is_rejected_within_the_bound(sandbox: ExpressionSandbox) -> None:
    started = time.monotonic()
    with pytest.raises(DefinitionError) as raised:
        await sandbox.definition(_widget("def f: f; f"))
    message = str(raised.value)
    assert "spec.components[0].replicasPath" in message
    assert "'def f: f; f'" in message
    assert f"did not finish within {TIMEOUT:g}s on a probe input" in message
    assert time.monotonic() - started < TIMEOUT + 10  # worker start included, on a slow machine
    assert sandbox.restarts == 1
    # the worker was replaced: the next definition is checked normally
    assert (await sandbox.definition(WIDGET)).name == "widgets.example.com"


async def test_huge_output_is_rejected(sandbox: ExpressionSandbox) -> None:
    with pytest.raises(DefinitionError, match=r"replicasPath: jq expression .* yields more than"):
        await sandbox.definition(_widget('"x" * 2000000'))


async def test_a_non_compiling_expression_is_rejected(sandbox: ExpressionSandbox) -> None:
    with pytest.raises(DefinitionError, match=r"replicasPath: jq expression '\.\[\[\[' does not compile"):
        await sandbox.definition(_widget(".[[["))


async def test_a_non_path_template_expression_is_rejected(sandbox: ExpressionSandbox) -> None:
    manifest = copy.deepcopy(WIDGET)
    manifest["spec"]["components"][0]["podTemplatePath"] = ".spec.template | tostring"
    with pytest.raises(DefinitionError, match=r"podTemplatePath: .* is not a jq path expression"):
        await sandbox.definition(manifest)


async def test_verdicts_are_cached_per_spec(sandbox: ExpressionSandbox) -> None:
    await sandbox.definition(WIDGET)
    with pytest.raises(DefinitionError):
        await sandbox.definition(_widget("def f: f; f"))
    evaluations, restarts = sandbox.evaluations, sandbox.restarts
    started = time.monotonic()
    await sandbox.definition(WIDGET)
    with pytest.raises(DefinitionError, match="did not finish"):
        await sandbox.definition(_widget("def f: f; f"))
    assert (sandbox.evaluations, sandbox.restarts) == (evaluations, restarts)
    assert time.monotonic() - started < TIMEOUT


# -- objects read in the worker ----------------------------------------------------------------------

EXAMPLES = [
    ("PyTorchJob", "pytorchjob/imagenet.yaml"),
    ("RayJob", "rayjob/ray-job.sample.yaml"),
    ("RayCluster", "raycluster/ray-cluster.verl.yaml"),
    ("JobSet", "jobset/resnet.yaml"),
    ("LeaderWorkerSet", "leaderworkerset/vllm-gpu-lws.yaml"),
]


async def test_readings_equal_the_in_process_results(sandbox: ExpressionSandbox) -> None:
    pairs = []
    for index, (kind, path) in enumerate(EXAMPLES):
        obj = example(path)
        obj["metadata"].update(uid=f"u{index}", resourceVersion="7", namespace="team")
        pairs.append((builtin(kind), obj))
    readings = await sandbox.read_objects(pairs)
    phases = await sandbox.read_phases(pairs)
    for (definition, obj), reading, phase in zip(pairs, readings, phases, strict=True):
        assert reading.demand == compute_demand(definition, obj)
        expected = pod_template_paths(definition, strip_for_copy(obj))
        assert [list(p) for p in reading.template_paths or ()] == expected
        assert phase.phase == workload_phase(definition, obj)
    assert len(load_builtin_definitions()) >= len(EXAMPLES)


async def test_an_object_that_makes_an_expression_loop_fails_alone(sandbox: ExpressionSandbox) -> None:
    """An expression that loops only on some objects passes the probes; on such an object the
    worker is killed at the bound, that object gets an error, and the others are read."""
    definition = await sandbox.definition(_widget("if .spec.loop then (def f: f; f) else .spec.replicas end"))
    objects = [_object("a", replicas=1), _object("evil", loop=True), _object("c", replicas=3)]
    readings = await sandbox.read_objects([(definition, o) for o in objects])
    assert [r.demand.gpu_pods if r.demand else None for r in readings] == [1, None, 3]
    error = readings[1].demand_error or ""
    assert "Widget team/evil" in error and f"did not finish within {TIMEOUT:g}s" in error
    assert sandbox.restarts == 1
    # cached by resourceVersion: the looping object is not evaluated again, a new version is
    again = await sandbox.read_objects([(definition, o) for o in objects])
    assert again == readings and sandbox.restarts == 1
    fixed = _object("evil", version="2", replicas=2)
    (reading,) = await sandbox.read_objects([(definition, fixed)])
    assert reading.demand is not None and reading.demand.gpu_pods == 2


async def test_readings_are_cached_until_swept(sandbox: ExpressionSandbox) -> None:
    definition = await sandbox.definition(WIDGET)
    pairs = [(definition, _object(f"o{i}", replicas=i)) for i in range(5)]
    first = await sandbox.read_objects(pairs)
    evaluations = sandbox.evaluations
    sandbox.sweep()
    assert await sandbox.read_objects(pairs[:2]) == first[:2]
    assert sandbox.evaluations == evaluations
    sandbox.sweep()  # o2..o4 were not asked for since the last sweep: forgotten
    await sandbox.read_objects(pairs)
    assert sandbox.evaluations == evaluations + 3


async def test_the_worker_memory_is_bounded() -> None:
    """An expression that allocates past the worker's address space ends the worker, not the
    operator; the object gets an error and a new worker serves the next call."""
    box = ExpressionSandbox(Limits(timeout_s=20, memory_mb=200))
    try:
        definition = await box.definition(_widget("if .spec.big then [range(1e8)] | length else 1 end"))
        (reading,) = await box.read_objects([(definition, _object("big", big=True))])
        assert "stopped the expression worker" in (reading.demand_error or "")
        (reading,) = await box.read_objects([(definition, _object("small"))])
        assert reading.demand is not None
    finally:
        await box.close()


@pytest.mark.parametrize(
    "expression",
    [
        'import "data" as $d {search: "/etc"}; $d',
        'include "lib" {search: "/"}; .',
        '  # a comment first\n import "x" as $x; $x',
    ],
)
def test_module_directives_that_read_files_are_refused(expression: str) -> None:
    with pytest.raises(jqexpr.JqError, match="module directives"):
        jqexpr.check(expression)


async def test_the_worker_sees_no_operator_environment(
    sandbox: ExpressionSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLONY_TEST_SECRET", "s3cr3t")
    definition = await sandbox.definition(_widget('$ENV.COLONY_TEST_SECRET // env.HOME // "none"'))
    (reading,) = await sandbox.read_objects([(definition, _object("env"))])
    assert "s3cr3t" not in str(reading)
    assert "must be a whole number" in (reading.demand_error or "") and "none" in (reading.demand_error or "")
