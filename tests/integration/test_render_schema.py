"""Every object render_colony produces is accepted by the real API server with the upstream CRD
schemas (Cluster API, CAPD, CAPA, k0smotron, CAAPH), for both seed colonies and every provider and
control-plane mode: a server-side dry-run apply, so a wrong field name, type, enum value or missing
required field fails here, and nothing we render is pruned."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from colony.api.colony import ColonySpec
from colony.devenv.cluster import KubectlError, LocalCluster
from colony.render import ColonyRef, Manifest, RenderedColony, render_colony
from tests.unit.test_render_golden import ALLOWED_INSTANCE_PROFILES, CASES, EXAMPLES

SEED_FILES = {"seed-aws": "colony-aws.yaml", "seed-docker-ray": "colony-docker-ray.yaml"}
FIELD_MANAGER = "colony-operator"


def create_colony(management: LocalCluster, namespace: str, case: str) -> ColonyRef:
    """Create the case's Colony for real (seed examples from their files, unchanged) and return it."""
    name, spec, _ = CASES[case]()
    if case in SEED_FILES:
        management.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / SEED_FILES[case]))
    else:
        colony = {
            "apiVersion": "infra.exalsius.ai/v1",
            "kind": "Colony",
            "metadata": {"name": name},
            "spec": spec,
        }
        management.kubectl("apply", "-n", namespace, "-f", "-", input_text=json.dumps(colony))
    uid = management.get_json("colony", name, "-n", namespace)["metadata"]["uid"]
    return ColonyRef(name=name, namespace=namespace, uid=uid)


def render_for(management: LocalCluster, namespace: str, case: str) -> RenderedColony:
    ref = create_colony(management, namespace, case)
    name, spec, ports = CASES[case]()
    if case in SEED_FILES:  # render what the API server stored, as the operator would
        spec = management.get_json("colony", name, "-n", namespace)["spec"]
    return render_colony(
        ref, ColonySpec.model_validate(spec), ports, aws_instance_profiles=ALLOWED_INSTANCE_PROFILES
    )


def dry_run_apply(management: LocalCluster, namespace: str, objects: list[Manifest]) -> list[dict[str, Any]]:
    """Server-side apply with --dry-run=server, as the operator applies; the objects as stored.

    Validation is the server's: server-side apply rejects any field the schema does not declare
    ("field not declared in schema"), and the API server checks types, enums, patterns and required
    fields after defaulting. kubectl's client-side validator is off because it checks `required`
    before defaulting (K0smotronControlPlane.spec.etcd.image is required but has a default).
    """
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    result = management.kubectl(
        "apply",
        "--server-side",
        "--dry-run=server",
        "--force-conflicts",
        f"--field-manager={FIELD_MANAGER}",
        "--validate=false",
        "-n",
        namespace,
        "-o",
        "json",
        "-f",
        "-",
        input_text=text,
    )
    output = json.loads(result.stdout)
    items: list[dict[str, Any]] = output["items"] if output.get("kind") == "List" else [output]
    return items


def missing(rendered: Any, stored: Any, path: str = "") -> list[str]:
    """Paths of values in `rendered` that the server dropped or changed (defaults may be added)."""
    if isinstance(rendered, dict):
        if not isinstance(stored, dict):
            return [path]
        return [
            p for key, value in rendered.items() for p in missing(value, stored.get(key), f"{path}.{key}")
        ]
    if isinstance(rendered, list):
        if not isinstance(stored, list) or len(stored) != len(rendered):
            return [path]
        return [
            p
            for i, (r, s) in enumerate(zip(rendered, stored, strict=True))
            for p in missing(r, s, f"{path}[{i}]")
        ]
    return [] if rendered == stored else [f"{path}: {rendered!r} != {stored!r}"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_rendered_object_is_accepted_unpruned(
    management: LocalCluster, unwatched_namespace: str, case: str
) -> None:
    namespace = unwatched_namespace
    rendered = render_for(management, namespace, case)
    assert rendered.problems == ()
    objects = [m for cluster in rendered.clusters for m in cluster.manifests] + list(rendered.addons)
    stored = dry_run_apply(management, namespace, objects)
    assert [(s["kind"], s["metadata"]["name"]) for s in stored] == [
        (o["kind"], o["metadata"]["name"]) for o in objects
    ]
    for obj, back in zip(objects, stored, strict=True):
        assert missing(obj["spec"], back["spec"]) == [], f"{obj['kind']}/{obj['metadata']['name']}"
        assert missing(obj["metadata"]["labels"], back["metadata"]["labels"]) == []
        assert back["metadata"]["ownerReferences"] == obj["metadata"]["ownerReferences"]
    # Dry run: nothing was stored.
    assert management.kubectl("get", "clusters.cluster.x-k8s.io", "-n", namespace, "-o", "name").stdout == ""


def test_dry_run_rejects_what_the_upstream_schema_does_not_know(
    management: LocalCluster, unwatched_namespace: str
) -> None:
    """The control: the same path fails on an unknown field and on a missing required field."""
    namespace = unwatched_namespace
    rendered = render_for(management, namespace, "docker-hosted")
    objects = [m for m in rendered.clusters[0].manifests]
    control_plane = next(o for o in objects if o["kind"] == "K0smotronControlPlane")
    unknown = copy.deepcopy(control_plane)
    unknown["spec"]["service"]["apiPorts"] = 1
    with pytest.raises(KubectlError) as rejected:
        dry_run_apply(management, namespace, [unknown])
    assert ".spec.service.apiPorts: field not declared in schema" in rejected.value.stderr
    deployment = copy.deepcopy(next(o for o in objects if o["kind"] == "MachineDeployment"))
    del deployment["spec"]["template"]["spec"]["clusterName"]
    with pytest.raises(KubectlError) as incomplete:
        dry_run_apply(management, namespace, [deployment])
    assert "spec.template.spec.clusterName: Required value" in incomplete.value.stderr


def test_seed_examples_are_the_files_on_disk() -> None:
    for case, file_name in SEED_FILES.items():
        document = yaml.safe_load(Path(EXAMPLES / file_name).read_text())
        assert (document["metadata"]["name"], document["spec"]) == CASES[case]()[:2]
