"""WorkloadDefinitions: shipped data files, validation at load, the registry, a user-supplied kind."""

from __future__ import annotations

import copy
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from colony.api.crdgen import crd_for
from colony.api.workloaddefinition import WORKLOAD_DEFINITION
from colony.workloads.definition import (
    DefinitionError,
    DefinitionRegistry,
    WorkloadDefinition,
    definition_from_manifest,
    load_builtin_definitions,
)
from colony.workloads.demand import DemandError, RequestShape, compute_demand
from colony.workloads.pinning import pin_to_nodes
from colony.workloads.status import workload_phase

REPO = Path(__file__).resolve().parents[2]

SHIPPED = {
    ("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs", "kubeflow-training"),
    ("ray.io", "v1", "RayJob", "rayjobs", "kuberay"),
    ("ray.io", "v1", "RayCluster", "rayclusters", "kuberay"),
    ("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", "kubeflow-training"),
    ("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets", None),
}

# A made-up framework kind: roles, each with its own pod template and replica count.
FOO_DEFINITION: dict[str, Any] = {
    "apiVersion": "infra.exalsius.ai/v1",
    "kind": "WorkloadDefinition",
    "metadata": {"name": "footrainers.example.com"},
    "spec": {
        "target": {"group": "example.com", "version": "v1", "kind": "FooTrainer", "plural": "footrainers"},
        "components": [
            {
                "name": "role",
                "instancesPath": ".spec.roles[]",
                "instanceNamePath": ".name",
                "podTemplatePath": ".template",
                "replicasPath": ".count // 1",
            },
            {"name": "coordinator", "podTemplatePath": ".spec.coordinator", "replicasPath": "1"},
        ],
        "status": {
            "phasePath": ".status.stage",
            "mappings": {
                "failed": [{"phase": "Broken"}],
                "succeeded": [{"phase": "Done"}],
                "running": [{"expression": ".status.activeRoles | length > 0"}],
            },
        },
        "gangGroups": [{"name": "training", "members": ["role"]}],
    },
}


def _foo(roles: list[dict[str, Any]], status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "example.com/v1",
        "kind": "FooTrainer",
        "metadata": {"name": "foo", "namespace": "ml"},
        "spec": {"roles": roles, "coordinator": {"spec": {"containers": [{"name": "c"}]}}},
    }
    if status is not None:
        obj["status"] = status
    return obj


def _role(name: str, count: int, gpus: int, product: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "t", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}
    if product:
        spec["nodeSelector"] = {"nvidia.com/gpu.product": product}
    return {"name": name, "count": count, "template": {"metadata": {"labels": {"role": name}}, "spec": spec}}


def test_shipped_definitions() -> None:
    definitions = load_builtin_definitions()
    assert {(d.group, d.version, d.kind, d.plural, d.addon) for d in definitions} == SHIPPED
    assert all(d.builtin for d in definitions)
    assert all(d.name == d.crd_name == f"{d.plural}.{d.group}" for d in definitions)
    assert load_builtin_definitions() == definitions  # parsed once, a fresh list each time


def test_shipped_files_are_package_data_and_applyable_manifests() -> None:
    directory = resources.files("colony").joinpath("data", "workload-definitions")
    names = sorted(e.name for e in directory.iterdir() if e.name.endswith(".yaml"))
    assert len(names) == len(SHIPPED)
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"data/workload-definitions/*.yaml"' in pyproject
    for name in names:
        manifest = yaml.safe_load(directory.joinpath(name).read_text())
        assert name == f"{manifest['metadata']['name']}.yaml"
        assert (manifest["apiVersion"], manifest["kind"]) == ("infra.exalsius.ai/v1", "WorkloadDefinition")


def test_definition_round_trips_through_its_manifest() -> None:
    for definition in load_builtin_definitions():
        again = definition_from_manifest(definition.to_manifest(), builtin=True)
        assert again == definition


