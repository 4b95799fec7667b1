"""Pure: a DDPJob -> the objects that run it in a cluster (headless Service, Volcano PodGroup, pods).

Every worker runs torchrun with an explicit multi-node rendezvous, so the pods form ONE process
group (the reference operator passed neither --nnodes nor a rendezvous, and each pod trained alone):

    torchrun --nnodes=N --nproc-per-node=M --node-rank=i --rdzv-backend=c10d
             --rdzv-endpoint=<rank-0 pod DNS>:29500 --rdzv-id=<job uid>-<attempt> <script> <args...>

plus the same values as Kubeflow's PET_* variables. Each gang restart is a new `attempt`: new pod
names, a new PodGroup and a new rendezvous id, so no worker of an old attempt can join a new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from colony.api.base import SecretKeyReference
from colony.api.ddpjob import DDPJobSpec
from colony.gpu import GPU_RESOURCE
from colony.labels import ATTEMPT_LABEL, JOB_LABEL, MANAGED_BY, MANAGED_BY_LABEL, RANK_LABEL

GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
RENDEZVOUS_PORT = 29500
WANDB_ENV = "WANDB_API_KEY"

Manifest = dict[str, Any]


@dataclass(frozen=True)
class JobRef:
    """The DDPJob being rendered."""

    name: str
    namespace: str
    uid: str


@dataclass(frozen=True)
class RenderedJob:
    """The objects of one attempt of a job, all in the job's namespace of the target cluster."""

    service: Manifest
    pod_group: Manifest | None
    """None with gangScheduler: default."""
    pods: tuple[Manifest, ...]

    @property
    def manifests(self) -> tuple[Manifest, ...]:
        """Everything, in creation order (the PodGroup before its pods)."""
        return (self.service, *((self.pod_group,) if self.pod_group else ()), *self.pods)


def worker_hostname(job: str, rank: int) -> str:
    """Stable hostname of a worker (the same in every attempt)."""
    return f"{job}-worker-{rank}"


def pod_name(job: str, rank: int, attempt: int) -> str:
    """Pod name of a worker in one attempt."""
    return f"{job}-worker-{rank}-a{attempt}"


def pod_group_name(job: str, attempt: int) -> str:
    """Name of the Volcano PodGroup of one attempt."""
    return f"{job}-a{attempt}"


def rendezvous_endpoint(job: JobRef) -> str:
    """host:port of the c10d rendezvous: the rank-0 worker's DNS name under the headless Service."""
    return f"{worker_hostname(job.name, 0)}.{job.name}.{job.namespace}.svc:{RENDEZVOUS_PORT}"


def rendezvous_id(job: JobRef, attempt: int) -> str:
    """Unique per attempt, so restarted workers never meet workers of an earlier attempt."""
    return f"{job.uid}-{attempt}"


def torchrun_command(job: JobRef, spec: DDPJobSpec, rank: int, attempt: int) -> list[str]:
    """The exact command of worker `rank`."""
    return [
        "torchrun",
        f"--nnodes={spec.parallelism}",
        f"--nproc-per-node={spec.nproc_per_node}",
        f"--node-rank={rank}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={rendezvous_endpoint(job)}",
        f"--rdzv-id={rendezvous_id(job, attempt)}",
        spec.script_path,
        *spec.args,
    ]


def _labels(job: JobRef, attempt: int) -> dict[str, str]:
    return {JOB_LABEL: job.name, ATTEMPT_LABEL: str(attempt), MANAGED_BY_LABEL: MANAGED_BY}


def _env(
    job: JobRef, spec: DDPJobSpec, rank: int, attempt: int, wandb: SecretKeyReference | None
) -> list[Any]:
    master = f"{worker_hostname(job.name, 0)}.{job.name}.{job.namespace}.svc"
    pet = {
        "PET_NNODES": str(spec.parallelism),
        "PET_NPROC_PER_NODE": str(spec.nproc_per_node),
        "PET_NODE_RANK": str(rank),
        "PET_MASTER_ADDR": master,
        "PET_MASTER_PORT": str(RENDEZVOUS_PORT),
        "PET_RDZV_BACKEND": "c10d",
        "PET_RDZV_ENDPOINT": rendezvous_endpoint(job),
        "PET_RDZV_ID": rendezvous_id(job, attempt),
    }
    env: list[Any] = [{"name": k, "value": v} for k, v in pet.items()]
    if wandb is not None:
        env.append({"name": WANDB_ENV, "valueFrom": {"secretKeyRef": {"name": wandb.name, "key": wandb.key}}})
    env += [e.to_wire() for e in spec.env]
    return env


