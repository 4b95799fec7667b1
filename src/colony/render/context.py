"""What every renderer of one colony cluster needs to know."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from colony.api.colony import CAPA_NODES_INSTANCE_PROFILE, ColonyCluster
from colony.render.contract import ColonyRef, Manifest
from colony.render.k8s_versions import KubernetesVersion
from colony.render.labels import capi_cluster_name, ownership_labels
from colony.render.objects import Kind, manifest

DEFAULT_AWS_INSTANCE_PROFILES = frozenset({CAPA_NODES_INSTANCE_PROFILE})
"""What aws clusters may attach when the admin allows nothing more."""


@dataclass(frozen=True)
class ClusterContext:
    """One colony cluster being rendered: identity, versions and the common object metadata."""

    colony: ColonyRef
    cluster: ColonyCluster
    capi_name: str
    """`<colony>-<clusterName>`: the Cluster API Cluster and the prefix of its objects' names."""
    version: KubernetesVersion
    labels: Mapping[str, str] = field(default_factory=dict)
    """Labels of every object rendered for this cluster (ownership labels unless overridden)."""
    aws_instance_profiles: frozenset[str] = DEFAULT_AWS_INSTANCE_PROFILES
    """The IAM instance profiles an aws cluster may attach to its workers (the admin's allowlist)."""

    @classmethod
    def create(
        cls,
        colony: ColonyRef,
        cluster: ColonyCluster,
        version: KubernetesVersion,
        aws_instance_profiles: frozenset[str] = DEFAULT_AWS_INSTANCE_PROFILES,
    ) -> ClusterContext:
        """The context of one cluster: its Cluster API name and ownership labels."""
        return cls(
            colony=colony,
            cluster=cluster,
            capi_name=capi_cluster_name(colony.name, cluster.cluster_name),
            version=version,
            labels=ownership_labels(colony.name, cluster.cluster_name),
            aws_instance_profiles=aws_instance_profiles,
        )

    def object(
        self,
        kind: Kind,
        name: str,
        spec: dict[str, Any],
        *,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> Manifest:
        """An object in the colony's namespace, labelled and owned by the colony."""
        return manifest(
            kind,
            name,
            self.colony.namespace,
            {**self.labels, **(labels or {})},
            [self.colony.owner_reference()],
            spec,
            annotations,
        )
