"""The upstream CRDs (Cluster API, CAAPH, Volcano, ...) are installed, served and validating."""

from __future__ import annotations

import json
from typing import Any

import pytest

from colony.devenv.cluster import KubectlError, LocalCluster


def _apply(cluster: LocalCluster, namespace: str, document: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input_text=json.dumps(document))


CAPI_CLUSTER = {
    "apiVersion": "cluster.x-k8s.io/v1beta2",
    "kind": "Cluster",
    "metadata": {"name": "c1", "labels": {"volcano": "enabled"}},
    "spec": {
        "clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]}},
        "infrastructureRef": {
            "apiGroup": "infrastructure.cluster.x-k8s.io",
            "kind": "DockerCluster",
            "name": "c1",
        },
    },
}
HELM_CHART_PROXY = {
    "apiVersion": "addons.cluster.x-k8s.io/v1alpha1",
    "kind": "HelmChartProxy",
    "metadata": {"name": "volcano"},
    "spec": {
        "clusterSelector": {"matchLabels": {"volcano": "enabled"}},
        "repoURL": "https://volcano-sh.github.io/helm-charts",
        "chartName": "volcano",
        "version": "1.13.0",
    },
}
POD_GROUP = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "PodGroup",
    "metadata": {"name": "pg"},
    "spec": {"minMember": 2, "queue": "default", "minResources": {"nvidia.com/gpu": "2"}},
}


@pytest.mark.parametrize("document", [CAPI_CLUSTER, HELM_CHART_PROXY, POD_GROUP], ids=lambda d: d["kind"])
def test_minimal_upstream_objects_are_accepted(
    management: LocalCluster, namespace: str, document: dict[str, Any]
) -> None:
    _apply(management, namespace, document)
    stored = management.get_json(document["kind"].lower(), document["metadata"]["name"], "-n", namespace)
    assert stored["metadata"]["uid"]


@pytest.mark.parametrize(
    ("document", "path", "value", "expected"),
    [
        (HELM_CHART_PROXY, "chartName", None, "spec.chartName: Required value"),
        (POD_GROUP, "minMember", "two", "spec.minMember"),
        (CAPI_CLUSTER, "paused", "yes", "spec.paused"),
    ],
    ids=["HelmChartProxy", "PodGroup", "Cluster"],
)
def test_upstream_schemas_validate(
    management: LocalCluster, namespace: str, document: dict[str, Any], path: str, value: Any, expected: str
) -> None:
    """Proof the schemas are the real ones: a wrong field is rejected with the upstream message."""
    broken = {**document, "spec": {**document["spec"], path: value}}
    if value is None:
        del broken["spec"][path]
    with pytest.raises(KubectlError) as rejected:
        _apply(management, namespace, broken)
    assert expected in rejected.value.stderr


def test_every_upstream_group_is_served(management: LocalCluster) -> None:
    served = management.kubectl("api-resources", "-o", "name").stdout.split()
    for resource in (
        "clusters.cluster.x-k8s.io",
        "machinedeployments.cluster.x-k8s.io",
        "kubeadmcontrolplanes.controlplane.cluster.x-k8s.io",
        "kubeadmconfigtemplates.bootstrap.cluster.x-k8s.io",
        "awsclusters.infrastructure.cluster.x-k8s.io",
        "awsmachinetemplates.infrastructure.cluster.x-k8s.io",
        "dockerclusters.infrastructure.cluster.x-k8s.io",
        "dockermachinetemplates.infrastructure.cluster.x-k8s.io",
        "helmchartproxies.addons.cluster.x-k8s.io",
        "helmreleaseproxies.addons.cluster.x-k8s.io",
        "k0smotroncontrolplanes.controlplane.cluster.x-k8s.io",
        "k0scontrolplanes.controlplane.cluster.x-k8s.io",
        "k0sworkerconfigtemplates.bootstrap.cluster.x-k8s.io",
        "remoteclusters.infrastructure.cluster.x-k8s.io",
        "remotemachines.infrastructure.cluster.x-k8s.io",
        "podgroups.scheduling.volcano.sh",
        "queues.scheduling.volcano.sh",
        "pytorchjobs.kubeflow.org",
        "rayclusters.ray.io",
        "rayjobs.ray.io",
    ):
        assert resource in served, resource
