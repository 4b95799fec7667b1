"""The DDPJob resource: multi-node PyTorch DDP training with torchrun, gang-scheduled."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import ConfigDict, Field

from colony.api.base import (
    ApiModel,
    PrinterColumn,
    ResourceDefinition,
    ResourceStatus,
    SecretKeyReference,
    cel_rules,
)

_SPEC_RULES = cel_rules(
    (
        "!(has(self.wandbApiKey) && has(self.wandbApiKeySecretRef))",
        "set either wandbApiKey or wandbApiKeySecretRef, not both",
    ),
)


class DDPJobSpec(ApiModel):
    """Desired state of a DDPJob."""

    model_config = ConfigDict(json_schema_extra=_SPEC_RULES)

    target_colony: str | None = Field(
        default=None,
        description="Colony (same namespace) to run on; empty runs on the management cluster.",
    )
    gpu_types: list[str] = Field(
        default_factory=list,
        max_length=16,
        description="Acceptable GPU types, e.g. [A100, H100]; used to provision a colony when "
        "targetColony is empty.",
    )
    cpu_job: bool = Field(default=False, description="Run without GPUs (no nvidia.com/gpu requests).")
    parallelism: int = Field(default=1, ge=1, le=1024, description="Number of worker pods (nodes).")
    nproc_per_node: int = Field(
        default=1, ge=1, le=64, description="torchrun processes per pod; also the GPUs requested per pod."
    )
    image: str = Field(min_length=1, description="Container image holding the training code.")
    script_path: str = Field(min_length=1, description="Path of the training script inside the image.")
    args: list[str] = Field(default_factory=list, description="Arguments passed to the training script.")
    wandb_api_key: str | None = Field(
        default=None,
        description="Deprecated: a plain Weights & Biases key. The operator moves it into a Secret and "
        "warns; use wandbApiKeySecretRef instead.",
    )
    wandb_api_key_secret_ref: SecretKeyReference | None = Field(
        default=None, description="Secret key holding the Weights & Biases API key."
    )


DDPJobPhase = Literal["Pending", "Scheduling", "Running", "Restarting", "Succeeded", "Failed"]


class DDPJobStatus(ResourceStatus):
    """Observed state of a DDPJob."""

    phase: DDPJobPhase | None = Field(default=None, description="High-level summary of the job's state.")
    cluster: str | None = Field(default=None, description="Cluster the workers run on.")
    workers_ready: int | None = Field(default=None, description="Workers that are running.")
    workers_total: int | None = Field(default=None, description="Workers the job needs.")
    start_time: datetime | None = Field(default=None, description="When the workers started.")
    completion_time: datetime | None = Field(default=None, description="When the job finished.")


DDPJOB = ResourceDefinition(
    group="training.exalsius.ai",
    version="v1",
    kind="DDPJob",
    plural="ddpjobs",
    singular="ddpjob",
    short_names=("ddp",),
    spec_model=DDPJobSpec,
    status_model=DDPJobStatus,
    description="A DDPJob runs multi-node PyTorch DDP training (torchrun) on a colony, gang-scheduled.",
    printer_columns=(
        PrinterColumn("Colony", "string", ".spec.targetColony", "Colony the job runs on."),
        PrinterColumn("Workers", "integer", ".spec.parallelism", "Worker pods (nodes)."),
        PrinterColumn("GPUs/Node", "integer", ".spec.nprocPerNode", "Processes and GPUs per worker."),
        PrinterColumn("Phase", "string", ".status.phase", "High-level state of the job."),
        PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since creation."),
    ),
)
