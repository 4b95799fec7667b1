"""What a framework custom resource asks for: pods, GPUs, CPU and memory per pod set.

`compute_demand` reads an object through its WorkloadDefinition: every component (and, for a
component with `instancesPath`, every instance of it) whose pod template is present becomes a
`PodSetDemand`. Per pod, resources are counted the way Kubernetes counts a pod's request:

- GPUs (`nvidia.com/gpu`): each container's limit, else its request;
- CPU and memory: each container's request, else its limit (the API server defaults a missing
  request to the limit), plus the pod's `overhead`;
- init containers: the pod needs max(sum of the app containers and sidecars, the largest init
  container plus the sidecars started before it); a sidecar is an init container with
  `restartPolicy: Always`.

GPU types come from the pod template's node selector or required node affinity (operator `In`) on
the GPU product label `nvidia.com/gpu.product` (or GKE's `cloud.google.com/gke-accelerator`), as
canonical names (`colony.scheduling.offers.gpu_names.normalize_gpu`: "NVIDIA-A100-SXM4-80GB" is
"A100-80GB", "nvidia-tesla-t4" is "T4"). An empty tuple means any type.

`WorkloadDemand.request_shape()` turns the demand into one conservative gang request for the GPU
scheduler: one node per GPU pod, each with as many GPUs as the largest GPU pod.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

from colony.gpu import GPU_PRODUCT_LABEL, GPU_RESOURCE
from colony.scheduling.offers.gpu_names import normalize_gpu
from colony.workloads.definition import (
    ComponentDefinition,
    EvaluationError,
    WorkloadDefinition,
    describe_object,
    evaluate,
)

GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
GPU_TYPE_LABELS = (GPU_PRODUCT_LABEL, GKE_ACCELERATOR_LABEL)
"""Node labels whose values name the GPU type a pod template asks for."""


class DemandError(ValueError):
    """The demand of an object cannot be computed or cannot be placed (the message says why)."""


@dataclass(frozen=True)
class PodSetDemand:
    """Identical pods from one pod template: a component, or one instance of it."""

    component: str
    instance: str | None
    pods: int
    gpus_per_pod: int
    gpu_types: tuple[str, ...]
    """Canonical GPU types the pods accept; empty: any type."""
    cpu_millis: int
    """CPU request per pod, in millicores."""
    memory_bytes: int
    """Memory request per pod, in bytes."""
    scheduler_name: str | None = None
    """The pod template's schedulerName (None: the cluster's default scheduler)."""

    @property
    def name(self) -> str:
        """`component` or `component/instance`."""
        return self.component if self.instance is None else f"{self.component}/{self.instance}"

    @property
    def total_gpus(self) -> int:
        """GPUs of all pods of the set."""
        return self.pods * self.gpus_per_pod


@dataclass(frozen=True)
class RequestShape:
    """One gang GPU request: `nodes` slots of `gpus_per_node` GPUs of one of `gpu_types` (empty: any)."""

    nodes: int
    gpus_per_node: int
    gpu_types: tuple[str, ...]


@dataclass(frozen=True)
class GangDemand:
    """The pod sets of one gang group: scheduled all or nothing."""

    name: str
    components: tuple[str, ...]
    pods: int
    total_gpus: int


@dataclass(frozen=True)
class WorkloadDemand:
    """Everything an object asks for, per pod set, read through its definition."""

    definition: str
    """Name of the WorkloadDefinition used."""
    subject: str
    """The object, as `<Kind> <namespace>/<name>`."""
    pod_sets: tuple[PodSetDemand, ...]
    gangs: tuple[GangDemand, ...] = field(default=())

    @property
    def total_pods(self) -> int:
        """Pods of every pod set."""
        return sum(p.pods for p in self.pod_sets)

    @property
    def total_gpus(self) -> int:
        """GPUs of every pod."""
        return sum(p.total_gpus for p in self.pod_sets)

    @property
    def gpu_pods(self) -> int:
        """Pods that ask for at least one GPU."""
        return sum(p.pods for p in self.pod_sets if p.gpus_per_pod > 0)

    def gpus_by_type(self) -> dict[tuple[str, ...], int]:
        """GPUs per accepted-type tuple (`()`: any type), over pod sets with GPUs."""
        result: dict[tuple[str, ...], int] = {}
        for pod_set in self.pod_sets:
            if pod_set.total_gpus:
                result[pod_set.gpu_types] = result.get(pod_set.gpu_types, 0) + pod_set.total_gpus
        return result

    def request_shape(self) -> RequestShape:
        """A conservative single-shape gang request for the GPU scheduler.

        One node slot per GPU pod; every slot gets the GPUs of the largest GPU pod; pods without
        GPUs are not counted. The GPU types are those every GPU pod set accepts. Raises
        `DemandError` when no pod asks for a GPU or when pod sets name GPU types with nothing in
        common.
        """
        gpu_sets = [p for p in self.pod_sets if p.gpus_per_pod > 0 and p.pods > 0]
        if not gpu_sets:
            raise DemandError(
                f"{self.subject} asks for no GPUs: no pod template of it requests {GPU_RESOURCE} "
                f"(read with WorkloadDefinition {self.definition!r}), so there is nothing to place"
            )
        accepted: set[str] | None = None
        for pod_set in gpu_sets:
            if pod_set.gpu_types:
                accepted = set(pod_set.gpu_types) if accepted is None else accepted & set(pod_set.gpu_types)
        if accepted is not None and not accepted:
            asked = "; ".join(f"{p.name}: {', '.join(p.gpu_types)}" for p in gpu_sets if p.gpu_types)
            raise DemandError(
                f"{self.subject} asks for GPU types that cannot be combined in one request ({asked})"
            )
        return RequestShape(
            nodes=sum(p.pods for p in gpu_sets),
            gpus_per_node=max(p.gpus_per_pod for p in gpu_sets),
            gpu_types=tuple(sorted(accepted or ())),
        )


# --- quantities -----------------------------------------------------------------------------------

_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<exponent>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$"
)
_SUFFIX_FACTORS: dict[str, Decimal] = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    **{suffix: Decimal(1024**power) for power, suffix in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), 1)},
}


MAX_QUANTITY = Decimal(2**63 - 1)
"""The largest quantity accepted: Kubernetes itself keeps quantities within a signed 64-bit count."""


def parse_quantity(value: str | int | float) -> Decimal:
    """A Kubernetes resource quantity ("500m", "2Gi", "1e3", 4) as a number.

    Raises DemandError (a ValueError) when it is malformed, not finite, or larger in magnitude than
    MAX_QUANTITY (a hostile "1e999999999" must not overflow the arithmetic that follows).
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise DemandError(f"not a quantity: {_preview(value)}")
    text = str(value).strip()
    match = _QUANTITY.match(text) if len(text) <= 64 else None
    if not match:
        raise DemandError(f"not a quantity: {_preview(value)}")
    exponent = match["exponent"]
    if exponent is not None and abs(int(exponent[1:])) > 30:
        raise DemandError(f"quantity out of range: {_preview(value)}")
    try:
        number = Decimal(match["number"] + (exponent or ""))
    except InvalidOperation:
        raise DemandError(f"not a quantity: {_preview(value)}") from None
    quantity = number * _SUFFIX_FACTORS.get(match["suffix"] or "", Decimal(1))
    if not quantity.is_finite() or abs(quantity) > MAX_QUANTITY:
        raise DemandError(f"quantity out of range: {_preview(value)}")
    return quantity