def test_crd() -> None:
    crd = crd_for(WORKLOAD_DEFINITION)
    assert crd["metadata"]["name"] == "workloaddefinitions.infra.exalsius.ai"
    assert crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["names"]["shortNames"] == ["wd"]
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    components = spec["properties"]["components"]
    assert components["x-kubernetes-list-map-keys"] == ["name"]  # names unique at admission
    matcher = spec["properties"]["status"]["properties"]["mappings"]["properties"]["failed"]["items"]
    assert "exactly one of phase" in matcher["x-kubernetes-validations"][0]["message"]
    assert matcher["properties"]["expected"] == {
        "default": True,
        "description": "Value the expression must yield (default true).",
        "x-kubernetes-preserve-unknown-fields": True,
    }


def _broken(**changes: Any) -> dict[str, Any]:
    manifest = copy.deepcopy(FOO_DEFINITION)
    for path, value in changes.items():
        node = manifest
        keys = path.split("__")
        for key in keys[:-1]:
            node = node[int(key)] if key.isdigit() else node[key]
        last = keys[-1]
        node[int(last) if last.isdigit() else last] = value
    return manifest


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        (
            _broken(spec__components__0__podTemplatePath=".template["),
            r"spec.components\[0\].podTemplatePath: jq expression '.template\[' does not compile: "
            r"jq: error: syntax error",
        ),
        (
            _broken(spec__components__1__replicasPath=".x |"),
            r"spec.components\[1\].replicasPath: jq expression '.x \|' does not compile",
        ),
        (
            _broken(spec__status__mappings__running__0__expression="length >"),
            r"spec.status.mappings.running\[0\].expression: jq expression 'length >' does not compile",
        ),
        (
            _broken(spec__components__1__podTemplatePath="{spec: .x}"),
            r"spec.components\[1\].podTemplatePath: '{spec: .x}' is not a jq path expression",
        ),
        (
            _broken(spec__components__1__name="role"),
            r"spec.components: component name 'role' is used 2 times",
        ),
        (
            _broken(spec__gangGroups=[{"name": "g", "members": ["role", "launcher"]}]),
            r"spec.gangGroups\[0\].members: 'launcher' is not a component \(components: role, coordinator\)",
        ),
        (
            _broken(spec__status__mappings__failed=[{"phase": "Broken", "expression": ".x"}]),
            r"spec.status.mappings.failed\[0\]: set exactly one of phase, conditions or expression",
        ),
        (
            _broken(spec__status__phasePath=None),
            r"spec.status.mappings.failed\[0\].phase: needs spec.status.phasePath",
        ),
        (
            _broken(spec__components__1__instanceNamePath=".name"),
            r"spec.components\[1\].instanceNamePath: needs instancesPath",
        ),
        (_broken(spec__components=[]), r"spec.components: List should have at least 1 item"),
        (_broken(spec__target={"group": "example.com"}), r"spec.target.version: Field required"),
        (_broken(apiVersion="infra.exalsius.ai/v2"), r"apiVersion: expected infra.exalsius.ai/v1"),
        (_broken(metadata={}), r"^WorkloadDefinition is invalid: metadata.name: required"),
    ],
)
def test_validation_errors_name_the_definition_and_field(manifest: dict[str, Any], message: str) -> None:
    with pytest.raises(DefinitionError, match=message) as error:
        definition_from_manifest(manifest)
    if manifest["metadata"]:
        assert str(error.value).startswith("WorkloadDefinition 'footrainers.example.com' is invalid: ")


def test_every_problem_is_reported_at_once() -> None:
    manifest = _broken(spec__components__0__podTemplatePath="][", spec__components__1__name="role")
    with pytest.raises(DefinitionError) as error:
        definition_from_manifest(manifest)
    assert "podTemplatePath" in str(error.value) and "used 2 times" in str(error.value)


def test_not_a_mapping() -> None:
    with pytest.raises(DefinitionError, match="must be a mapping"):
        definition_from_manifest(["spec"])  # type: ignore[arg-type]


