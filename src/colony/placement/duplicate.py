"""Spread Duplicate (Nova's spreadConstraints.spreadMode Duplicate): one copy of an object on every
eligible colony.

The eligible colonies are its candidates (visible, Ready, chosen by the policy's colonySelector and
orderedColonies, serving the kind's CRD). Per eligible colony the object gets a GPU request of its own,
`<kind>-<name>--<colony>`, restricted to that colony (`spec.colonies: [colony]`), and a copy in that
colony's cluster once the request is Ready (an object asking for no GPUs: at once). The copies are
recorded on the original in one annotation (COPIES_ANNOTATION: JSON of cluster, phase and generation
per colony); its phase annotation is the worst of the copies' phases (a colony still waiting counts as
Queued) and its `.status` mirrors the copy with that worst phase.

A colony that leaves the eligible set (policy change, not Ready, deleted, CRD gone) loses its copy and
its request; a lost request or copy is asked for again; deleting the original deletes every copy and
request (finalizer). Once the object is finished (every copy Succeeded or Failed) no new copies are
made.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from colony.labels import FINALIZER
from colony.placement.decide import (
    TERMINAL_REQUEST_PHASES,
    Action,
    AddFinalizer,
    Annotate,
    ApplyCopy,
    ApplyRequest,
    Cleanup,
    DeleteCopy,
    DeleteRequest,
    Event,
    MirrorStatus,
    Observed,
    PhaseOf,
    Pin,
    RemoveFinalizer,
    conclude_cleanup,
    copy_left,
    release_object,
    render_copy,
    request_or_copy_lost,
)
from colony.placement.names import (
    COLONY_ANNOTATION,
    COPIES_ANNOTATION,
    FINISHED_PHASES,
    MESSAGE_ANNOTATION,
    PHASE_ANNOTATION,
    WORKLOAD_KIND_LABEL,
    WORKLOAD_NAME_LABEL,
    duplicate_request_name,
    label_value,
)
from colony.placement.requests import RequestPlan, Workload, differs, request_manifest
from colony.placement.selection import Selection

DUPLICATE = "Duplicate"
PHASE_RANK = {"Failed": 0, "Unplaceable": 0, "Queued": 1, "Pending": 2, "Running": 3, "Succeeded": 4}
"""Worst first: the original's phase is the lowest of its copies'."""


def is_duplicate(selection: Selection) -> bool:
    """Whether the selection spreads the object across colonies (mode Duplicate)."""
    spread = selection.spec.spread
    return spread is not None and spread.mode == DUPLICATE


@dataclass(frozen=True)
class Record:
    """A copy on one colony, as recorded on the original."""

    cluster: str
    phase: str
    generation: str


def records(w: Workload) -> dict[str, Record]:
    """The copies recorded on the original, by colony (`namespace/name`); {} when none or unreadable."""
    return records_in(w.annotations)


def records_in(annotations: Mapping[str, str]) -> dict[str, Record]:
    """The copies recorded in an original's annotations, by colony."""
    text = annotations.get(COPIES_ANNOTATION)
    if not text:
        return {}
    try:
        raw = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(raw, dict):
        return {}
    return {
        str(colony): Record(
            str(r.get("cluster", "")), str(r.get("phase", "Pending")), str(r.get("generation", ""))
        )
        for colony, r in raw.items()
        if isinstance(r, dict)
    }


def encode(found: Mapping[str, Record]) -> str | None:
    """The annotation value of the records (None: no copies, the annotation removed)."""
    if not found:
        return None
    raw = {c: {"cluster": r.cluster, "phase": r.phase, "generation": r.generation} for c, r in found.items()}
    return json.dumps(raw, sort_keys=True, separators=(",", ":"))


def requests_by_owner(
    gprs: Mapping[tuple[str, str], Mapping[str, Any]],
) -> dict[tuple[str, str], dict[str, Mapping[str, Any]]]:
    """The per-colony GPU requests of duplicated objects (annotated with their colony), by (namespace,
    owner uid), then by colony."""
    found: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = {}
    for (namespace, _), gpr in gprs.items():
        meta = gpr["metadata"]
        colony = (meta.get("annotations") or {}).get(COLONY_ANNOTATION)
        if not colony:
            continue
        for owner in meta.get("ownerReferences") or []:
            found.setdefault((namespace, str(owner.get("uid"))), {})[str(colony)] = gpr
    return found


def requests_of(
    w: Workload, gprs: Mapping[tuple[str, str], Mapping[str, Any]]
) -> dict[str, Mapping[str, Any]]:
    """The object's per-colony GPU requests, by colony."""
    return requests_by_owner(gprs).get((w.namespace, str(w.obj["metadata"]["uid"])), {})


def request_for(w: Workload, colony: str) -> dict[str, Any]:
    """The GPU request of the object's copy on `colony` (restricted to it)."""
    if w.shape is None:
        raise ValueError("an object without GPU demand needs no GPU request")
    name = duplicate_request_name(w.kind, w.name, colony, w.namespace)
    labels = {WORKLOAD_KIND_LABEL: w.kind, WORKLOAD_NAME_LABEL: label_value(w.name)}
    manifest = request_manifest(name, [w], w.shape, w.selection, [colony], False, labels)
    manifest["metadata"]["annotations"][COLONY_ANNOTATION] = colony
    return manifest


