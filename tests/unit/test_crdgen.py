"""CRDs are generated from the models, structural, self-describing and checked in up to date."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from colony.api import RESOURCES
from colony.api.base import ResourceDefinition
from colony.api.colony import ColonySpec
from colony.api.crdgen import crd_file_name, crd_for, render_crd_yaml
from colony.api.ddpjob import DDPJobSpec

REPO = Path(__file__).resolve().parents[2]
FORBIDDEN_KEYS = {"$ref", "$defs", "anyOf", "oneOf", "allOf", "title", "nullable"}


def _walk(node: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        yield path, node
        for name, prop in node.get("properties", {}).items():
            yield from _walk(prop, f"{path}.{name}")
        if isinstance(node.get("items"), dict):
            yield from _walk(node["items"], f"{path}[]")
        if isinstance(node.get("additionalProperties"), dict):
            yield from _walk(node["additionalProperties"], f"{path}{{}}")


def _schema(resource: ResourceDefinition) -> dict[str, Any]:
    schema: dict[str, Any] = crd_for(resource)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: r.kind)
@pytest.mark.parametrize("directory", ["crds", "charts/colony-operator/files/crds"])
def test_checked_in_crd_matches_models(resource: ResourceDefinition, directory: str) -> None:
    path = REPO / directory / crd_file_name(resource)
    assert path.read_text() == render_crd_yaml(resource), f"{path} is stale: run `make crds`"


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: r.kind)
def test_every_field_has_a_type_and_description(resource: ResourceDefinition) -> None:
    for path, node in _walk(_schema(resource)["properties"]["spec"], "spec"):
        assert (
            "type" in node
            or node.get("x-kubernetes-preserve-unknown-fields")
            or node.get("x-kubernetes-int-or-string")
        ), path
        if not path.endswith(("[]", "{}")):
            assert node.get("description"), f"{path} has no description"
    for path, node in _walk(_schema(resource)["properties"]["status"], "status"):
        if not path.endswith(("[]", "{}")):
            assert node.get("description"), f"{path} has no description"


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: r.kind)
def test_schema_is_structural(resource: ResourceDefinition) -> None:
    for path, node in _walk(_schema(resource), ""):
        assert not FORBIDDEN_KEYS & node.keys(), f"{path}: {FORBIDDEN_KEYS & node.keys()}"
        assert node.get("additionalProperties") is not False, path
        if node.get("x-kubernetes-list-type") == "map":
            keys = node["x-kubernetes-list-map-keys"]
            assert set(keys) <= set(node["items"].get("required", [])), f"{path}: map keys must be required"


def test_crd_names_and_columns() -> None:
    crds = {r.kind: crd_for(r) for r in RESOURCES}
    assert crds["Colony"]["metadata"]["name"] == "colonies.infra.exalsius.ai"
    assert crds["DDPJob"]["spec"]["group"] == "training.exalsius.ai"
    assert "gpr" in crds["GPUProvisioningRequest"]["spec"]["names"]["shortNames"]
    for crd in crds.values():
        version = crd["spec"]["versions"][0]
        assert version["subresources"] == {"status": {}}
        assert "Age" in {c["name"] for c in version["additionalPrinterColumns"]}
    for kind in ("Colony", "DDPJob", "GPUProvisioningRequest"):
        columns = crds[kind]["spec"]["versions"][0]["additionalPrinterColumns"]
        assert "Phase" in {c["name"] for c in columns}
    assert crds["GPUQueue"]["spec"]["scope"] == "Cluster"


def test_colony_schema_rules() -> None:
    spec = _schema(RESOURCES[0])["properties"]["spec"]
    clusters = spec["properties"]["colonyClusters"]
    assert clusters["minItems"] == 1
    assert clusters["x-kubernetes-list-map-keys"] == ["clusterName"]
    rules = [r["rule"] for r in clusters["items"]["x-kubernetes-validations"]]
    assert any("has(self.docker)" in r for r in rules)
    assert spec["properties"]["k8sVersion"]["pattern"].startswith("^v1")
    assert "k8sVersion" in spec["required"]


def _seed(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((REPO / "examples" / name).read_text())
    return document


def test_seed_examples_parse_with_the_models() -> None:
    aws = ColonySpec.model_validate(_seed("colony-aws.yaml")["spec"])
    assert aws.colony_clusters[0].provider == "aws"
    assert aws.colony_clusters[0].aws is not None and aws.colony_clusters[0].aws.region == "us-east-1"
    docker = ColonySpec.model_validate(_seed("colony-docker-ray.yaml")["spec"])
    assert docker.hosted_control_plane_enabled is True
    assert docker.additional_dependencies[0].spec.repo_url.startswith("https://ray-project")
    assert docker.additional_dependencies[0].spec.model_extra is None  # no pass-through fields
    job = DDPJobSpec.model_validate(_seed("ddpjob.yaml")["spec"])
    assert (job.parallelism, job.nproc_per_node, job.target_colony) == (2, 1, "test-colony")


def test_to_wire_round_trips_camel_case() -> None:
    spec = _seed("colony-aws.yaml")["spec"]
    wire = ColonySpec.model_validate(spec).to_wire()
    assert wire["k8sVersion"] == "v1.30.3"
    assert wire["colonyClusters"][0]["aws"]["instanceType"] == "g5.xlarge"
