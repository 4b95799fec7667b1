"""The GPU Provisioning Request (GPR) each placed object waits on: one per object, or one per group
(objects with the same groupBy label value) for their summed demand, so the group lands on one colony.

A group's request is sized for the members waiting when it is admitted; it lists them in an
annotation. A member that arrives later gets a request of its own, restricted to the group's colony.
Requests are owned by their objects (garbage-collected with the last of them) and changed only
while they wait: an admitted request keeps its spec.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from colony.api import GPR
from colony.placement.candidates import Candidates
from colony.placement.names import (
    COLONY_ANNOTATION,
    FINISHED_PHASES,
    GROUP_LABEL,
    MEMBERS_ANNOTATION,
    PHASE_ANNOTATION,
    PREFIX,
    WORKLOAD_KIND_LABEL,
    WORKLOAD_NAME_LABEL,
    group_id,
    group_request_name,
    label_value,
    member,
    request_name,
)
from colony.placement.selection import Selection, group_of
from colony.scheduling.queueing.model import ANY_GPU_TYPE
from colony.scheduling.queueing.objects import PENDING_PHASES, RUNNING_PHASES

MANAGED_LABEL = PREFIX + "managed"
"""On every GPR placement creates ("true"): the controller lists them by it."""
SPEC_FIELDS = (
    "gpuShapes",
    "numberOfGPUNodes",
    "numberOfGPUs",
    "priority",
    "queueName",
    "colonies",
    "fillAndSpill",
)


@dataclass(frozen=True)
class Shape:
    """A gang of `nodes` x `gpus_per_node` GPUs of one of `gpu_types` (empty: any type)."""

    nodes: int
    gpus_per_node: int
    gpu_types: tuple[str, ...] = ()


@dataclass(frozen=True)
class Workload:
    """One selected framework object and what placement found out about it."""

    obj: Mapping[str, Any]
    selection: Selection
    candidates: Candidates
    shape: Shape | None
    """Its GPU demand; None when it needs no GPUs or `error` is set."""
    error: str | None = None
    """Why its demand cannot be computed."""

    @property
    def kind(self) -> str:
        return str(self.obj["kind"])

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.obj["metadata"]["namespace"])

    @property
    def member(self) -> str:
        return member(self.kind, self.name)

    @property
    def annotations(self) -> Mapping[str, str]:
        return self.obj["metadata"].get("annotations") or {}

    @property
    def finished(self) -> bool:
        return self.annotations.get(PHASE_ANNOTATION) in FINISHED_PHASES

    @property
    def placed(self) -> bool:
        return bool(self.annotations.get(COLONY_ANNOTATION))

    @property
    def deleting(self) -> bool:
        return bool(self.obj["metadata"].get("deletionTimestamp"))


@dataclass(frozen=True)
class RequestPlan:
    """The GPR an object uses: its name, the object as read (None: none yet), the manifest to apply
    (None: leave it as it is), and whether it may be deleted once this object is finished."""

    name: str
    existing: Mapping[str, Any] | None
    manifest: dict[str, Any] | None = None
    error: str | None = None
    release: bool = True
    members: tuple[str, ...] = field(default_factory=tuple)

    @property
    def phase(self) -> str | None:
        return ((self.existing or {}).get("status") or {}).get("phase") if self.existing else None

    @property
    def present(self) -> bool:
        """It exists and is not being deleted."""
        return self.existing is not None and not self.existing["metadata"].get("deletionTimestamp")

    @property
    def running(self) -> bool:
        return self.present and self.phase in RUNNING_PHASES

    @property
    def waiting(self) -> bool:
        """It waits for GPUs (or does not exist yet): its spec may still change."""
        return self.existing is None or (self.present and self.phase in PENDING_PHASES)


def sum_shapes(shapes: Sequence[Shape]) -> Shape | str:
    """One gang for several: nodes summed, the most GPUs per node, the GPU types all accept; a
    message when no type is acceptable to all."""
    types: set[str] | None = None
    for shape in shapes:
        if shape.gpu_types:
            types = set(shape.gpu_types) if types is None else types & set(shape.gpu_types)
    if types is not None and not types:
        return "the group's members accept no common GPU type"
    return Shape(
        sum(s.nodes for s in shapes), max(s.gpus_per_node for s in shapes), tuple(sorted(types or ()))
    )


def _owner(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"], "uid": meta["uid"]}


def request_manifest(
    name: str,
    owners: Sequence[Workload],
    shape: Shape,
    selection: Selection,
    colonies: Sequence[str],
    ordered: bool,
    labels: Mapping[str, str],
) -> dict[str, Any]:
    """The GPR for `owners` (one namespace), asking for `shape` on `colonies`."""
    spec: dict[str, Any] = {
        "gpuShapes": list(shape.gpu_types) or [ANY_GPU_TYPE],
        "numberOfGPUNodes": shape.nodes,
        "numberOfGPUs": shape.gpus_per_node,
        "priority": selection.spec.priority,
        "colonies": list(colonies),
        "fillAndSpill": ordered,
    }
    if selection.spec.queue_name:
        spec["queueName"] = selection.spec.queue_name
    return {
        "apiVersion": GPR.api_version,
        "kind": GPR.kind,
        "metadata": {
            "name": name,
            "namespace": owners[0].namespace,
            "labels": {MANAGED_LABEL: "true", **labels},
            "annotations": {MEMBERS_ANNOTATION: ",".join(w.member for w in owners)},
            "ownerReferences": [_owner(w.obj) for w in owners],
        },
        "spec": spec,
    }


def differs(desired: Mapping[str, Any], existing: Mapping[str, Any] | None) -> bool:
    """Whether the GPR as read lacks what `desired` says (spec fields, members, owners)."""
    if existing is None:
        return True
    spec = existing.get("spec") or {}
    if any(desired["spec"].get(k) != spec.get(k) for k in SPEC_FIELDS if k != "fillAndSpill"):
        return True
    if bool(desired["spec"].get("fillAndSpill")) != bool(spec.get("fillAndSpill")):
        return True
    meta = existing["metadata"]
    if (meta.get("annotations") or {}).get(MEMBERS_ANNOTATION) != desired["metadata"]["annotations"][
        MEMBERS_ANNOTATION
    ]:
        return True
    owners = {o.get("uid") for o in meta.get("ownerReferences") or []}
    return owners != {o["uid"] for o in desired["metadata"]["ownerReferences"]}


def members_of(gpr: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The objects a GPR was made for (its members annotation)."""
    text = ((gpr or {}).get("metadata", {}).get("annotations") or {}).get(MEMBERS_ANNOTATION) or ""
    return tuple(m for m in text.split(",") if m)