def test_registry_user_definition_overrides_builtin_and_remove_restores_it() -> None:
    registry = DefinitionRegistry()
    builtin = registry.for_kind("kubeflow.org", "PyTorchJob")
    assert builtin is not None and builtin.builtin
    override = copy.deepcopy(builtin.to_manifest())
    override["metadata"]["name"] = "my-pytorchjobs"
    override["spec"]["components"] = [override["spec"]["components"][1]]  # workers only
    override["spec"]["gangGroups"] = []
    added = registry.add(override)
    assert not added.builtin
    assert registry.for_kind("kubeflow.org", "PyTorchJob") is added
    assert registry.for_object({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"}) is added
    assert len(registry) == len(SHIPPED)  # one definition in force per kind
    assert registry.get("my-pytorchjobs") is added
    assert registry.get("pytorchjobs.kubeflow.org") is builtin
    assert registry.remove("my-pytorchjobs") is added
    assert registry.remove("my-pytorchjobs") is None
    assert registry.for_kind("kubeflow.org", "PyTorchJob") is builtin


def test_registry_is_deterministic_among_user_definitions_of_one_kind() -> None:
    registry = DefinitionRegistry(builtins=())
    second = copy.deepcopy(FOO_DEFINITION)
    second["metadata"]["name"] = "b-foo"
    first = copy.deepcopy(FOO_DEFINITION)
    first["metadata"]["name"] = "a-foo"
    registry.add(second)
    registry.add(first)
    found = registry.for_kind("example.com", "FooTrainer")
    assert found is not None and found.name == "a-foo"
    assert [d.name for d in registry] == ["a-foo"]


def test_registry_rejects_invalid_user_definition_and_keeps_the_rest() -> None:
    registry = DefinitionRegistry()
    with pytest.raises(DefinitionError):
        registry.add(_broken(spec__components__0__podTemplatePath="]["))
    assert registry.for_kind("example.com", "FooTrainer") is None
    assert registry.for_kind("ray.io", "RayJob") is not None
    assert registry.for_kind("example.com", "Unknown") is None


def test_user_supplied_kind_works_without_code() -> None:
    registry = DefinitionRegistry()
    definition = registry.add(FOO_DEFINITION)
    assert isinstance(definition, WorkloadDefinition)
    obj = _foo([_role("trainer", 4, 8, "NVIDIA-H100-80GB-HBM3"), _role("evaluator", 1, 2, "H100")])
    found = registry.for_object(obj)
    assert found is definition
    demand = compute_demand(definition, obj)
    assert [(p.name, p.pods, p.gpus_per_pod, p.gpu_types) for p in demand.pod_sets] == [
        ("role/trainer", 4, 8, ("H100",)),
        ("role/evaluator", 1, 2, ("H100",)),
        ("coordinator", 1, 0, ()),
    ]
    assert demand.total_gpus == 34
    assert demand.request_shape() == RequestShape(nodes=5, gpus_per_node=8, gpu_types=("H100",))
    assert [(g.name, g.pods, g.total_gpus) for g in demand.gangs] == [("training", 5, 34)]

    assert workload_phase(definition, obj) == "Pending"
    assert workload_phase(definition, _foo([], {"activeRoles": ["trainer"]})) == "Running"
    assert workload_phase(definition, _foo([], {"stage": "Done", "activeRoles": ["x"]})) == "Succeeded"
    assert workload_phase(definition, _foo([], {"stage": "Broken"})) == "Failed"

    pinned = pin_to_nodes(definition, obj, {"pool": "p1"}, [{"key": "gpu", "operator": "Exists"}])
    for role in pinned["spec"]["roles"]:
        assert role["template"]["spec"]["nodeSelector"]["pool"] == "p1"
        assert role["template"]["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
        assert role["template"]["metadata"] == {"labels": {"role": role["name"]}}
    assert pinned["spec"]["coordinator"]["spec"]["nodeSelector"] == {"pool": "p1"}


def test_user_kind_missing_instances_reports_the_field() -> None:
    definition = definition_from_manifest(FOO_DEFINITION)
    obj = _foo([])
    del obj["spec"]["roles"]
    with pytest.raises(
        DemandError,
        match=r"spec.components\[0\].instancesPath '.spec.roles\[\]' failed on FooTrainer ml/foo: "
        r"Cannot iterate over null",
    ):
        compute_demand(definition, obj)
