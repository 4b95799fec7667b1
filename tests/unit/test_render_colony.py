"""Invariants of everything render_colony produces, and its per-provider behaviour."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from colony.api.colony import ColonySpec
from colony.labels import CLUSTER_LABEL, COLONY_LABEL
from colony.render import HostedControlPlanePorts, Manifest, RenderedColony, render_colony
from colony.render.names import name_problem
from tests.unit.test_render_golden import CASES, NAMESPACE, colony_ref, docker, remote, render_case

RENDER_PACKAGE = Path(__file__).resolve().parents[2] / "src" / "colony" / "render"


def all_manifests(rendered: RenderedColony) -> Iterator[Manifest]:
    for cluster in rendered.clusters:
        yield from cluster.manifests
    yield from rendered.addons


def by_kind(rendered: RenderedColony, kind: str) -> list[Manifest]:
    return [m for m in all_manifests(rendered) if m["kind"] == kind]


def render(
    name: str, spec: dict[str, Any], ports: dict[str, HostedControlPlanePorts] | None = None
) -> RenderedColony:
    return render_colony(colony_ref(name), ColonySpec.model_validate(spec), ports or {})


@pytest.mark.parametrize("case", sorted(CASES))
def test_objects_stay_in_the_colony_namespace_and_are_owned_by_it(case: str) -> None:
    rendered = render_case(case)
    name = CASES[case]()[0]
    for obj in all_manifests(rendered):
        assert obj["metadata"]["namespace"] == NAMESPACE
        assert obj["metadata"]["ownerReferences"] == [colony_ref(name).owner_reference()]
        assert obj["metadata"]["labels"][COLONY_LABEL] == name


@pytest.mark.parametrize("case", sorted(CASES))
def test_all_names_are_dns_compliant_and_unique_per_kind(case: str) -> None:
    rendered = render_case(case)
    keys = [(m["kind"], m["metadata"]["name"]) for m in all_manifests(rendered)]
    assert len(keys) == len(set(keys))
    for _, name in keys:
        assert name_problem(name) is None


@pytest.mark.parametrize("case", sorted(CASES))
def test_seeds_and_variants_render_without_problems(case: str) -> None:
    assert render_case(case).problems == ()


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_reference_points_at_a_rendered_object(case: str) -> None:
    rendered = render_case(case)
    for cluster in rendered.clusters:
        present = {
            (m["apiVersion"].split("/")[0], m["kind"], m["metadata"]["name"]) for m in cluster.manifests
        }
        for ref in _contract_refs(list(cluster.manifests)):
            assert (ref["apiGroup"], ref["kind"], ref["name"]) in present, ref
        for cp in (m for m in cluster.manifests if m["kind"] == "K0sControlPlane"):
            ref = cp["spec"]["machineTemplate"]["infrastructureRef"]
            assert ref["namespace"] == NAMESPACE
            assert (ref["apiVersion"].split("/")[0], ref["kind"], ref["name"]) in present


def _contract_refs(node: Any) -> Iterator[dict[str, str]]:
    if isinstance(node, dict):
        if {"apiGroup", "kind", "name"} <= node.keys():
            yield node
        for value in node.values():
            yield from _contract_refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _contract_refs(value)


@pytest.mark.parametrize("case", sorted(CASES))
def test_helm_chart_proxies_select_exactly_the_colonys_clusters(case: str) -> None:
    rendered = render_case(case)
    clusters = by_kind(rendered, "Cluster")
    for proxy in rendered.addons:
        selector = proxy["spec"]["clusterSelector"]["matchLabels"]
        for cluster in clusters:
            assert selector.items() <= cluster["metadata"]["labels"].items()


def test_selectors_do_not_match_another_colonys_clusters() -> None:
    first, second = render("first", docker(True)), render("second", docker(True))
    for proxy in first.addons:
        selector = proxy["spec"]["clusterSelector"]["matchLabels"]
        for cluster in by_kind(second, "Cluster"):
            assert not selector.items() <= cluster["metadata"]["labels"].items()


def test_machine_deployment_selector_matches_its_template_without_ownership_labels() -> None:
    (deployment,) = by_kind(render_case("docker-machines"), "MachineDeployment")
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert deployment["spec"]["template"]["metadata"]["labels"] == selector
    assert COLONY_LABEL not in selector  # Machines of the MachineDeployment are not ours to prune
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["template"]["spec"]["version"] == "v1.31.4"


def test_versions_are_mapped_per_component() -> None:
    hosted, machines = render_case("docker-hosted"), render_case("docker-machines")
    assert by_kind(hosted, "K0smotronControlPlane")[0]["spec"]["version"] == "v1.31.4-k0s.0"
    assert by_kind(machines, "K0sControlPlane")[0]["spec"]["version"] == "v1.31.4+k0s.0"
    template = by_kind(machines, "K0sWorkerConfigTemplate")[0]
    assert template["spec"]["template"]["spec"]["version"] == "v1.31.4+k0s.0"


def test_hosted_control_plane_uses_recorded_ports_and_external_address() -> None:
    rendered = render_case("docker-hosted")
    (cp,) = by_kind(rendered, "K0smotronControlPlane")
    assert cp["metadata"]["name"] == "dev-dev-cp"
    assert cp["spec"]["service"] == {"type": "NodePort", "apiPort": 31443, "konnectivityPort": 31132}
    assert rendered.clusters[0].hosted_ports == HostedControlPlanePorts(31443, 31132)
    (aws_cp,) = by_kind(render_case("aws-hosted"), "K0smotronControlPlane")
    assert aws_cp["spec"]["externalAddress"] == "203.0.113.10"


def test_missing_ports_are_allocated_deterministically_and_avoid_recorded_ones() -> None:
    spec = docker(True)
    spec["colonyClusters"].append({"clusterName": "two", "docker": {"replicas": 1}})
    first = render("dev", spec, {"dev": HostedControlPlanePorts(31443, 31132)})
    allocated = first.clusters[1].hosted_ports
    assert allocated is not None
    assert {allocated.api, allocated.konnectivity}.isdisjoint({31443, 31132})
    assert render("dev", spec, {"dev": HostedControlPlanePorts(31443, 31132)}) == first


def test_non_hosted_control_plane_runs_on_the_providers_machines() -> None:
    rendered = render_case("aws-machines")
    assert rendered.clusters[0].hosted_ports is None
    (cp,) = by_kind(rendered, "K0sControlPlane")
    assert cp["spec"]["replicas"] == 1
    assert cp["spec"]["machineTemplate"]["infrastructureRef"]["kind"] == "AWSMachineTemplate"
    (cluster,) = by_kind(rendered, "Cluster")
    assert cluster["spec"]["controlPlaneRef"]["kind"] == "K0sControlPlane"
    (infra,) = by_kind(rendered, "AWSCluster")
    assert "annotations" not in infra["metadata"]  # CAPA builds the network and API load balancer


def test_hosted_infrastructure_is_marked_externally_managed() -> None:
    for case, kind in (("docker-hosted", "DockerCluster"), ("aws-hosted", "AWSCluster")):
        (infra,) = by_kind(render_case(case), kind)
        assert infra["metadata"]["annotations"] == {"cluster.x-k8s.io/managed-by": "k0smotron"}


def test_aws_machine_template_carries_the_spec() -> None:
    (template,) = by_kind(render_case("aws-hosted"), "AWSMachineTemplate")
    machine = template["spec"]["template"]["spec"]
    assert machine["ami"] == {"id": "ami-0123456789abcdef0"}
    assert machine["instanceType"] == "g5.2xlarge"
    assert machine["sshKeyName"] == "ops"
    assert machine["iamInstanceProfile"] == "gpu-nodes"
    (plain,) = by_kind(render_case("aws-machines"), "AWSMachineTemplate")
    assert "ami" not in plain["spec"]["template"]["spec"]
    assert "sshKeyName" not in plain["spec"]["template"]["spec"]


def test_kubeconfig_of_capi_and_existing_clusters() -> None:
    capi = render_case("seed-aws").clusters[0]
    assert (capi.kubeconfig_secret, capi.kubeconfig_key) == ("test-colony-aws-cluster-kubeconfig", "value")
    existing = render_case("existing").clusters[0]
    assert existing.capi_cluster_name is None
    assert existing.manifests == ()
    assert (existing.kubeconfig_secret, existing.kubeconfig_key) == ("onprem-kubeconfig", "config")


def test_remote_hosts_become_machines_named_stably() -> None:
    rendered = render_case("remote-two-hosts")
    machines = by_kind(rendered, "RemoteMachine")
    assert [m["spec"]["address"] for m in machines] == ["10.0.0.11", "gpu2.lab.example.com"]
    assert machines[1]["spec"] == {
        "address": "gpu2.lab.example.com",
        "port": 2222,
        "user": "ubuntu",
        "useSudo": True,
        "sshKeyRef": {"name": "gpu2-ssh"},
    }
    assert len(by_kind(rendered, "Machine")) == len(by_kind(rendered, "K0sWorkerConfig")) == 2
    # Dropping the first host keeps the second host's objects under the same names.
    spec = remote()
    del spec["colonyClusters"][0]["remote"]["hosts"][0]
    remaining = by_kind(render("onprem", spec), "RemoteMachine")
    assert [m["metadata"]["name"] for m in remaining] == [machines[1]["metadata"]["name"]]


def test_remote_ssh_key_outside_key_value_is_a_problem() -> None:
    spec = remote()
    spec["colonyClusters"][0]["remote"]["hosts"][0]["sshKeySecretRef"]["key"] = "id_ed25519"
    rendered = render("onprem", spec)
    (problem,) = rendered.problems
    assert "'id_ed25519'" in problem and "'value'" in problem and problem.startswith("cluster 'lab':")
    assert rendered.clusters[0].problems == (problem.removeprefix("cluster 'lab': "),)
    assert len(by_kind(rendered, "RemoteMachine")) == 2  # still rendered


def test_duplicate_remote_host_is_a_problem() -> None:
    spec = remote()
    hosts = spec["colonyClusters"][0]["remote"]["hosts"]
    hosts.append(dict(hosts[0]))
    rendered = render("onprem", spec)
    assert any("listed twice" in p for p in rendered.problems)
    assert len(by_kind(rendered, "RemoteMachine")) == 2


def test_remote_clusters_always_get_a_hosted_control_plane() -> None:
    spec = remote()
    spec["hostedControlPlaneEnabled"] = False
    rendered = render("onprem", spec)
    assert len(by_kind(rendered, "K0smotronControlPlane")) == 1
    assert rendered.clusters[0].hosted_ports is not None
    assert any("hostedControlPlaneEnabled is false" in p for p in rendered.problems)


def test_too_long_names_are_a_problem_not_invalid_objects() -> None:
    spec = docker(False)
    spec["colonyClusters"][0]["clusterName"] = "c" * 40
    rendered = render("colony-with-a-rather-long-name", spec)
    cluster = rendered.clusters[0]
    assert cluster.manifests == ()
    assert any("at most 63" in p for p in cluster.problems)
    assert rendered.addons  # the rest of the colony still renders


def test_mixed_colony_renders_every_provider_side_by_side() -> None:
    spec = docker(True)
    spec["colonyClusters"] += [
        {"clusterName": "cloud", "aws": {"replicas": 1, "region": "us-east-1", "instanceType": "g5.xlarge"}},
        remote()["colonyClusters"][0],
        {"clusterName": "old", "existing": {"kubeconfigSecretRef": {"name": "old-kubeconfig"}}},
    ]
    rendered = render("mixed", spec)
    assert [c.provider for c in rendered.clusters] == ["docker", "aws", "remote", "existing"]
    assert {c[CLUSTER_LABEL] for c in (m["metadata"]["labels"] for m in by_kind(rendered, "Cluster"))} == {
        "dev",
        "cloud",
        "lab",
    }
    ports = [c.hosted_ports for c in rendered.clusters if c.hosted_ports]
    assert len(ports) == 3
    assert len({p for pair in ports for p in (pair.api, pair.konnectivity)}) == 6


def test_render_package_is_pure() -> None:
    forbidden = {"kopf", "kubernetes", "kubernetes_asyncio", "subprocess", "socket", "requests", "httpx"}
    for path in RENDER_PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] not in forbidden, f"{path.name} imports {name}"


def _aws_with_profile(profile: str | None) -> ColonySpec:
    spec: dict[str, Any] = {
        "k8sVersion": "v1.30.3",
        "colonyClusters": [
            {
                "clusterName": "gpu",
                "aws": {"replicas": 1, "region": "eu-central-1", "instanceType": "g5.xlarge"},
            },
            {"clusterName": "local", "docker": {"replicas": 1}},
        ],
    }
    if profile is not None:
        spec["colonyClusters"][0]["aws"]["iamInstanceProfile"] = profile
    return ColonySpec.model_validate(spec)


@pytest.mark.parametrize(
    "profile",
    [
        "control-plane.cluster-api-provider-aws.sigs.k8s.io",
        "controllers.cluster-api-provider-aws.sigs.k8s.io",
        "admin",
    ],
)
def test_an_instance_profile_the_admin_does_not_allow_renders_nothing(profile: str) -> None:
    """A tenant's workers launch with the admin's CAPA identity; attaching e.g. the controllers'
    profile would hand its AWS credentials to whoever controls a node (issue 16, G7)."""
    rendered = render_colony(colony_ref("train"), _aws_with_profile(profile), {})
    gpu, local = rendered.clusters
    assert gpu.manifests == () and gpu.kept_as_is and not local.kept_as_is
    (problem,) = gpu.problems
    assert repr(profile) in problem and "nodes.cluster-api-provider-aws.sigs.k8s.io" in problem
    assert rendered.problems == (f"cluster 'gpu': {problem}",)
    assert local.manifests  # the colony's other clusters still render


def test_the_default_profile_is_allowed_and_the_admin_may_allow_more() -> None:
    default = render_colony(colony_ref("train"), _aws_with_profile(None), {})
    (template,) = by_kind(default, "AWSMachineTemplate")
    assert (
        template["spec"]["template"]["spec"]["iamInstanceProfile"]
        == "nodes.cluster-api-provider-aws.sigs.k8s.io"
    )
    assert default.problems == ()
    allowed = frozenset({"gpu-nodes"})
    custom = render_colony(
        colony_ref("train"), _aws_with_profile("gpu-nodes"), {}, aws_instance_profiles=allowed
    )
    (template,) = by_kind(custom, "AWSMachineTemplate")
    assert template["spec"]["template"]["spec"]["iamInstanceProfile"] == "gpu-nodes"
    # The admin's list replaces the default: CAPA's nodes profile is then refused too.
    refused = render_colony(colony_ref("train"), _aws_with_profile(None), {}, aws_instance_profiles=allowed)
    assert refused.clusters[0].manifests == () and "(allowed: gpu-nodes)" in refused.clusters[0].problems[0]
