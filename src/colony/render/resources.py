"""Pure: what the controllers derive from a live Colony or DDPJob object before rendering it.

The controllers and `colony render` both go through these functions, so the CLI prints exactly
what the operator would create: hosted control-plane ports (recorded in status, else allocated
past the ports other colonies recorded), the Secret a plain W&B key is moved into, the node
selector of a GPU reservation, and the attempt the job is on.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from colony.api.base import SecretKeyReference
from colony.api.colony import ColonyCluster, ColonySpec
from colony.api.ddpjob import DDPJobSpec
from colony.render.colony import render_colony
from colony.render.contract import ColonyRef, HostedControlPlanePorts, RenderedColony
from colony.render.ddpjob import JobRef, RenderedJob, render_ddpjob
from colony.render.ports import allocate_hosted_ports, hosted_ports_key

UNKNOWN_UID = "00000000-0000-0000-0000-000000000000"
"""The uid rendered for an object that has none yet (the API server assigns it on creation)."""

WANDB_SECRET_KEY = "value"


def hosted_clusters(spec: ColonySpec) -> list[ColonyCluster]:
    """Clusters whose control plane is hosted in the management cluster (remote ones always are)."""
    return [c for c in spec.colony_clusters if spec.hosted_control_plane_enabled or c.provider == "remote"]


def hosted_ports(
    namespace: str,
    name: str,
    spec: ColonySpec,
    status: Mapping[str, Any],
    other_colonies: Iterable[Mapping[str, Any]] = (),
) -> dict[str, HostedControlPlanePorts]:
    """Hosted control-plane ports by clusterName: the ones recorded in `status`, else freshly
    allocated ones that no colony in `other_colonies` (live objects; this one is skipped) recorded."""
    hosted = hosted_clusters(spec)
    if not hosted:
        return {}
    recorded = {
        c["name"]: HostedControlPlanePorts(
            c["hostedControlPlane"]["apiPort"], c["hostedControlPlane"]["konnectivityPort"]
        )
        for c in status.get("clusters") or []
        if c.get("hostedControlPlane")
    }
    used: set[int] = set()
    for other in other_colonies:
        if (other["metadata"].get("namespace"), other["metadata"]["name"]) == (namespace, name):
            continue
        for entry in (other.get("status") or {}).get("clusters") or []:
            taken = entry.get("hostedControlPlane") or {}
            used |= {int(port) for port in (taken.get("apiPort"), taken.get("konnectivityPort")) if port}
    ports: dict[str, HostedControlPlanePorts] = {}
    for cluster in hosted:
        allocated = recorded.get(cluster.cluster_name) or allocate_hosted_ports(
            hosted_ports_key(namespace, name, cluster.cluster_name), used
        )
        used |= {allocated.api, allocated.konnectivity}
        ports[cluster.cluster_name] = allocated
    return ports


def moved_wandb_secret_name(job: str) -> str:
    """The Secret (same namespace as the job) a plain `wandbApiKey` is moved into."""
    return f"{job}-wandb"


LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"


def without_plain_wandb_key(last_applied: str) -> str | None:
    """kubectl's last-applied-configuration annotation without `spec.wandbApiKey`; None when it
    holds none (or is not a JSON object). `kubectl apply` writes the plain key there; once the key
    is moved into a Secret, anyone who can read the DDPJob would still read it in the annotation."""
    try:
        applied = json.loads(last_applied)
    except ValueError:
        return None
    spec = applied.get("spec") if isinstance(applied, dict) else None
    if not isinstance(spec, dict) or "wandbApiKey" not in spec:
        return None
    del spec["wandbApiKey"]
    return json.dumps(applied, separators=(",", ":")) + "\n"


def wandb_reference(job: str, spec: DDPJobSpec) -> SecretKeyReference | None:
    """Where the workers read the W&B key from: the moved Secret for a plain key, else the spec's ref."""
    if spec.wandb_api_key:
        return SecretKeyReference(name=moved_wandb_secret_name(job), key=WANDB_SECRET_KEY)
    return spec.wandb_api_key_secret_ref


def gpu_request_name(job: str) -> str:
    """The GPUProvisioningRequest a DDPJob with gpuTypes and no targetColony creates for its GPUs."""
    return f"{job}-gpus"


def on_reservation(spec: DDPJobSpec, status: Mapping[str, Any]) -> DDPJobSpec:
    """The spec with the workers pinned to the GPR's reserved nodes (when the job has one)."""
    label = status.get("reservationLabel")
    if not label:
        return spec
    return spec.model_copy(update={"node_selector": {**spec.node_selector, label: str(spec.nproc_per_node)}})


def render_colony_resource(
    body: Mapping[str, Any], other_colonies: Iterable[Mapping[str, Any]] = ()
) -> RenderedColony:
    """Render a Colony object (metadata, spec and optional status) as the controller does.

    Raises pydantic.ValidationError for an invalid spec.
    """
    meta = body["metadata"]
    spec = ColonySpec.model_validate(body.get("spec") or {})
    ref = ColonyRef(name=meta["name"], namespace=meta["namespace"], uid=meta.get("uid") or UNKNOWN_UID)
    ports = hosted_ports(ref.namespace, ref.name, spec, body.get("status") or {}, other_colonies)
    return render_colony(ref, spec, ports)


def render_ddpjob_resource(body: Mapping[str, Any]) -> RenderedJob:
    """Render a DDPJob object's current attempt (from status, else the first) as the controller does.

    Raises pydantic.ValidationError for an invalid spec.
    """
    meta = body["metadata"]
    status = body.get("status") or {}
    spec = DDPJobSpec.model_validate(body.get("spec") or {})
    job = JobRef(meta["name"], meta["namespace"], meta.get("uid") or UNKNOWN_UID)
    wandb = wandb_reference(job.name, spec)
    attempt = int(status.get("attempt") or 0)
    return render_ddpjob(job, on_reservation(spec, status), attempt=attempt, wandb_secret=wandb)
