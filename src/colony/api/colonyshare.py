"""The ColonyShare resource: the cluster admin shares one colony with other namespaces.

A colony is usable by the GPU requests and placed framework objects of its own namespace only. A
ColonyShare, cluster-scoped so that only the cluster admin can create it under the chart's RBAC
(tenants hold namespaced rights), lets the namespaces it names use the colony too: Gateway API's
ReferenceGrant (the owner of the target grants the reference) and Kueue's admin-owned ClusterQueue
(sharing is the admin's decision, never the tenant's). A label on the Colony shares nothing.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, StringConstraints

from colony.api.base import (
    ApiModel,
    LabelSelector,
    PrinterColumn,
    ResourceDefinition,
    ResourceStatus,
    cel_rules,
)

DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""A namespace name (RFC 1123 label, at most 63 characters)."""
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
"""An object name (RFC 1123 subdomain, at most 253 characters)."""

NamespaceName = Annotated[str, StringConstraints(min_length=1, max_length=63, pattern=DNS1123_LABEL)]


class SharedColonyReference(ApiModel):
    """The colony that is shared, by namespace and name."""

    namespace: str = Field(
        min_length=1, max_length=63, pattern=DNS1123_LABEL, description="Namespace of the Colony."
    )
    name: str = Field(
        min_length=1, max_length=253, pattern=DNS1123_SUBDOMAIN, description="Name of the Colony."
    )


class ColonyShareSpec(ApiModel):
    """Desired state of a ColonyShare: which colony, and which namespaces may use it."""

    model_config = ConfigDict(
        json_schema_extra=cel_rules(
            (
                "(has(self.namespaces) && size(self.namespaces) > 0) || has(self.namespaceSelector)",
                "name at least one namespace in namespaces, or give a namespaceSelector",
            )
        )
    )

    colony: SharedColonyReference = Field(description="The Colony shared with the namespaces below.")
    namespaces: list[NamespaceName] = Field(
        default_factory=list,
        max_length=256,
        description="Namespaces whose GPU requests and placed framework objects may use the colony.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    namespace_selector: LabelSelector | None = Field(
        default=None,
        description="Namespaces whose labels match may use the colony too; an empty selector ({}) "
        "matches every namespace, an absent one none.",
    )


class ColonyShareStatus(ResourceStatus):
    """Observed state of a ColonyShare (the operator only reads ColonyShares)."""


COLONY_SHARE = ResourceDefinition(
    group="infra.exalsius.ai",
    version="v1",
    kind="ColonyShare",
    plural="colonyshares",
    singular="colonyshare",
    short_names=("cshare",),
    spec_model=ColonyShareSpec,
    status_model=ColonyShareStatus,
    scope="Cluster",
    description="A ColonyShare, created by the cluster admin, lets the namespaces it names (listed or "
    "selected by label) place GPU requests and framework objects on one colony of another namespace. "
    "Without one a colony serves its own namespace only; the colony.exalsius.ai/shared label shares "
    "nothing.",
    printer_columns=(
        PrinterColumn("Colony-Namespace", "string", ".spec.colony.namespace", "Namespace of the colony."),
        PrinterColumn("Colony", "string", ".spec.colony.name", "Name of the colony."),
        PrinterColumn("Namespaces", "string", ".spec.namespaces", "Namespaces listed."),
        PrinterColumn(
            "Selector", "string", ".spec.namespaceSelector.matchLabels", "Namespace labels.", priority=1
        ),
        PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since creation."),
    ),
)
