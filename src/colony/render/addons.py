"""Add-ons: the built-in chart catalog and the CAAPH HelmChartProxies that install a colony's
dependencies on its clusters.

Every HelmChartProxy lives in the colony's namespace (CAAPH only selects Clusters of its own
namespace, and owner references never cross namespaces), is named `<colony>-<dependency>`, and
selects the colony's Clusters by the colony label, plus, for additionalDependencies, the user's
own matchLabels. The Clusters carry those labels (see `AddonPlan.cluster_labels`), so a selector
always matches exactly this colony's clusters.

Chart versions are pinned in colony/versions.env (keys CHART_*).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from colony.api.colony import AdditionalDependency, ColonySpec
from colony.labels import ADDON_LABEL, COLONY_LABEL, MANAGED_BY_LABEL
from colony.render.contract import ColonyRef, Manifest
from colony.render.go_templates import forbidden_calls
from colony.render.labels import ownership_labels
from colony.render.names import bounded_name
from colony.render.objects import HELM_CHART_PROXY, manifest
from colony.versions import pinned

RESERVED_LABEL_PREFIX = "colony.exalsius.ai/"
"""Label keys the operator sets itself; user selectors may use them but never override them."""

DEFAULT_OPTIONS: Mapping[str, Any] = {
    "wait": True,
    "waitForJobs": True,
    "timeout": "10m",
    "install": {"createNamespace": True},
}
"""CAAPH install options of catalog charts: a release is Ready only once its workloads are."""

# k0s runs its own containerd: the GPU operator's toolkit must configure that one (k0s docs,
# "NVIDIA GPU Operator"), or GPU pods fail with `no runtime for "nvidia" is configured`.
_GPU_OPERATOR_VALUES = """\
toolkit:
  env:
    - name: CONTAINERD_CONFIG
      value: /etc/k0s/containerd.d/nvidia.toml
    - name: CONTAINERD_SOCKET
      value: /run/k0s/containerd.sock
    - name: CONTAINERD_RUNTIME_CLASS
      value: nvidia
"""


@dataclass(frozen=True)
class CatalogChart:
    """A built-in dependency: where its chart is, which version, and where it is installed."""

    name: str
    """The name users put in workloadDependencies."""
    repo_url: str
    chart_name: str
    version_key: str
    """Key of the chart version in versions.env."""
    namespace: str
    release_name: str
    values_template: str | None = None

    @property
    def version(self) -> str:
        """The pinned chart version."""
        return pinned(self.version_key)

    def spec(self) -> dict[str, Any]:
        """The HelmChartProxySpec, without clusterSelector."""
        spec: dict[str, Any] = {
            "repoURL": self.repo_url,
            "chartName": self.chart_name,
            "version": self.version,
            "namespace": self.namespace,
            "releaseName": self.release_name,
            "options": copy.deepcopy(dict(DEFAULT_OPTIONS)),
        }
        if self.values_template is not None:
            spec["valuesTemplate"] = self.values_template
        return spec


CATALOG: Mapping[str, CatalogChart] = MappingProxyType(
    {
        chart.name: chart
        for chart in (
            CatalogChart(
                "volcano-sh",
                "https://volcano-sh.github.io/helm-charts",
                "volcano",
                "CHART_VOLCANO_VERSION",
                "volcano-system",
                "volcano",
            ),
            CatalogChart(
                "nvidia-operator",
                "https://helm.ngc.nvidia.com/nvidia",
                "gpu-operator",
                "CHART_GPU_OPERATOR_VERSION",
                "gpu-operator",
                "gpu-operator",
                values_template=_GPU_OPERATOR_VALUES,
            ),
            CatalogChart(
                "kuberay",
                "https://ray-project.github.io/kuberay-helm/",
                "kuberay-operator",
                "CHART_KUBERAY_OPERATOR_VERSION",
                "kuberay-system",
                "kuberay-operator",
            ),
            # Kubeflow publishes a Helm chart only for Kubeflow Trainer (the v2 TrainJob API), as an
            # OCI artifact (charts/kubeflow-trainer in github.com/kubeflow/trainer). The v1
            # training-operator (PyTorchJob) never had an official chart, only kustomize manifests.
            CatalogChart(
                "kubeflow-training",
                "oci://ghcr.io/kubeflow/charts",
                "kubeflow-trainer",
                "CHART_KUBEFLOW_TRAINER_VERSION",
                "kubeflow-system",
                "kubeflow-trainer",
            ),
            CatalogChart(
                "kube-prometheus-stack",
                "https://prometheus-community.github.io/helm-charts",
                "kube-prometheus-stack",
                "CHART_KUBE_PROMETHEUS_STACK_VERSION",
                "monitoring",
                "kube-prometheus-stack",
            ),
        )
    }
)
"""The built-in dependencies, by name."""


@dataclass(frozen=True)
class AddonPlan:
    """The HelmChartProxies of a colony and the labels its Clusters need for them to match."""

    proxies: tuple[Manifest, ...]
    cluster_labels: Mapping[str, str]
    """Labels every Cluster of the colony carries (beyond ownership labels) for the selectors."""
    problems: tuple[str, ...]


def helm_chart_proxy_name(colony: str, dependency: str) -> str:
    """`<colony>-<dependency>`, shortened with a hash beyond 63 characters."""
    return bounded_name(f"{colony}-{dependency}")


def plan_addons(colony: ColonyRef, spec: ColonySpec) -> AddonPlan:
    """One HelmChartProxy per dependency of the colony; problems instead of exceptions.

    Unknown workloadDependencies are reported with the known names. A name that is both a
    workload and an additional dependency is reported and the additional one is kept.
    """
    workload, workload_problems = _workload_proxies(colony, spec)
    extra, cluster_labels, extra_problems = _additional_proxies(colony, spec)
    return AddonPlan((*workload, *extra), cluster_labels, (*workload_problems, *extra_problems))


def _workload_proxies(colony: ColonyRef, spec: ColonySpec) -> tuple[list[Manifest], list[str]]:
    """Proxies of the catalog charts named in workloadDependencies."""
    proxies: list[Manifest] = []
    problems: list[str] = []
    additional_names = {dep.name for dep in spec.additional_dependencies}
    seen: set[str] = set()
    for dependency in spec.workload_dependencies:
        name = dependency.name
        if name in seen:
            problems.append(f"workload dependency {name!r} is listed twice")
            continue
        seen.add(name)
        if name in additional_names:
            problems.append(
                f"dependency {name!r} is both a workload and an additional dependency; "
                "the additionalDependencies entry is used"
            )
            continue
        chart = CATALOG.get(name)
        if chart is None:
            problems.append(
                f"unknown workload dependency {name!r}; known dependencies: {', '.join(sorted(CATALOG))}"
            )
            continue
        selector = {"matchLabels": {COLONY_LABEL: colony.name}}
        proxies.append(_proxy(colony, name, {**chart.spec(), "clusterSelector": selector}))
    return proxies, problems


def _additional_proxies(
    colony: ColonyRef, spec: ColonySpec
) -> tuple[list[Manifest], dict[str, str], list[str]]:
    """Proxies of additionalDependencies, and the labels the colony's Clusters need to match them."""
    proxies: list[Manifest] = []
    problems: list[str] = []
    cluster_labels: dict[str, str] = {}
    label_owner: dict[str, str] = {}
    seen: set[str] = set()
    for dependency in spec.additional_dependencies:
        if dependency.name in seen:
            problems.append(f"additional dependency {dependency.name!r} is listed twice")
            continue
        seen.add(dependency.name)
        wire, spec_problems = _additional_spec(colony, dependency)
        problems += spec_problems
        if wire is None:
            continue
        for key, value in wire["clusterSelector"]["matchLabels"].items():
            if _reserved(key):
                continue
            if cluster_labels.get(key, value) != value:
                problems.append(
                    f"additional dependency {dependency.name!r} selects clusters with {key}={value}, "
                    f"but {label_owner[key]!r} already needs {key}={cluster_labels[key]}; "
                    f"{dependency.name!r} will not match any cluster"
                )
                continue
            cluster_labels[key] = value
            label_owner.setdefault(key, dependency.name)
        proxies.append(_proxy(colony, dependency.name, wire))
    return proxies, cluster_labels, problems