def _plan(w: Workload, colony: str, requests: Mapping[str, Mapping[str, Any]]) -> RequestPlan:
    return RequestPlan(duplicate_request_name(w.kind, w.name, colony, w.namespace), requests.get(colony))


def _cleanup(
    w: Workload,
    found: Mapping[str, Record],
    requests: Mapping[str, Mapping[str, Any]],
    seen: Mapping[str, Observed],
) -> Cleanup:
    """Every copy and request deleted; `unread`: a copy's cluster, of a Ready colony, could not be
    read this pass (wait). A copy on a colony that is gone or not Ready and unreachable is left."""
    actions: list[Action] = []
    unread: list[str] = []
    for colony, record in sorted(found.items()):
        observed = seen.get(colony, Observed())
        if observed.copy_known:
            if observed.copy is not None:
                actions.append(DeleteCopy(colony, record.cluster))
        elif observed.colony_ready:
            unread.append(copy_left(w, colony, record.cluster))
    for _, gpr in sorted(requests.items()):
        if not gpr["metadata"].get("deletionTimestamp"):
            actions.append(DeleteRequest(str(gpr["metadata"]["name"])))
    return Cleanup(actions, tuple(unread))


def unplace(
    w: Workload, requests: Mapping[str, Mapping[str, Any]], seen: Mapping[str, Observed]
) -> list[Action]:
    """No longer selected for duplication (or deleted): every copy and request deleted, our annotations
    and finalizer off."""
    if FINALIZER not in (w.obj["metadata"].get("finalizers") or []):
        return []
    message = "not spread across colonies any more: copies and GPU requests deleted"
    return conclude_cleanup(
        w, _cleanup(w, records(w), requests, seen), lambda done: release_object(w, done, message)
    )


def decide(
    w: Workload,
    requests: Mapping[str, Mapping[str, Any]],
    seen: Mapping[str, Observed],
    pin: Pin,
    phase_of: PhaseOf,
) -> list[Action]:
    """The actions for one duplicated object: per eligible colony its request and copy, copies on
    colonies no longer eligible deleted, the summary recorded (see the module docstring).
    `requests`: its per-colony GPU requests (requests_of); `seen`: per recorded colony, its copy."""
    meta = w.obj["metadata"]
    ours = FINALIZER in (meta.get("finalizers") or [])
    found = records(w)
    if w.deleting:
        if not ours:
            return []
        cleanup = _cleanup(w, found, requests, seen)
        return conclude_cleanup(w, cleanup, lambda done: [*done, RemoveFinalizer()])
    actions: list[Action] = [] if ours else [AddFinalizer()]
    if w.error is not None:
        message = f"cannot compute its demand: {w.error}"
        if w.annotations.get(MESSAGE_ANNOTATION) != message:
            actions += [
                Annotate({PHASE_ANNOTATION: "Unplaceable", MESSAGE_ANNOTATION: message}),
                Event("Unplaceable", message, warning=True),
            ]
        return actions
    allowed = w.candidates.allowed
    generation = str(meta.get("generation") or "")
    kept = dict(found)
    waiting: dict[str, str] = {}
    events: list[Action] = []

    for colony, record in sorted(found.items()):
        if colony in allowed:
            continue
        observed = seen.get(colony, Observed())
        if observed.copy_known:
            if observed.copy is not None:
                actions.append(DeleteCopy(colony, record.cluster))
        elif observed.colony_ready:
            continue  # its cluster could not be read this pass: next pass
        plan = _plan(w, colony, requests)
        if plan.present:
            actions.append(DeleteRequest(plan.name))
        del kept[colony]
        events.append(
            Event("Unplaced", f"colony {colony} is no longer eligible ({w.selection.source}): copy removed")
        )
    for colony, gpr in sorted(requests.items()):
        if colony not in allowed and colony not in found and not gpr["metadata"].get("deletionTimestamp"):
            actions.append(DeleteRequest(str(gpr["metadata"]["name"])))

    for colony in allowed:
        plan = _plan(w, colony, requests)
        held = kept.get(colony)
        if held is None:
            if w.finished:
                continue
            placed = _place(w, colony, plan, pin, generation, actions, waiting)
            if placed is not None:
                kept[colony] = placed
                events.append(Event("Placed", f"copy placed on colony {colony} (cluster {placed.cluster})"))
            continue
        observed = seen.get(colony, Observed())
        finished = held.phase in FINISHED_PHASES
        gpu_request = plan if w.shape is not None else None  # an object without GPUs has none
        if not finished and (why := request_or_copy_lost(gpu_request, observed, colony)) is not None:
            if observed.copy_known and observed.copy is not None:
                actions.append(DeleteCopy(colony, held.cluster))
            if plan.present:
                actions.append(DeleteRequest(plan.name))
            del kept[colony]
            waiting[colony] = f"{why}: queued again"
            events.append(Event("Rescheduled", f"colony {colony}: {why}: queued again", warning=True))
            continue
        copy = observed.copy
        if copy is None:
            if finished and plan.present:
                actions.append(DeleteRequest(plan.name))
            continue
        if not finished and held.generation != generation:
            actions.append(ApplyCopy(colony, held.cluster, render_copy(w.obj, plan, pin), update=True))
            held = replace(held, generation=generation)
        current = phase_of(copy)
        if current != held.phase and not finished:
            held = replace(held, phase=current)
            events.append(
                Event(f"Workload{current}", f"{current} on colony {colony}", warning=current == "Failed")
            )
        if (current in FINISHED_PHASES or finished) and plan.present:
            actions.append(DeleteRequest(plan.name))
            events.append(Event("GPUsReleased", f"colony {colony} finished: GPU request {plan.name} deleted"))
        kept[colony] = held

    actions += _mirror(w, kept, seen, allowed)
    actions += _summary(w, kept, waiting, allowed)
    return actions + events


