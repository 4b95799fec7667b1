"""The built-in add-on catalog and the HelmChartProxies rendered for a colony's dependencies."""

from __future__ import annotations

from typing import Any

import pytest

from colony.api.colony import ColonySpec
from colony.labels import ADDON_LABEL, COLONY_LABEL
from colony.render import RenderedColony, render_colony
from colony.render.addons import CATALOG, helm_chart_proxy_name
from colony.render.names import MAX_NAME_LENGTH, name_problem
from colony.versions import pinned
from tests.unit.test_render_golden import colony_ref, docker, render_case

REQUIRED = ("volcano-sh", "nvidia-operator", "kuberay", "kubeflow-training", "kube-prometheus-stack")


def render(spec: dict[str, Any], name: str = "dev") -> RenderedColony:
    return render_colony(colony_ref(name), ColonySpec.model_validate(spec), {})


def with_dependencies(workload: list[str], additional: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec = docker(True)
    spec["workloadDependencies"] = [{"name": name} for name in workload]
    spec["additionalDependencies"] = additional or []
    return spec


def additional(name: str, labels: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    spec = {"repoURL": "https://charts.example.com", "chartName": name, **extra}
    if labels is not None:
        spec["clusterSelector"] = {"matchLabels": labels}
    return {"name": name, "spec": spec}


@pytest.mark.parametrize("name", REQUIRED)
def test_catalog_has_pinned_chart_versions(name: str) -> None:
    chart = CATALOG[name]
    assert chart.version == pinned(chart.version_key) != ""
    assert chart.repo_url.startswith(("https://", "oci://"))


def test_catalog_names_match_the_seed() -> None:
    assert CATALOG["volcano-sh"].chart_name == "volcano"
    assert CATALOG["volcano-sh"].repo_url == "https://volcano-sh.github.io/helm-charts"
    assert CATALOG["nvidia-operator"].chart_name == "gpu-operator"
    assert CATALOG["nvidia-operator"].repo_url == "https://helm.ngc.nvidia.com/nvidia"
    assert CATALOG["kuberay"].chart_name == "kuberay-operator"


def test_one_proxy_per_dependency_named_after_the_colony() -> None:
    rendered = render(with_dependencies(list(REQUIRED)))
    assert [p["metadata"]["name"] for p in rendered.addons] == [f"dev-{name}" for name in REQUIRED]
    for proxy, name in zip(rendered.addons, REQUIRED, strict=True):
        assert proxy["metadata"]["labels"][ADDON_LABEL] == name
        assert proxy["spec"]["version"] == CATALOG[name].version
        assert proxy["spec"]["clusterSelector"] == {"matchLabels": {COLONY_LABEL: "dev"}}
    assert rendered.problems == ()


def test_unknown_workload_dependency_is_a_problem_listing_known_names() -> None:
    rendered = render(with_dependencies(["volcano-sh", "pytorch-magic"]))
    (problem,) = rendered.problems
    assert "'pytorch-magic'" in problem
    for name in REQUIRED:
        assert name in problem
    assert [p["metadata"]["labels"][ADDON_LABEL] for p in rendered.addons] == ["volcano-sh"]
    assert rendered.clusters[0].manifests  # clusters still render


def test_additional_dependency_wins_a_name_collision() -> None:
    rendered = render(with_dependencies(["kuberay"], [additional("kuberay", {"ray": "enabled"})]))
    (problem,) = rendered.problems
    assert "'kuberay'" in problem and "additionalDependencies" in problem
    (proxy,) = rendered.addons
    assert proxy["spec"]["repoURL"] == "https://charts.example.com"


def test_additional_dependency_spec_passes_through_and_is_scoped_to_the_colony() -> None:
    extra = {
        "version": "1.2.3",
        "namespace": "ray",
        "releaseName": "ray",
        "valuesTemplate": "image: {{ .Cluster.metadata.name }}",
        "options": {"wait": True, "timeout": "5m"},
        "reconcileStrategy": "InstallOnce",
    }
    rendered = render(with_dependencies([], [additional("kuberay", {"ray": "enabled"}, **extra)]))
    (proxy,) = rendered.addons
    spec = proxy["spec"]
    for key, value in extra.items():
        assert spec[key] == value
    assert spec["clusterSelector"] == {"matchLabels": {"ray": "enabled", COLONY_LABEL: "dev"}}
    (cluster,) = (m for m in rendered.clusters[0].manifests if m["kind"] == "Cluster")
    assert cluster["metadata"]["labels"]["ray"] == "enabled"


def test_user_selector_cannot_escape_the_colony() -> None:
    rendered = render(with_dependencies([], [additional("x", {COLONY_LABEL: "other"})]))
    (proxy,) = rendered.addons
    assert proxy["spec"]["clusterSelector"]["matchLabels"] == {COLONY_LABEL: "dev"}
    assert any("may only select this colony" in p for p in rendered.problems)


def test_conflicting_selector_labels_are_a_problem() -> None:
    deps = [additional("a", {"gpu": "a100"}), additional("b", {"gpu": "h100"})]
    rendered = render(with_dependencies([], deps))
    (problem,) = rendered.problems
    assert "'b'" in problem and "gpu=a100" in problem
    (cluster,) = (m for m in rendered.clusters[0].manifests if m["kind"] == "Cluster")
    assert cluster["metadata"]["labels"]["gpu"] == "a100"


def test_selector_on_the_cluster_label_targets_one_cluster_without_relabelling() -> None:
    spec = with_dependencies([], [additional("only-dev", {"colony.exalsius.ai/cluster": "dev"})])
    spec["colonyClusters"].append({"clusterName": "other", "docker": {"replicas": 1}})
    rendered = render(spec)
    (proxy,) = rendered.addons
    selector = proxy["spec"]["clusterSelector"]["matchLabels"]
    clusters = {
        m["metadata"]["labels"]["colony.exalsius.ai/cluster"]: m["metadata"]["labels"]
        for c in rendered.clusters
        for m in c.manifests
        if m["kind"] == "Cluster"
    }
    assert selector.items() <= clusters["dev"].items()
    assert not selector.items() <= clusters["other"].items()


def test_long_proxy_names_are_shortened_deterministically() -> None:
    colony = "a-very-long-colony-name-that-nearly-fills-the-limit-on-its-own"
    name = helm_chart_proxy_name(colony, "kube-prometheus-stack")
    assert len(name) <= MAX_NAME_LENGTH and name_problem(name) is None
    assert name == helm_chart_proxy_name(colony, "kube-prometheus-stack")
    assert name != helm_chart_proxy_name(colony, "kube-prometheus-stack-2")
    assert helm_chart_proxy_name("dev", "kuberay") == "dev-kuberay"


def test_seed_docker_ray_installs_volcano_and_its_own_kuberay() -> None:
    rendered = render_case("seed-docker-ray")
    names = [p["metadata"]["name"] for p in rendered.addons]
    assert names == ["docker-colony-ray-volcano-sh", "docker-colony-ray-kuberay"]
    kuberay = rendered.addons[1]["spec"]
    assert kuberay["chartName"] == "kuberay-operator"
    assert kuberay["options"] == {
        "waitForJobs": True,
        "wait": True,
        "timeout": "5m",
        "install": {"createNamespace": True},
    }


def test_secret_references_always_name_the_colonys_namespace() -> None:
    """CAAPH reads credentials and CA Secrets with its own ClusterRole: the rendered proxy names the
    colony's namespace explicitly, whatever the tenant wrote (the model has no namespace field)."""
    extra = {
        "repoURL": "oci://registry.example.com/charts",
        "credentials": {"secret": {"name": "pull", "namespace": "kube-system"}, "key": "config.json"},
        "tlsConfig": {"caSecret": {"name": "ca", "namespace": "capi-system"}, "insecureSkipTLSVerify": False},
    }
    rendered = render(with_dependencies([], [additional("private", **extra)]))
    (proxy,) = rendered.addons
    namespace = proxy["metadata"]["namespace"]
    assert namespace == colony_ref("dev").namespace
    assert proxy["spec"]["credentials"] == {
        "secret": {"name": "pull", "namespace": namespace},
        "key": "config.json",
    }
    assert proxy["spec"]["tlsConfig"] == {
        "caSecret": {"name": "ca", "namespace": namespace},
        "insecureSkipTLSVerify": False,
    }
    assert rendered.problems == ()


def test_undeclared_fields_never_reach_the_proxy() -> None:
    extra = {"postRenderer": {"exec": "/bin/sh"}, "insecureSkipTlsVerify": True, "unknown": 1}
    rendered = render(with_dependencies([], [additional("x", **extra)]))
    (proxy,) = rendered.addons
    assert not set(extra) & set(proxy["spec"])


@pytest.mark.parametrize(
    "template",
    ['token: {{ env "AWS_SECRET_ACCESS_KEY" }}', '{{ "$HOME" | expandenv }}', 'ip: {{ getHostByName "db" }}'],
)
def test_a_values_template_calling_env_is_not_rendered(template: str) -> None:
    deps = [
        additional("evil", valuesTemplate=template),
        additional("good", valuesTemplate="a: {{ .Cluster.metadata.name }}"),
    ]
    rendered = render(with_dependencies([], deps))
    assert [p["metadata"]["labels"][ADDON_LABEL] for p in rendered.addons] == ["good"]
    (problem,) = rendered.problems
    assert "'evil'" in problem and "valuesTemplate" in problem