def _resources(spec: DDPJobSpec) -> dict[str, Any]:
    requests = dict(spec.resources.requests) if spec.resources else {}
    limits = dict(spec.resources.limits) if spec.resources else {}
    if not spec.cpu_job:
        limits[GPU_RESOURCE] = spec.nproc_per_node
        requests[GPU_RESOURCE] = spec.nproc_per_node
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return resources


def _pod(
    job: JobRef,
    spec: DDPJobSpec,
    rank: int,
    attempt: int,
    group: str | None,
    wandb: SecretKeyReference | None,
) -> Manifest:
    labels = {**_labels(job, attempt), RANK_LABEL: str(rank)}
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",  # a failed worker restarts the whole gang, not itself
        "automountServiceAccountToken": spec.automount_service_account_token,
        "hostname": worker_hostname(job.name, rank),
        "subdomain": job.name,
        "containers": [
            {
                "name": "worker",
                "image": spec.image,
                "command": torchrun_command(job, spec, rank, attempt),
                "env": _env(job, spec, rank, attempt, wandb),
                "ports": [{"name": "c10d", "containerPort": RENDEZVOUS_PORT}],
                "resources": _resources(spec),
            }
        ],
    }
    if group is not None:
        pod_spec["schedulerName"] = "volcano"
    if spec.node_selector:
        pod_spec["nodeSelector"] = dict(spec.node_selector)
    if spec.tolerations:
        pod_spec["tolerations"] = [t.to_wire() for t in spec.tolerations]
    metadata: dict[str, Any] = {
        "name": pod_name(job.name, rank, attempt),
        "namespace": job.namespace,
        "labels": labels,
    }
    if group is not None:
        metadata["annotations"] = {GROUP_ANNOTATION: group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def _min_resources(spec: DDPJobSpec) -> dict[str, Any]:
    total: dict[str, Any] = {}
    if not spec.cpu_job:
        total[GPU_RESOURCE] = str(spec.parallelism * spec.nproc_per_node)
    requests = spec.resources.requests if spec.resources else {}
    for name, value in requests.items():
        if isinstance(value, int) and name != GPU_RESOURCE:
            total[name] = str(value * spec.parallelism)
    return total


def render_ddpjob(
    job: JobRef, spec: DDPJobSpec, *, attempt: int = 0, wandb_secret: SecretKeyReference | None = None
) -> RenderedJob:
    """The Service, PodGroup (when gang-scheduled by Volcano) and pods of one attempt of `job`.

    `wandb_secret` is where the W&B key lives (the spec's reference, or the Secret the operator
    moved a plain key into); the key itself never appears in a rendered object.
    """
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": job.name, "namespace": job.namespace, "labels": _labels(job, attempt)},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,  # rank 0 must resolve before it reports ready
            "selector": {JOB_LABEL: job.name},
            "ports": [{"name": "c10d", "port": RENDEZVOUS_PORT, "targetPort": RENDEZVOUS_PORT}],
        },
    }
    group = pod_group_name(job.name, attempt) if spec.gang_scheduler == "volcano" else None
    pod_group = None
    if group is not None:
        pod_group = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": group, "namespace": job.namespace, "labels": _labels(job, attempt)},
            "spec": {
                "minMember": spec.parallelism,
                "queue": spec.queue,
                "minResources": _min_resources(spec),
            },
        }
    pods = tuple(_pod(job, spec, rank, attempt, group, wandb_secret) for rank in range(spec.parallelism))
    return RenderedJob(service=service, pod_group=pod_group, pods=pods)