def _place(
    w: Workload,
    colony: str,
    plan: RequestPlan,
    pin: Pin,
    generation: str,
    actions: list[Action],
    waiting: dict[str, str],
) -> Record | None:
    """The copy on `colony` created when it may be (appended to `actions`, its record returned), else
    its request asked for; `waiting` says why it is not there yet."""
    if w.shape is None:
        cluster = w.candidates.clusters[colony]
        actions.append(ApplyCopy(colony, cluster, render_copy(w.obj, None, pin), update=False))
        return Record(cluster, "Pending", generation)
    if plan.present and plan.phase in TERMINAL_REQUEST_PHASES:
        actions.append(DeleteRequest(plan.name))
        waiting[colony] = f"GPU request {plan.name} was {plan.phase}; asking again"
        return None
    status = (plan.existing or {}).get("status") or {}
    if plan.present and plan.phase == "Ready" and status.get("reservationLabel") and status.get("nodes"):
        cluster = str(status["nodes"][0]["cluster"])
        actions.append(ApplyCopy(colony, cluster, render_copy(w.obj, plan, pin), update=False))
        return Record(cluster, "Pending", generation)
    if plan.waiting:
        manifest = request_for(w, colony)
        if differs(manifest, plan.existing):
            actions.append(ApplyRequest(manifest))
    detail = f": {status['message']}" if status.get("message") else ""
    waiting[colony] = f"waiting for GPUs: GPU request {plan.name} is {plan.phase or 'new'}{detail}"
    return None


def _phases(w: Workload, kept: Mapping[str, Record], allowed: tuple[str, ...]) -> dict[str, str]:
    """Per colony, its copy's phase (Queued: not there yet), eligible colonies first, in their order."""
    phases = {c: kept[c].phase if c in kept else "Queued" for c in allowed if c in kept or not w.finished}
    phases.update({c: r.phase for c, r in sorted(kept.items()) if c not in phases})
    return phases


def _worst(phases: Mapping[str, str]) -> str | None:
    """The colony whose copy's phase is the worst (the first of them)."""
    if not phases:
        return None
    return min(phases, key=lambda c: (PHASE_RANK.get(phases[c], 1), list(phases).index(c)))


def _mirror(
    w: Workload, kept: Mapping[str, Record], seen: Mapping[str, Observed], allowed: tuple[str, ...]
) -> list[Action]:
    """The status of the copy in the worst phase (of those read) onto the original."""
    present = {c: r.phase for c, r in kept.items() if seen.get(c, Observed()).copy is not None}
    ordered = {c: present[c] for c in [*allowed, *sorted(present)] if c in present}
    colony = _worst(ordered)
    if colony is None:
        return []
    copy = seen[colony].copy or {}
    status = copy.get("status")
    if isinstance(status, dict) and status != (w.obj.get("status") or {}):
        return [MirrorStatus(status)]
    return []


def _summary(
    w: Workload, kept: Mapping[str, Record], waiting: Mapping[str, str], allowed: tuple[str, ...]
) -> list[Action]:
    """Copies, phase (the worst of the copies') and message, annotated when they change."""
    phases = _phases(w, kept, allowed)
    worst = _worst(phases)
    if worst is None:
        phase = "Queued"
        message = f"no colony can take it ({w.selection.source})"
    else:
        phase = phases[worst]
        parts = [f"{c} {p}" + (f" ({waiting[c]})" if c in waiting else "") for c, p in phases.items()]
        message = f"duplicated on {len(phases)} colonies: " + ", ".join(parts)
    if w.candidates.excluded:
        message += f"; excluded: {w.candidates.summary()}"
    wanted: dict[str, str | None] = {
        COPIES_ANNOTATION: encode(kept),
        PHASE_ANNOTATION: phase,
        MESSAGE_ANNOTATION: message,
    }
    changes = {k: v for k, v in wanted.items() if w.annotations.get(k) != v}
    return [Annotate(changes)] if changes else []
