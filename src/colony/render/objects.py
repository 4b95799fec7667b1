"""The upstream kinds we render (API versions pinned to the CRDs in versions.env) and helpers to
build their metadata and references."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from colony.render.contract import Manifest


@dataclass(frozen=True)
class Kind:
    """An API group, version and kind."""

    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        """`<group>/<version>`."""
        return f"{self.group}/{self.version}"


CAPI_GROUP = "cluster.x-k8s.io"
INFRA_GROUP = "infrastructure.cluster.x-k8s.io"
CONTROLPLANE_GROUP = "controlplane.cluster.x-k8s.io"
BOOTSTRAP_GROUP = "bootstrap.cluster.x-k8s.io"
ADDONS_GROUP = "addons.cluster.x-k8s.io"

# Cluster API core (v1.14): v1beta2, whose references are {apiGroup, kind, name}.
CLUSTER = Kind(CAPI_GROUP, "v1beta2", "Cluster")
MACHINE_DEPLOYMENT = Kind(CAPI_GROUP, "v1beta2", "MachineDeployment")
MACHINE = Kind(CAPI_GROUP, "v1beta2", "Machine")
# CAPD (cluster-api test module v1.14) and CAPA (v2.11).
DOCKER_CLUSTER = Kind(INFRA_GROUP, "v1beta2", "DockerCluster")
DOCKER_MACHINE_TEMPLATE = Kind(INFRA_GROUP, "v1beta2", "DockerMachineTemplate")
AWS_CLUSTER = Kind(INFRA_GROUP, "v1beta2", "AWSCluster")
AWS_MACHINE_TEMPLATE = Kind(INFRA_GROUP, "v1beta2", "AWSMachineTemplate")
# k0smotron (v1.10): every kind is v1beta1.
K0SMOTRON_CONTROL_PLANE = Kind(CONTROLPLANE_GROUP, "v1beta1", "K0smotronControlPlane")
K0S_CONTROL_PLANE = Kind(CONTROLPLANE_GROUP, "v1beta1", "K0sControlPlane")
K0S_WORKER_CONFIG_TEMPLATE = Kind(BOOTSTRAP_GROUP, "v1beta1", "K0sWorkerConfigTemplate")
K0S_WORKER_CONFIG = Kind(BOOTSTRAP_GROUP, "v1beta1", "K0sWorkerConfig")
REMOTE_CLUSTER = Kind(INFRA_GROUP, "v1beta1", "RemoteCluster")
REMOTE_MACHINE = Kind(INFRA_GROUP, "v1beta1", "RemoteMachine")
# Cluster API add-on provider Helm (v0.6).
HELM_CHART_PROXY = Kind(ADDONS_GROUP, "v1alpha1", "HelmChartProxy")

MANAGED_BY_ANNOTATION = "cluster.x-k8s.io/managed-by"
"""Marks infrastructure as externally managed: its provider leaves it to k0smotron."""
CAPI_CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name"
CAPI_DEPLOYMENT_NAME_LABEL = "cluster.x-k8s.io/deployment-name"


def manifest(
    kind: Kind,
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    owner_references: list[dict[str, Any]],
    spec: dict[str, Any],
    annotations: Mapping[str, str] | None = None,
) -> Manifest:
    """A complete object: apiVersion, kind, metadata (name, namespace, labels, owners) and spec."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels)}
    if annotations:
        metadata["annotations"] = dict(annotations)
    metadata["ownerReferences"] = [dict(ref) for ref in owner_references]
    return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": metadata, "spec": spec}


def contract_ref(obj: Manifest) -> dict[str, str]:
    """A Cluster API v1beta2 contract reference to `obj`: {apiGroup, kind, name}."""
    return {
        "apiGroup": obj["apiVersion"].split("/", 1)[0],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
    }


def object_ref(obj: Manifest) -> dict[str, str]:
    """A core ObjectReference to `obj` ({apiVersion, kind, name, namespace}), as v1beta1 kinds use."""
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "namespace": obj["metadata"]["namespace"],
    }