def _preview(value: object) -> str:
    """A bounded repr of a value for error messages (hostile values can be megabytes long)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _mapping(value: Any, what: str) -> Mapping[str, Any]:
    """`value` when it is a mapping, {} when absent; ValueError naming `what` otherwise."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{what} must be an object, got {type(value).__name__}")
    return value


def _sequence(value: Any, what: str) -> Sequence[Any]:
    """`value` when it is a list, [] when absent; ValueError naming `what` otherwise."""
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise ValueError(f"{what} must be a list, got {type(value).__name__}")
    return value


def _ceil(value: Decimal) -> int:
    return int(value.to_integral_value(rounding=ROUND_CEILING))


# --- one pod --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodResources:
    """What one pod of a template requests."""

    gpus: int
    cpu_millis: int
    memory_bytes: int


def _container_amount(container: Mapping[str, Any], resource: str, order: Sequence[str]) -> Decimal:
    resources = _mapping(_mapping(container, "a container").get("resources"), "resources")
    for key in order:
        value = _mapping(resources.get(key), f"resources.{key}").get(resource)
        if value is not None:
            amount = parse_quantity(value)
            if amount < 0:
                raise ValueError(f"{resource} must not be negative, got {_preview(value)}")
            return amount
    return Decimal(0)


def _pod_amount(pod_spec: Mapping[str, Any], resource: str, order: Sequence[str]) -> Decimal:
    """A pod's effective request of one resource (init containers and sidecars as Kubernetes does)."""
    containers = _sequence(pod_spec.get("containers"), "containers")
    app = sum((_container_amount(c, resource, order) for c in containers), Decimal(0))
    sidecars = Decimal(0)
    init_peak = Decimal(0)
    for container in _sequence(pod_spec.get("initContainers"), "initContainers"):
        amount = _container_amount(container, resource, order)
        if _mapping(container, "an init container").get("restartPolicy") == "Always":
            sidecars += amount
            init_peak = max(init_peak, sidecars)
        else:
            init_peak = max(init_peak, sidecars + amount)
    return max(app + sidecars, init_peak)