def _reserved(key: str) -> bool:
    return key.startswith(RESERVED_LABEL_PREFIX) or key == MANAGED_BY_LABEL


def _additional_spec(
    colony: ColonyRef, dependency: AdditionalDependency
) -> tuple[dict[str, Any] | None, list[str]]:
    """The user's HelmChartProxySpec (only the fields the model declares), scoped to the colony:
    the selector always carries the colony label and every Secret reference names the colony's
    namespace. None, with the reason, when the valuesTemplate calls a forbidden function (the CRD
    refuses it already; this is the second line)."""
    problems = []
    forbidden = forbidden_calls(dependency.spec.values_template)
    if forbidden:
        return None, [
            f"additional dependency {dependency.name!r} is not installed: its valuesTemplate calls "
            f"{', '.join(forbidden)}, which would run inside the add-on controller"
        ]
    wire = dependency.spec.to_wire()
    user_labels = (
        dict(dependency.spec.cluster_selector.match_labels) if dependency.spec.cluster_selector else {}
    )
    if user_labels.get(COLONY_LABEL, colony.name) != colony.name:
        problems.append(
            f"additional dependency {dependency.name!r}: clusterSelector label {COLONY_LABEL}="
            f"{user_labels[COLONY_LABEL]} is replaced by {colony.name} (it may only select this colony)"
        )
    wire["clusterSelector"] = {"matchLabels": {**user_labels, COLONY_LABEL: colony.name}}
    for field, reference in (("credentials", "secret"), ("tlsConfig", "caSecret")):
        secret = (wire.get(field) or {}).get(reference)
        if isinstance(secret, dict):
            # CAAPH reads these Secrets with its own ClusterRole: never another namespace's.
            secret["namespace"] = colony.namespace
    return wire, problems


def _proxy(colony: ColonyRef, dependency: str, spec: dict[str, Any]) -> Manifest:
    labels = {**ownership_labels(colony.name), ADDON_LABEL: dependency}
    name = helm_chart_proxy_name(colony.name, dependency)
    return manifest(HELM_CHART_PROXY, name, colony.namespace, labels, [colony.owner_reference()], spec)
