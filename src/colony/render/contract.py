"""The contract between the Colony controller and the pure renderers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Manifest = dict[str, Any]


@dataclass(frozen=True)
class ColonyRef:
    """The Colony being rendered: its identity, for names, labels and owner references."""

    name: str
    namespace: str
    uid: str

    def owner_reference(self) -> dict[str, Any]:
        """An ownerReference to the Colony (only ever set on objects in its own namespace)."""
        return {
            "apiVersion": "infra.exalsius.ai/v1",
            "kind": "Colony",
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": False,
        }


@dataclass(frozen=True)
class HostedControlPlanePorts:
    """NodePorts of a hosted (k0smotron) control plane: API server and konnectivity."""

    api: int
    konnectivity: int


@dataclass(frozen=True)
class RenderedCluster:
    """Everything rendered for one entry of spec.colonyClusters."""

    cluster_name: str
    provider: str
    capi_cluster_name: str | None
    """Name of the Cluster API Cluster; None for `existing` clusters (no Cluster API objects)."""
    manifests: tuple[Manifest, ...]
    """Objects to server-side apply in the colony's namespace, in dependency order."""
    kubeconfig_secret: str
    """Secret (colony namespace, key `value` or the ref's key) holding the cluster's kubeconfig."""
    kubeconfig_key: str = "value"
    hosted_ports: HostedControlPlanePorts | None = None
    problems: tuple[str, ...] = ()
    """This cluster's problems (also in RenderedColony.problems, prefixed with the cluster name)."""
    kept_as_is: bool = False
    """Refused by the operator's policy (e.g. an AWS instance profile the admin does not allow):
    nothing is rendered, and what already runs for it is left as it is (never pruned: a policy
    change must not tear down a running cluster)."""


@dataclass(frozen=True)
class RenderedColony:
    """The whole desired state of a colony in the management cluster."""

    clusters: tuple[RenderedCluster, ...]
    addons: tuple[Manifest, ...]
    """HelmChartProxies, one per dependency, selecting exactly this colony's Clusters."""
    problems: tuple[str, ...] = field(default_factory=tuple)
    """Human-readable problems that did not stop rendering (e.g. unknown dependency names)."""
