"""The contract every infrastructure provider implements (the shape of Cluster API providers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from colony.api.base import SecretKeyReference
from colony.render.context import ClusterContext
from colony.render.contract import Manifest


@dataclass(frozen=True)
class ProviderObjects:
    """What a provider renders for one colony cluster."""

    infrastructure_cluster: Manifest | None = None
    """Target of Cluster.spec.infrastructureRef; None means no Cluster API objects at all."""
    machine_template: Manifest | None = None
    """Machine template a control plane on the provider's machines is created from."""
    workers: tuple[Manifest, ...] = ()
    """Bootstrap configs, MachineDeployments, Machines: applied after the Cluster."""
    kubeconfig: SecretKeyReference | None = None
    """Where the cluster's kubeconfig is, when not in the Cluster API `<cn>-kubeconfig` Secret."""
    problems: tuple[str, ...] = ()
    """Problems that did not stop rendering, e.g. settings the upstream API cannot express."""
    refused: bool = False
    """The problems stop this cluster: nothing of it is rendered (e.g. a setting the admin forbids)."""


class InfrastructureProvider(Protocol):
    """Renders the provider-specific objects of one colony cluster."""

    name: str
    """The provider block in ColonyCluster: docker, aws, remote or existing."""
    machine_control_plane: bool
    """Whether a control plane can run on this provider's machines (K0sControlPlane)."""

    def render(self, ctx: ClusterContext, *, hosted_control_plane: bool) -> ProviderObjects:
        """The provider's objects; `hosted_control_plane` says whether k0smotron hosts the API."""
        ...