def pod_resources(pod_spec: Mapping[str, Any]) -> PodResources:
    """GPUs, CPU and memory one pod of this PodSpec requests.

    Raises ValueError on a malformed or out-of-range quantity or a field of the wrong type.
    """
    pod_spec = _mapping(pod_spec, "the pod spec")
    gpus = _pod_amount(pod_spec, GPU_RESOURCE, ("limits", "requests"))
    if gpus != gpus.to_integral_value() or gpus < 0:
        raise ValueError(f"{GPU_RESOURCE} must be a whole number, got {gpus}")
    overhead = _mapping(pod_spec.get("overhead"), "overhead")
    cpu = _pod_amount(pod_spec, "cpu", ("requests", "limits")) + parse_quantity(overhead.get("cpu", 0))
    memory = _pod_amount(pod_spec, "memory", ("requests", "limits")) + parse_quantity(
        overhead.get("memory", 0)
    )
    return PodResources(gpus=int(gpus), cpu_millis=_ceil(cpu * 1000), memory_bytes=_ceil(memory))


def _affinity_gpu_types(pod_spec: Mapping[str, Any]) -> set[str] | None:
    """GPU types the required node affinity allows; None when it does not constrain them.

    Raises ValueError when a field on the way has the wrong type.
    """
    affinity = _mapping(pod_spec.get("affinity"), "affinity")
    node_affinity = _mapping(affinity.get("nodeAffinity"), "affinity.nodeAffinity")
    required = _mapping(
        node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"),
        "nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
    )
    terms = _sequence(required.get("nodeSelectorTerms"), "nodeSelectorTerms")
    allowed: set[str] = set()
    for term in terms:
        term_types: set[str] | None = None
        for expression in _sequence(
            _mapping(term, "a node selector term").get("matchExpressions"), "matchExpressions"
        ):
            expression = _mapping(expression, "a match expression")
            if expression.get("key") in GPU_TYPE_LABELS and expression.get("operator") == "In":
                values = {normalize_gpu(str(v)) for v in _sequence(expression.get("values"), "values")}
                term_types = values if term_types is None else term_types & values
        if term_types is None:
            return None  # terms are ORed: this one admits any GPU type
        allowed |= term_types
    return allowed if terms else None


def template_gpu_types(pod_spec: Mapping[str, Any]) -> tuple[str, ...]:
    """Canonical GPU types a PodSpec accepts (node selector and required affinity); () means any.

    Raises ValueError when the constraints exclude each other (no GPU type satisfies them all).
    """
    allowed: set[str] | None = None
    pod_spec = _mapping(pod_spec, "the pod spec")
    selector = _mapping(pod_spec.get("nodeSelector"), "nodeSelector")
    for label in GPU_TYPE_LABELS:
        if label in selector:
            value = {normalize_gpu(str(selector[label]))}
            allowed = value if allowed is None else allowed & value
    from_affinity = _affinity_gpu_types(pod_spec)
    if from_affinity is not None:
        allowed = from_affinity if allowed is None else allowed & from_affinity
    if allowed is not None and not allowed:
        raise ValueError("its node selector and node affinity admit no GPU type at all")
    return tuple(sorted(allowed or ()))


