"""Labels and names that tie rendered objects to their Colony (owner references stay in-namespace)."""

from __future__ import annotations

from colony.labels import CLUSTER_LABEL, COLONY_LABEL, MANAGED_BY, MANAGED_BY_LABEL


def capi_cluster_name(colony: str, cluster_name: str) -> str:
    """Name of the Cluster API Cluster (and its provider objects) of one colony cluster."""
    return f"{colony}-{cluster_name}"


def kubeconfig_secret_name(capi_cluster: str) -> str:
    """The Secret Cluster API writes the workload cluster's kubeconfig into (key `value`)."""
    return f"{capi_cluster}-kubeconfig"


def ownership_labels(colony: str, cluster_name: str | None = None) -> dict[str, str]:
    """Labels every object rendered for a colony (or one of its clusters) carries."""
    labels = {COLONY_LABEL: colony, MANAGED_BY_LABEL: MANAGED_BY}
    if cluster_name is not None:
        labels[CLUSTER_LABEL] = cluster_name
    return labels
