"""The PlacementPolicy resource: which framework custom resources are placed on colonies, and how
(modelled on Elotl Nova's SchedulePolicy).

A framework custom resource (PyTorchJob, RayJob, JobSet, any kind with a WorkloadDefinition) in the
management cluster is placed on a colony when a PlacementPolicy selects it (its namespace, its
labels, its kind) or when it carries the label `placement.exalsius.ai/enabled: "true"`. The policy
says where it may go (colony selector, fill-and-spill order, or a copy on every colony: spread
Duplicate), which objects go together (groupBy) and with which priority and queue it waits for GPUs.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field, field_validator

from colony.api.base import (
    DNS_SUBDOMAIN_PATTERN,
    MAX_NAME,
    ApiModel,
    ColonyReference,
    LabelSelector,
    PrinterColumn,
    ResourceDefinition,
    ResourceStatus,
    cel_rules,
)

SPREAD_MODES = ("Duplicate",)
"""Spread modes supported (Nova's spreadMode); Divide (replicas split across colonies) is not."""
_SPREAD_MESSAGE = "spread.mode must be Duplicate (a copy on every eligible colony); Divide is not supported"


class GroupKind(ApiModel):
    """A kind of custom resource, by API group and kind."""

    group: str = Field(min_length=1, description="API group, e.g. kubeflow.org.")
    kind: str = Field(min_length=1, description="Kind, e.g. PyTorchJob.")


class GroupBy(ApiModel):
    """Objects with the same value of a label are placed together, on one colony."""

    label_key: str = Field(min_length=1, max_length=317, description="The label whose value groups objects.")


class Spread(ApiModel):
    """Spread across colonies (Nova's spreadConstraints): Duplicate places one copy of each object on
    every eligible colony, each with a GPU request of its own restricted to that colony."""

    model_config = ConfigDict(json_schema_extra=cel_rules(("self.mode == 'Duplicate'", _SPREAD_MESSAGE)))

    mode: str = Field(
        max_length=32,
        description="Duplicate: a copy on every eligible colony (the only mode; Divide is not supported).",
    )

    @field_validator("mode")
    @classmethod
    def _supported(cls, mode: str) -> str:
        if mode not in SPREAD_MODES:
            raise ValueError(_SPREAD_MESSAGE)
        return mode


class PlacementPolicySpec(ApiModel):
    """Which custom resources the policy places, and where."""

    namespace_selector: LabelSelector | None = Field(
        default=None,
        description="Namespaces (by their labels; `kubernetes.io/metadata.name` names one) whose objects "
        "the policy places; absent: every namespace the operator watches.",
    )
    resource_selector: LabelSelector | None = Field(
        default=None, description="Labels the objects must carry; absent: every object of its kinds."
    )
    kinds: list[GroupKind] = Field(
        default_factory=list,
        max_length=64,
        description="Kinds the policy places; empty: every kind with a WorkloadDefinition.",
    )
    colony_selector: LabelSelector | None = Field(
        default=None, description="Only place on colonies whose labels match; absent: any colony."
    )
    ordered_colonies: list[ColonyReference] = Field(
        default_factory=list,
        max_length=64,
        description="Fill and spill: only these colonies (`name` in the object's namespace or "
        "`namespace/name`), the first with room gets the object, e.g. on-prem first, then the cloud.",
    )
    group_by: GroupBy | None = Field(
        default=None,
        description="Objects with the same value of this label are placed together: one GPU request for "
        "their summed demand, on one colony.",
    )
    spread: Spread | None = Field(
        default=None,
        description="Spread across colonies: `{mode: Duplicate}` places a copy on every colony the "
        "policy allows that serves the kind (in orderedColonies' order when given); absent: one colony.",
    )
    priority: int = Field(
        default=101, ge=1, le=300, description="Priority of the GPU requests, 1-100 low, 101-200 medium."
    )
    queue_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_NAME,
        pattern=DNS_SUBDOMAIN_PATTERN,
        description="GPUQueue (by name) the requests wait in; default: the namespace's queue.",
    )


class PlacementPolicyStatus(ResourceStatus):
    """Observed state of a PlacementPolicy."""

    selected: int | None = Field(default=None, description="Objects the policy selects now.")
    placed: int | None = Field(default=None, description="Of those, objects placed on a colony.")


PLACEMENT_POLICY = ResourceDefinition(
    group="infra.exalsius.ai",
    version="v1",
    kind="PlacementPolicy",
    plural="placementpolicies",
    singular="placementpolicy",
    short_names=("pp",),
    spec_model=PlacementPolicySpec,
    status_model=PlacementPolicyStatus,
    scope="Cluster",
    description="A PlacementPolicy selects framework custom resources (PyTorchJob, RayJob, JobSet, ...) "
    "of the management cluster and places each on the colony that fits it best: through the GPU "
    "queue, on colonies serving the framework, with fill-and-spill and group placement.",
    printer_columns=(
        PrinterColumn("Priority", "integer", ".spec.priority", "Priority of the GPU requests."),
        PrinterColumn("Queue", "string", ".spec.queueName", "GPUQueue of the GPU requests."),
        PrinterColumn("GroupBy", "string", ".spec.groupBy.labelKey", "Label grouping objects."),
        PrinterColumn("Spread", "string", ".spec.spread.mode", "Duplicate: a copy on every colony."),
        PrinterColumn("Selected", "integer", ".status.selected", "Objects selected."),
        PrinterColumn("Placed", "integer", ".status.placed", "Objects placed on a colony."),
        PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since creation."),
    ),
)
