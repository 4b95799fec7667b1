"""Pure: Kubernetes objects (GPRs, GPUQueues, Nodes, Pods) -> the scheduler core's inputs.

Reservations: the GPUs of an admitted request are reserved by a label on each of its nodes,
`gpr.colony.exalsius.ai/<hash of namespace/name>: "<gpus>"`; workloads that use the reservation
select it (nodeSelector on that key). A node's capacity for the scheduler is its allocatable GPUs
minus GPUs held by pods that use no reservation, minus reservations of requests the snapshot does
not know (another operator's, or a leftover): nothing is double-booked.

The readers of tenant documents (`gpu_request`, `running_request`, `queue_quota`) either return
the core's view or raise `ObjectError` (a ValueError), whatever the document holds: the loop marks
that one object and goes on (its CRD schema keeps most bad data out; this holds without it).
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

from colony.gpu import GPU_PRODUCT_LABEL, GPU_RESOURCE
from colony.labels import RESERVATION_PREFIX
from colony.scheduling.offers.gpu_names import normalize_gpu
from colony.scheduling.queueing.model import (
    ANY_GPU_TYPE,
    GpuNode,
    GpuRequest,
    NodeAllocation,
    Placement,
    QueueQuota,
    QueueStrategy,
    RunningRequest,
)
from colony.timefmt import parse_time

P = ParamSpec("P")
R = TypeVar("R")

RUNNING_PHASES = ("Admitted", "Ready")
PENDING_PHASES = (None, "Queued", "Provisioning")
_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_duration(text: str | None) -> float | None:
    """Seconds of a duration like `1d2h30m15s`; None for None or an empty string."""
    if not text:
        return None
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"not a duration: {text!r} (use e.g. 2h30m)")
    days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


class ObjectError(ValueError):
    """A tenant's object (GPR, GPUQueue) the scheduler core cannot read, and why."""


