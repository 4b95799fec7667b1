"""The DDPJob resource: multi-node PyTorch DDP training with torchrun, gang-scheduled."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field

from colony.api.base import (
    DNS_SUBDOMAIN_PATTERN,
    MAX_LABEL,
    MAX_NAME,
    NAME_IS_A_LABEL_VALUE,
    ApiModel,
    GpuType,
    LabelValue,
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


_ENV_RULES = cel_rules(
    ("!(has(self.value) && has(self.valueFrom))", "set either value or valueFrom, not both"),
)


class EnvVar(ApiModel):
    """An environment variable of the workers (as in a container spec)."""

    model_config = ConfigDict(json_schema_extra=_ENV_RULES)

    name: str = Field(min_length=1, description="Name of the variable.")
    value: str | None = Field(default=None, description="Literal value.")
    value_from: dict[str, Any] | None = Field(
        default=None,
        description="Source of the value (secretKeyRef, configMapKeyRef, fieldRef, ...), as in a container.",
        json_schema_extra={"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    )


class ResourceRequirements(ApiModel):
    """Compute resources of each worker container."""

    requests: dict[str, int | str] = Field(
        default_factory=dict, description="Minimum resources, e.g. cpu: 4."
    )
    limits: dict[str, int | str] = Field(
        default_factory=dict, description="Maximum resources, e.g. memory: 64Gi."
    )


class Toleration(ApiModel):
    """A toleration of the workers' pods (as in a pod spec)."""

    key: str | None = Field(default=None, description="Taint key; empty with Exists matches every taint.")
    operator: Literal["Exists", "Equal"] = Field(default="Equal", description="Exists or Equal.")
    value: str | None = Field(default=None, description="Taint value for Equal.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="Taint effect to match; empty matches all."
    )
    toleration_seconds: int | None = Field(default=None, description="How long NoExecute is tolerated.")


class DDPJobSpec(ApiModel):
    """Desired state of a DDPJob."""

    model_config = ConfigDict(json_schema_extra=_SPEC_RULES)

    target_colony: str | None = Field(
        default=None,
        max_length=MAX_LABEL,
        pattern=r"^$|" + DNS_SUBDOMAIN_PATTERN,
        description="Colony (same namespace, by name) to run on; empty runs on the management cluster.",
    )
    gpu_types: list[GpuType] = Field(
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
    env: list[EnvVar] = Field(
        default_factory=list, max_length=128, description="Extra environment variables of every worker."
    )
    resources: ResourceRequirements | None = Field(
        default=None,
        description="CPU/memory (and other) requests and limits per worker; nvidia.com/gpu is set from "
        "nprocPerNode unless cpuJob.",
    )
    backoff_limit: int = Field(
        default=3,
        ge=0,
        le=100,
        description="Whole-gang restarts after a worker failure before the job fails.",
    )
    ttl_seconds_after_finished: int | None = Field(
        default=None, ge=0, description="Delete the finished job's workers this many seconds after it ends."
    )
    active_deadline_seconds: int | None = Field(
        default=None, ge=1, description="Fail the job when it runs longer than this many seconds."
    )
    gang_scheduler: Literal["volcano", "default"] = Field(
        default="volcano",
        description="volcano: all workers start together or not at all (PodGroup); default: kube-scheduler.",
    )
    queue: str = Field(
        default="default",
        min_length=1,
        max_length=MAX_NAME,
        pattern=DNS_SUBDOMAIN_PATTERN,
        description="Volcano queue of the job's PodGroup (an object name).",
    )
    node_selector: dict[str, LabelValue] = Field(
        default_factory=dict, description="Node labels every worker's node must carry."
    )
    tolerations: list[Toleration] = Field(
        default_factory=list, max_length=32, description="Taints the workers tolerate."
    )
    automount_service_account_token: bool = Field(
        default=False,
        description="Mount the namespace's default ServiceAccount token into every worker. Off by "
        "default: training code needs no Kubernetes API access, and a token in a worker is a "
        "credential for anyone whose code runs there.",
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
    colony: str | None = Field(
        default=None, description="Colony the job runs on (empty: management cluster)."
    )
    colony_namespace: str | None = Field(
        default=None,
        description="Namespace of that colony: the job's own, or, when its GPU request was admitted "
        "onto a colony an admin shared with the job's namespace (ColonyShare), the colony's.",
    )
    attempt: int | None = Field(
        default=None, description="Current attempt; each gang restart starts a new one."
    )
    restarts: int | None = Field(default=None, description="Whole-gang restarts so far.")
    message: str | None = Field(default=None, description="Why the job is in its phase.")
    teardown_requested_at: datetime | None = Field(
        default=None, description="When deletion of the job's ephemeral colony was requested."
    )
    settled_at: datetime | None = Field(
        default=None,
        description="When the operator finished its follow-up of the finished job (its GPR deleted, "
        "its ephemeral colony's teardown requested or left to the colony's last job); from then on "
        "it spends nothing on the job, which only waits for ttlSecondsAfterFinished, if any.",
    )
    price_per_gpu_hour: float | None = Field(
        default=None, description="USD per GPU-hour of the colony when the job was placed (unknown: absent)."
    )
    gpu_request: str | None = Field(
        default=None,
        description="GPUProvisioningRequest holding the job's GPUs (gpuTypes without targetColony).",
    )
    reservation_label: str | None = Field(
        default=None, description="Node label of that request's reservation; the workers select it."
    )
    gpu_hours: float | None = Field(default=None, description="GPUs held times hours, so far.")
    cost: float | None = Field(default=None, description="USD so far: gpuHours times pricePerGpuHour.")


DDPJOB = ResourceDefinition(
    group="training.exalsius.ai",
    version="v1",
    kind="DDPJob",
    plural="ddpjobs",
    singular="ddpjob",
    short_names=("ddp",),
    root_rules=(NAME_IS_A_LABEL_VALUE,),  # the job-name label of its pods, PodGroup and GPR
    spec_model=DDPJobSpec,
    status_model=DDPJobStatus,
    description="A DDPJob runs multi-node PyTorch DDP training (torchrun) on a colony, gang-scheduled.",
    printer_columns=(
        PrinterColumn("Colony", "string", ".spec.targetColony", "Colony the job runs on."),
        PrinterColumn("Workers", "integer", ".spec.parallelism", "Worker pods (nodes)."),
        PrinterColumn("GPUs/Node", "integer", ".spec.nprocPerNode", "Processes and GPUs per worker."),
        PrinterColumn("Phase", "string", ".status.phase", "High-level state of the job."),
        PrinterColumn("Ready", "integer", ".status.workersReady", "Workers running."),
        PrinterColumn("GPU-h", "number", ".status.gpuHours", "GPU-hours used so far."),
        PrinterColumn("Cost", "number", ".status.cost", "USD so far."),
        PrinterColumn("Cluster", "string", ".status.cluster", "Cluster the workers run on.", priority=1),
        PrinterColumn("Restarts", "integer", ".status.restarts", "Whole-gang restarts.", priority=1),
        PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since creation."),
    ),
)