# --- the object -----------------------------------------------------------------------------------


def _scopes(
    definition: WorkloadDefinition, index: int, component: ComponentDefinition, obj: Mapping[str, Any]
) -> Iterable[tuple[str | None, Any]]:
    """(instance name, value the component's relative expressions are evaluated on)."""
    if component.instances_path is None:
        yield None, obj
        return
    where = f"spec.components[{index}]"
    for position, instance in enumerate(
        evaluate(definition, f"{where}.instancesPath", component.instances_path, obj, obj)
    ):
        name = str(position)
        if component.instance_name_path is not None:
            found = evaluate(
                definition, f"{where}.instanceNamePath", component.instance_name_path, instance, obj
            )
            if found and found[0] is not None:
                name = str(found[0])
        yield name, instance


MAX_REPLICAS = 1_000_000
"""More pods than any cluster holds: a larger count is a typo or an attack, not a demand."""


def _replicas(value: Any) -> int:
    if value is None:
        return 1
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= MAX_REPLICAS
        or value != int(value)
    ):
        raise ValueError(
            f"replicas must be a whole number >= 0 (at most {MAX_REPLICAS}), got {_preview(value)}"
        )
    return int(value)


def _scheduler_name(pod_spec: Mapping[str, Any]) -> str | None:
    name = pod_spec.get("schedulerName")
    return name if isinstance(name, str) and name else None


def compute_demand(definition: WorkloadDefinition, obj: Mapping[str, Any]) -> WorkloadDemand:
    """The demand of one custom resource, read through its definition.

    A component whose pod template evaluates to null is absent from this object and contributes no
    pod set. Raises `DemandError` when an expression fails on the object or yields something that
    is not a pod template or a replica count, or when a template holds a malformed quantity.
    """
    subject = describe_object(obj)
    pod_sets: list[PodSetDemand] = []
    try:
        for index, component in enumerate(definition.components):
            where = f"spec.components[{index}]"
            for instance, scope in _scopes(definition, index, component, obj):
                label = f"{subject}, component {component.name}" + (
                    f" instance {instance}" if instance is not None else ""
                )
                found = evaluate(
                    definition, f"{where}.podTemplatePath", component.pod_template_path, scope, obj
                )
                template = found[0] if found else None
                if template is None:
                    continue
                if not isinstance(template, Mapping):
                    raise DemandError(
                        f"{label}: podTemplatePath {component.pod_template_path!r} yields "
                        f"{type(template).__name__}, not a pod template"
                    )
                replicas = evaluate(definition, f"{where}.replicasPath", component.replicas_path, scope, obj)
                try:
                    pod_spec = _mapping(template.get("spec"), "the pod template's spec")
                    pods = _replicas(replicas[0] if replicas else None)
                    resources = pod_resources(pod_spec)
                    gpu_types = template_gpu_types(pod_spec)
                except ValueError as error:
                    raise DemandError(f"{label}: {error}") from None
                pod_sets.append(
                    PodSetDemand(
                        component=component.name,
                        instance=instance,
                        pods=pods,
                        gpus_per_pod=resources.gpus,
                        gpu_types=gpu_types,
                        cpu_millis=resources.cpu_millis,
                        memory_bytes=resources.memory_bytes,
                        scheduler_name=_scheduler_name(pod_spec),
                    )
                )
    except EvaluationError as error:
        raise DemandError(str(error)) from None
    except RecursionError:  # the API server accepts objects nested thousands deep
        raise DemandError(f"{subject} is nested too deeply to read") from None
    gangs = tuple(
        GangDemand(
            name=gang.name,
            components=tuple(gang.members),
            pods=sum(p.pods for p in pod_sets if p.component in gang.members),
            total_gpus=sum(p.total_gpus for p in pod_sets if p.component in gang.members),
        )
        for gang in definition.gang_groups
    )
    return WorkloadDemand(definition=definition.name, subject=subject, pod_sets=tuple(pod_sets), gangs=gangs)
