"""The GPUProvisioningRequest (GPR) resource: a queued request for GPUs, modelled on Avesha EGS."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import ConfigDict, Field

from colony.api.base import (
    DNS_SUBDOMAIN_PATTERN,
    GPU_TYPE_PATTERN,
    MAX_LABEL,
    MAX_NAME,
    ApiModel,
    ColonyReference,
    GpuType,
    LabelSelector,
    PrinterColumn,
    ResourceDefinition,
    ResourceStatus,
    cel_rules,
)

DURATION_PATTERN = r"^([0-9]+d)?([0-9]+h)?([0-9]+m)?([0-9]+s)?$"

_SPEC_RULES = cel_rules(
    (
        "has(self.gpuShape) || (has(self.gpuShapes) && size(self.gpuShapes) > 0)",
        "name the GPU type in gpuShape or the acceptable types in gpuShapes",
    ),
)


class GPRSpec(ApiModel):
    """Desired state of a GPU Provisioning Request."""

    model_config = ConfigDict(json_schema_extra=_SPEC_RULES)

    gpu_shape: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_LABEL,
        pattern=GPU_TYPE_PATTERN,
        description="GPU type, e.g. H100 or A100-80GB (one type; list several in gpuShapes).",
    )
    gpu_shapes: list[GpuType] = Field(
        default_factory=list,
        max_length=16,
        description="Acceptable GPU types, any of which will do; `*` accepts every type.",
    )
    number_of_gpu_nodes: int = Field(
        default=1, alias="numberOfGPUNodes", ge=1, le=1024, description="Number of GPU nodes."
    )
    number_of_gpus: int = Field(alias="numberOfGPUs", ge=1, le=64, description="GPUs per node; at least one.")
    memory_per_gpu: int | None = Field(default=None, ge=1, description="Minimum memory per GPU in GB.")
    priority: int = Field(
        default=101, ge=1, le=300, description="Priority, 1-100 low, 101-200 medium, 201-300 high."
    )
    queue_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_NAME,
        pattern=DNS_SUBDOMAIN_PATTERN,
        description="GPUQueue (by name) the request waits in; defaults to the namespace's queue.",
    )
    exit_duration: str | None = Field(
        default=None,
        pattern=DURATION_PATTERN,
        description="How long the GPUs are held, e.g. 2h30m; also the runtime estimate.",
    )
    idle_time_out_duration: str | None = Field(
        default=None,
        pattern=DURATION_PATTERN,
        description="How long allocated GPUs may stay idle before they are released.",
    )
    enable_eviction: bool = Field(
        default=False, description="Allow higher-priority requests to preempt this one."
    )
    requeue_on_failure: bool = Field(default=True, description="Requeue the request if it fails.")
    colony_selector: LabelSelector | None = Field(
        default=None, description="Only place on colonies whose labels match."
    )
    colonies: list[ColonyReference] | None = Field(
        default=None,
        max_length=64,
        description="Only place on these colonies: `name` (in the request's namespace) or `namespace/name` "
        "(a colony an admin shared with the namespace by a ColonyShare); empty: on none. The placement "
        "controller sets it for framework workloads "
        "(only colonies serving the framework's CRD).",
    )
    fill_and_spill: bool = Field(
        default=False,
        description="Take `colonies` in their order: the first one with room gets the request (fill and "
        "spill), whatever the placement policy ranks first.",
    )
    auto_provision: bool = Field(
        default=False,
        description="Allow provisioning a new (ephemeral, billed) colony for the cheapest offer when no "
        "existing one has room; off by default, so nothing is bought without asking.",
    )
    max_price_per_hour: float | None = Field(
        default=None, ge=0, description="Upper bound on the price in USD per hour of a new colony."
    )


GPRPhase = Literal["Queued", "Admitted", "Provisioning", "Ready", "Released", "Expired", "Evicted", "Failed"]


class NodeAllocationStatus(ApiModel):
    """GPUs reserved for the request on one node."""

    cluster: str = Field(description="Colony cluster the node belongs to.")
    node: str = Field(description="Node name.")
    gpus: int = Field(description="GPUs reserved on it.")


class GPRStatus(ResourceStatus):
    """Observed state of a GPU Provisioning Request."""

    phase: GPRPhase | None = Field(default=None, description="Where the request is in its lifecycle.")
    message: str | None = Field(default=None, description="Why the request is in its phase.")
    queue: str | None = Field(default=None, description="GPUQueue the request is charged to.")
    position_in_queue: int | None = Field(
        default=None, description="1-based position among waiting requests."
    )
    estimated_wait_seconds: int | None = Field(
        default=None, description="Estimated seconds until the request starts (declared durations ahead)."
    )
    estimated_start_time: datetime | None = Field(default=None, description="Estimated start time.")
    colony: str | None = Field(default=None, description="Colony the GPUs were allocated on.")
    gpu_type: str | None = Field(default=None, description="GPU type allocated.")
    gpus_allocated: int | None = Field(default=None, description="GPUs allocated to the request.")
    nodes: list[NodeAllocationStatus] = Field(default_factory=list, description="Reserved GPUs per node.")
    reservation_label: str | None = Field(
        default=None, description="Node label that reserves the GPUs; workloads select it in nodeSelector."
    )
    borrowed: bool | None = Field(
        default=None, description="Whether it runs on quota borrowed from its cohort."
    )
    admitted_at: datetime | None = Field(default=None, description="When the GPUs were allocated.")
    released_at: datetime | None = Field(default=None, description="When the GPUs were given back.")
    provisioned_colony: str | None = Field(
        default=None, description="Ephemeral colony created for this request (auto-provisioning)."
    )
    retry_count: int | None = Field(default=None, description="Requeues after eviction or failure.")
    idle_since: datetime | None = Field(
        default=None, description="Since when no pod has used the reserved GPUs (idle timeout)."
    )
    evicted_by: str | None = Field(default=None, description="Request that preempted this one last.")
    price_per_gpu_hour: float | None = Field(default=None, description="USD per GPU-hour of the colony.")
    gpu_hours: float | None = Field(default=None, description="GPUs held times hours, so far.")
    cost: float | None = Field(default=None, description="USD so far: gpuHours times pricePerGpuHour.")


GPR = ResourceDefinition(
    group="infra.exalsius.ai",
    version="v1",
    kind="GPUProvisioningRequest",
    plural="gpuprovisioningrequests",
    singular="gpuprovisioningrequest",
    short_names=("gpr", "gprs"),
    spec_model=GPRSpec,
    status_model=GPRStatus,
    description="A GPU Provisioning Request asks for GPUs; it waits in a queue with priorities and "
    "quotas and is placed on a colony with free capacity or on a new, cheapest one.",
    printer_columns=(
        PrinterColumn("GPU", "string", ".spec.gpuShape", "Requested GPU type."),
        PrinterColumn("Nodes", "integer", ".spec.numberOfGPUNodes", "GPU nodes requested."),
        PrinterColumn("GPUs/Node", "integer", ".spec.numberOfGPUs", "GPUs per node requested."),
        PrinterColumn("Priority", "integer", ".spec.priority", "Priority of the request."),
        PrinterColumn("Phase", "string", ".status.phase", "Lifecycle phase."),
        PrinterColumn("Position", "integer", ".status.positionInQueue", "Place in the queue."),
        PrinterColumn("Wait(s)", "integer", ".status.estimatedWaitSeconds", "Estimated wait.", priority=1),
        PrinterColumn("Colony", "string", ".status.colony", "Colony the GPUs are on."),
        PrinterColumn("Cost", "number", ".status.cost", "USD so far.", priority=1),
        PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since creation."),
    ),
)