def _reads(what: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A reader of `what` that raises ObjectError (naming the object's data at fault) for any
    malformed document, instead of the KeyError, TypeError... its code would raise."""

    def wrap(read: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(read)
        def reader(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return read(*args, **kwargs)
            except ObjectError:
                raise
            except (
                LookupError,
                TypeError,
                AttributeError,
                ValueError,
                ArithmeticError,
                RecursionError,
            ) as error:
                raise ObjectError(f"malformed {what}: {type(error).__name__}: {error}") from error

        return reader

    return wrap


def request_key(obj: Mapping[str, Any]) -> str:
    """`namespace/name` of an object."""
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


def reservation_label(key: str) -> str:
    """The node label key that reserves GPUs for request `key` (stable, DNS-safe, short)."""
    return RESERVATION_PREFIX + hashlib.sha256(key.encode()).hexdigest()[:16]


def timestamp(value: Any) -> float | None:
    """Epoch seconds of an RFC 3339 timestamp, or None."""
    moment = parse_time(value)
    return moment.timestamp() if moment else None


def listed_colonies(gpr: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The GPR's `spec.colonies` as colony keys (`namespace/name`; a plain name is in the GPR's
    namespace), in their order; None when the field is absent (any colony)."""
    listed = gpr["spec"].get("colonies")
    if listed is None:
        return None
    namespace = gpr["metadata"]["namespace"]
    keys: list[str] = []
    for name in listed:
        key = str(name) if "/" in str(name) else f"{namespace}/{name}"
        if key not in keys:
            keys.append(key)
    return tuple(keys)


@_reads("GPUProvisioningRequest")
def gpu_request(gpr: Mapping[str, Any], queue: str, colonies: frozenset[str] | None) -> GpuRequest:
    """The core's view of a GPR (spec already validated); with `fillAndSpill` its listed colonies
    are its colony order."""
    spec = gpr["spec"]
    listed = listed_colonies(gpr) if spec.get("fillAndSpill") else None
    types = [spec["gpuShape"]] if spec.get("gpuShape") else list(spec.get("gpuShapes") or [])
    if ANY_GPU_TYPE in types:
        types = []  # any type will do
    submitted = timestamp(gpr["metadata"].get("creationTimestamp")) or 0.0
    return GpuRequest(
        key=request_key(gpr),
        queue=queue,
        priority=int(spec.get("priority", 101)),
        submitted_s=submitted,
        gpu_types=tuple(sorted({normalize_gpu(t) for t in types})),
        nodes=int(spec.get("numberOfGPUNodes", 1)),
        gpus_per_node=int(spec["numberOfGPUs"]),
        duration_s=parse_duration(spec.get("exitDuration")),
        evictable=bool(spec.get("enableEviction", False)),
        auto_provision=bool(spec.get("autoProvision", False)),
        max_price_per_hour=spec.get("maxPricePerHour"),
        colonies=colonies,
        colony_order=listed or (),
    )


@_reads("GPUProvisioningRequest")
def running_request(gpr: Mapping[str, Any], queue: str) -> RunningRequest | None:
    """The core's view of an admitted GPR (None when its allocation is not recorded)."""
    status = gpr.get("status") or {}
    if status.get("phase") not in RUNNING_PHASES or not status.get("nodes") or not status.get("colony"):
        return None
    placement = Placement(
        colony=str(status["colony"]),
        gpu_type=str(status.get("gpuType") or ""),
        nodes=tuple(NodeAllocation(f"{n['cluster']}/{n['node']}", int(n["gpus"])) for n in status["nodes"]),
    )
    started = timestamp(status.get("admittedAt")) or 0.0
    return RunningRequest(gpu_request(gpr, queue, None), placement, started)


@_reads("GPUQueue")
def queue_quota(queue: Mapping[str, Any]) -> QueueQuota:
    """The core's view of a GPUQueue."""
    spec = queue["spec"]
    quotas = spec.get("quotas") or []
    return QueueQuota(
        name=queue["metadata"]["name"],
        nominal={_quota_type(q["gpuType"]): int(q["nominal"]) for q in quotas},
        cohort=spec.get("cohort"),
        borrowing_limit={
            _quota_type(q["gpuType"]): int(q["borrowingLimit"])
            for q in quotas
            if q.get("borrowingLimit") is not None
        },
        weight=float(spec.get("fairSharingWeight", 1.0)),
        strategy=_STRATEGIES.get(spec.get("queueingStrategy") or "", ""),
    )


_STRATEGIES: dict[str, QueueStrategy] = {"BestEffortFIFO": "fifo", "ShortestFirst": "shortest"}
"""GPUQueue spec.queueingStrategy -> QueueQuota.strategy (absent or unknown: the global order)."""


def _quota_type(gpu_type: str) -> str:
    return gpu_type if gpu_type == "*" else normalize_gpu(gpu_type)


def queues_by_namespace(queues: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """namespace -> the GPUQueue listing it (the first by name when several do)."""
    mapping: dict[str, str] = {}
    for queue in sorted(queues, key=lambda q: str(q["metadata"]["name"])):
        for namespace in (queue.get("spec") or {}).get("namespaces") or []:
            mapping.setdefault(namespace, queue["metadata"]["name"])
    return mapping


def _gpus_of(pod: Mapping[str, Any]) -> int:
    total = 0
    for container in pod["spec"].get("containers") or []:
        resources = container.get("resources") or {}
        value = (resources.get("limits") or {}).get(GPU_RESOURCE) or (resources.get("requests") or {}).get(
            GPU_RESOURCE
        )
        total += int(str(value or 0))
    return total


def pod_uses_reservation(pod: Mapping[str, Any]) -> str | None:
    """The reservation label a pod selects, if any."""
    for key in pod["spec"].get("nodeSelector") or {}:
        if key.startswith(RESERVATION_PREFIX):
            return str(key)
    return None


def gpu_nodes(
    colony: str,
    cluster: str,
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    known_reservations: set[str],
) -> list[GpuNode]:
    """Schedulable GPU nodes of one colony cluster, with what is not ours already subtracted."""
    held: dict[str, int] = {}
    for pod in pods:
        node = pod["spec"].get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if node and phase not in ("Succeeded", "Failed") and pod_uses_reservation(pod) is None:
            held[node] = held.get(node, 0) + _gpus_of(pod)
    result = []
    for node in nodes:
        meta, status = node["metadata"], node.get("status") or {}
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
        )
        if not ready or (node.get("spec") or {}).get("unschedulable"):
            continue
        allocatable = int(str((status.get("allocatable") or {}).get(GPU_RESOURCE, 0) or 0))
        labels = meta.get("labels") or {}
        foreign = sum(
            int(value)
            for key, value in labels.items()
            if key.startswith(RESERVATION_PREFIX) and key not in known_reservations and str(value).isdigit()
        )
        capacity = allocatable - held.get(meta["name"], 0) - foreign
        product = labels.get(GPU_PRODUCT_LABEL)
        if capacity > 0 and product:
            result.append(GpuNode(colony, f"{cluster}/{meta['name']}", normalize_gpu(product), capacity))
    return result
