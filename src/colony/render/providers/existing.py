"""Existing clusters: registered by a kubeconfig Secret, with no Cluster API objects at all."""

from __future__ import annotations

from colony.render.context import ClusterContext
from colony.render.providers.base import ProviderObjects


class ExistingProvider:
    """An already running cluster; the operator only reads (and installs add-ons into) it."""

    name = "existing"
    machine_control_plane = False

    def render(self, ctx: ClusterContext, *, hosted_control_plane: bool) -> ProviderObjects:
        """Nothing to create; only where the kubeconfig is."""
        existing = ctx.cluster.existing
        if existing is None:
            raise ValueError(f"cluster {ctx.cluster.cluster_name!r} has no existing block")
        return ProviderObjects(kubeconfig=existing.kubeconfig_secret_ref)