def _single(w: Workload, gprs: Mapping[tuple[str, str], Mapping[str, Any]]) -> RequestPlan:
    name = request_name(w.kind, w.name)
    existing = gprs.get((w.namespace, name))
    plan = RequestPlan(name, existing, members=(w.member,))
    if w.shape is None or w.placed or w.finished or w.deleting or not plan.waiting:
        return plan
    labels = {WORKLOAD_KIND_LABEL: w.kind, WORKLOAD_NAME_LABEL: label_value(w.name)}
    manifest = request_manifest(
        name, [w], w.shape, w.selection, w.candidates.allowed, w.candidates.ordered, labels
    )
    return RequestPlan(name, existing, manifest if differs(manifest, existing) else None, members=(w.member,))


def _follower(w: Workload, colony: str, gprs: Mapping[tuple[str, str], Mapping[str, Any]]) -> RequestPlan:
    """A member that came after its group's request was admitted: a request of its own, on the
    group's colony only."""
    name = request_name(w.kind, w.name)
    existing = gprs.get((w.namespace, name))
    plan = RequestPlan(name, existing, members=(w.member,))
    if w.shape is None or w.placed or w.finished or w.deleting or not plan.waiting:
        return plan
    allowed = [colony] if colony in w.candidates.allowed else []
    labels = {WORKLOAD_KIND_LABEL: w.kind, WORKLOAD_NAME_LABEL: label_value(w.name)}
    manifest = request_manifest(name, [w], w.shape, w.selection, allowed, False, labels)
    error = None if allowed else f"its group runs on colony {colony}, which it may not use"
    return RequestPlan(
        name, existing, manifest if differs(manifest, existing) else None, error, members=(w.member,)
    )


def _group(
    members: Sequence[Workload], key: tuple[str, str, str], gprs: Mapping[tuple[str, str], Mapping[str, Any]]
) -> dict[str, RequestPlan]:
    policy, label_key, value = key
    name = group_request_name(policy, label_key, value)
    namespace = members[0].namespace
    existing = gprs.get((namespace, name))
    plan = RequestPlan(name, existing)
    by_member = {w.member: w for w in members}
    if plan.running:
        listed = members_of(existing)
        colony = str(((existing or {}).get("status") or {}).get("colony") or "")
        plans = {}
        for w in members:
            if w.member in listed:
                others = [by_member[m] for m in listed if m != w.member and m in by_member]
                release = all(o.finished or o.deleting for o in others)
                plans[w.member] = RequestPlan(name, existing, release=release, members=listed)
            else:
                plans[w.member] = _follower(w, colony, gprs)
        return plans
    active = [w for w in members if w.shape is not None and not (w.placed or w.finished or w.deleting)]
    manifest, error = None, None
    if active:
        shape = sum_shapes([w.shape for w in active if w.shape is not None])
        first = active[0].candidates
        allowed = [c for c in first.allowed if all(c in w.candidates.allowed for w in active)]
        if isinstance(shape, str):
            error = shape
        else:
            labels = {GROUP_LABEL: group_id(policy, label_key, value)}
            desired = request_manifest(
                name, active, shape, active[0].selection, allowed, first.ordered, labels
            )
            manifest = desired if differs(desired, existing) else None
    listed = tuple(w.member for w in active)
    return {
        w.member: RequestPlan(name, existing, manifest, error, release=True, members=listed) for w in members
    }


def plan_requests(
    workloads: Sequence[Workload], gprs: Mapping[tuple[str, str], Mapping[str, Any]]
) -> dict[tuple[str, str], RequestPlan]:
    """The request plan of every workload, by (namespace, member); `gprs` by (namespace, name)."""
    plans: dict[tuple[str, str], RequestPlan] = {}
    groups: dict[tuple[str, tuple[str, str, str]], list[Workload]] = {}
    for w in sorted(
        workloads,
        key=lambda w: (w.namespace, str(w.obj["metadata"].get("creationTimestamp") or ""), w.member),
    ):
        key = group_of(w.obj, w.selection)
        if key is None:
            plans[(w.namespace, w.member)] = _single(w, gprs)
        else:
            groups.setdefault((w.namespace, key), []).append(w)
    for (namespace, key), members in groups.items():
        for m, plan in _group(members, key, gprs).items():
            plans[(namespace, m)] = plan
    return plans
