"""The GPUQueue resource: guaranteed GPUs for teams, lent within a cohort (Kueue's ClusterQueue)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from colony.api.base import (
    DNS_LABEL_PATTERN,
    GPU_TYPE_PATTERN,
    MAX_LABEL,
    ApiModel,
    PrinterColumn,
    ResourceDefinition,
    ResourceStatus,
    cel_rules,
)

_SPEC_RULES = cel_rules(
    (
        "(has(self.cohort) && self.cohort != '') || !self.quotas.exists(q, has(q.borrowingLimit))",
        "quotas[].borrowingLimit needs a cohort: a queue without one has nobody to borrow from",
    ),
)
Namespace = Annotated[str, Field(min_length=1, max_length=MAX_LABEL, pattern=DNS_LABEL_PATTERN)]


class GPUQuota(ApiModel):
    """Guaranteed GPUs of one type, and how many more the queue may borrow."""

    gpu_type: str = Field(
        max_length=MAX_LABEL,
        pattern=GPU_TYPE_PATTERN,
        description='GPU type, e.g. H100 or A100-80GB; "*" counts every type.',
    )
    nominal: int = Field(ge=0, description="GPUs guaranteed to the queue.")
    borrowing_limit: int | None = Field(
        default=None,
        ge=0,
        description="Most GPUs the queue may use beyond nominal, from idle quota of its cohort; "
        "absent: no limit but the cohort's idle quota.",
    )


class GPUQueueSpec(ApiModel):
    """Desired state of a GPUQueue."""

    model_config = ConfigDict(json_schema_extra=_SPEC_RULES)

    namespaces: list[Namespace] = Field(
        default_factory=list,
        max_length=256,
        description="Namespaces (tenants) whose GPU requests are charged to this queue.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    cohort: str | None = Field(
        default=None, description="Queues of one cohort lend each other idle quota and reclaim it."
    )
    quotas: list[GPUQuota] = Field(
        min_length=1,
        max_length=32,
        description="Guaranteed GPUs per type.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["gpuType"]},
    )
    fair_sharing_weight: float = Field(
        default=1.0, gt=0, description="Share of idle capacity relative to other queues (weighted DRF)."
    )
    queueing_strategy: Literal["BestEffortFIFO", "ShortestFirst"] | None = Field(
        default=None,
        description="Order of the queue's requests among themselves. BestEffortFIFO: submission order, "
        "with backfill. ShortestFirst: highest response ratio (waited + exitDuration) / exitDuration "
        "first (the shortest first among requests submitted together); a request waiting longer than the "
        "operator's aging time (COLONY_QUEUE_AGING_SECONDS) goes before younger ones, oldest first. "
        "Absent: the operator's COLONY_QUEUE_POLICY.",
    )


class GPUQueueUsage(ApiModel):
    """GPUs of one type the queue uses now."""

    gpu_type: str = Field(description="GPU type.")
    used: int = Field(description="GPUs held by the queue's admitted requests.")
    borrowed: int = Field(default=0, description="Of those, GPUs beyond nominal (borrowed).")


class GPUQueueStatus(ResourceStatus):
    """Observed state of a GPUQueue."""

    pending: int | None = Field(default=None, description="Requests waiting in the queue.")
    admitted: int | None = Field(default=None, description="Requests holding GPUs.")
    usage: list[GPUQueueUsage] = Field(default_factory=list, description="GPUs in use per type.")
    policy: str | None = Field(
        default=None,
        description="The operator's queue policy ordering the requests (COLONY_QUEUE_POLICY: default, "
        "shortest, sjf, fifo or priority); queueingStrategy, when set, orders the queue's own requests "
        "among themselves.",
    )


GPUQUEUE = ResourceDefinition(
    group="infra.exalsius.ai",
    version="v1",
    kind="GPUQueue",
    plural="gpuqueues",
    singular="gpuqueue",
    short_names=("gq",),
    spec_model=GPUQueueSpec,
    status_model=GPUQueueStatus,
    scope="Cluster",
    description="A GPUQueue gives the namespaces it lists guaranteed GPUs per type; idle quota is lent "
    "to the other queues of its cohort and reclaimed by preemption when needed.",
    printer_columns=(
        PrinterColumn("Cohort", "string", ".spec.cohort", "Cohort that shares idle quota."),
        PrinterColumn("Policy", "string", ".status.policy", "The operator's queue policy."),
        PrinterColumn(
            "Strategy", "string", ".spec.queueingStrategy", "Order within the queue (absent: global)."
        ),
        PrinterColumn("Pending", "integer", ".status.pending", "Requests waiting."),
        PrinterColumn("Admitted", "integer", ".status.admitted", "Requests holding GPUs."),
        PrinterColumn("Weight", "number", ".spec.fairSharingWeight", "Fair-sharing weight.", priority=1),
        PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since creation."),
    ),
)
