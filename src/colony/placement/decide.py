"""What to do for one framework object now: a list of actions, applied in order by the controller.

The lifecycle of a selected object (state lives in annotations on it, see names.py):

1. finalizer on; its demand computed (an error: phase Unplaceable, the reason, a warning Event);
2. its GPU request created (or updated while it waits) for the colonies that may take it; phase
   Queued with why it waits, including every colony excluded and why;
3. request Ready: the copy is created in the colony's cluster, pinned to the reserved nodes; the
   colony is recorded; phase Pending;
4. while placed: the copy's status is mirrored onto the original, its standard phase recorded (Event
   on each change); finished (Succeeded/Failed): the request is deleted, the GPUs freed;
5. colony lost (deleted, not Ready), request lost (evicted, released, deleted), copy deleted by
   someone, or the policy no longer allowing the colony: the copy is deleted and the object queued
   again (a new request);
6. deleted, or no longer selected: copy and request deleted, annotations dropped, finalizer off.
   Deletion always ends (colony.scheduling.cleanup): a copy that cannot be deleted (the colony cluster answers
   an error or cannot be read) is tried DELETE_RETRIES times, each failure counted on the object
   (CLEANUP_FAILURES_ANNOTATION); then a CleanupAbandoned Event names what was left and the finalizer
   goes. An object only no longer selected keeps waiting (nothing is stuck in deletion).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from colony.labels import FINALIZER
from colony.placement.names import (
    CLEANUP_FAILURES_ANNOTATION,
    CLUSTER_ANNOTATION,
    COLONY_ANNOTATION,
    FINISHED_PHASES,
    GENERATION_ANNOTATION,
    MESSAGE_ANNOTATION,
    ORIGIN_ANNOTATION,
    ORIGIN_UID_LABEL,
    OWN_ANNOTATIONS,
    PHASE_ANNOTATION,
    REQUEST_ANNOTATION,
)
from colony.placement.requests import RequestPlan, Workload
from colony.scheduling.cleanup import (
    CLEANUP_ABANDONED,
    DELETE_RETRIES,
    DELETE_RETRY_DELAY_S,
    abandoned_message,
    gives_up,
)
from colony.timefmt import format_time, parse_time

TERMINAL_REQUEST_PHASES = ("Expired", "Released", "Failed", "Evicted")


@dataclass(frozen=True)
class AddFinalizer:
    pass


@dataclass(frozen=True)
class RemoveFinalizer:
    pass


@dataclass(frozen=True)
class ApplyRequest:
    manifest: dict[str, Any]


@dataclass(frozen=True)
class DeleteRequest:
    name: str


@dataclass(frozen=True)
class ApplyCopy:
    """Create (or update) the copy in `cluster` of `colony` (`namespace/name`)."""

    colony: str
    cluster: str
    manifest: dict[str, Any]
    update: bool | None = None
    """Whether an existing copy of ours is updated; None: when the original is placed already."""


@dataclass(frozen=True)
class DeleteCopy:
    colony: str
    cluster: str


@dataclass(frozen=True)
class CleanupFailed:
    """A cleanup step on a colony cluster could not be done this pass (the copy's cluster could not
    be read): counted on the object as a failed try, like a DeleteCopy that fails."""

    reason: str


@dataclass(frozen=True)
class MirrorStatus:
    status: dict[str, Any]


@dataclass(frozen=True)
class Annotate:
    """Set (None: remove) annotations of the original."""

    annotations: dict[str, str | None]


@dataclass(frozen=True)
class Event:
    reason: str
    message: str
    warning: bool = False


Action = (
    AddFinalizer
    | RemoveFinalizer
    | ApplyRequest
    | DeleteRequest
    | ApplyCopy
    | DeleteCopy
    | CleanupFailed
    | MirrorStatus
    | Annotate
    | Event
)

Pin = Callable[[Mapping[str, Any], dict[str, str]], dict[str, Any]]
"""(original, node selector) -> the copy to create (stripped, pinned; colony.workloads.pinning)."""
PhaseOf = Callable[[Mapping[str, Any]], str]
"""copy -> its standard phase (colony.workloads.status)."""


@dataclass(frozen=True)
class Observed:
    """What the controller read about an object's placement besides the object itself.

    colony_ready: the colony recorded on the object exists and is Ready;
    copy_known: its cluster could be read, even while the colony is being deleted (else `copy` says
    nothing);
    copy: the copy found there (None: none)."""

    colony_ready: bool = False
    copy_known: bool = False
    copy: Mapping[str, Any] | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


def _copy_metadata(obj: Mapping[str, Any], copy: dict[str, Any]) -> dict[str, Any]:
    """Mark the copy as ours: the original's uid (label) and `namespace/name` (annotation)."""
    meta = obj["metadata"]
    copy_meta = copy.setdefault("metadata", {})
    copy_meta["labels"] = {**(copy_meta.get("labels") or {}), ORIGIN_UID_LABEL: str(meta["uid"])}
    annotations = {k: v for k, v in (copy_meta.get("annotations") or {}).items() if k not in OWN_ANNOTATIONS}
    copy_meta["annotations"] = {**annotations, ORIGIN_ANNOTATION: f"{meta['namespace']}/{meta['name']}"}
    return copy


def render_copy(obj: Mapping[str, Any], plan: RequestPlan | None, pin: Pin) -> dict[str, Any]:
    """The copy of `obj` for its colony: pinned to the request's reserved nodes (when it has one)."""
    status = ((plan.existing if plan else None) or {}).get("status") or {}
    selector: dict[str, str] = {}
    label = status.get("reservationLabel")
    if label and status.get("nodes"):
        selector[str(label)] = str(status["nodes"][0]["gpus"])
    return _copy_metadata(obj, pin(obj, selector))


def _set(w: Workload, **values: str | None) -> list[Action]:
    """Annotate only what changes (no write when nothing does)."""
    current = w.annotations
    keys = {
        "colony": COLONY_ANNOTATION,
        "cluster": CLUSTER_ANNOTATION,
        "phase": PHASE_ANNOTATION,
        "message": MESSAGE_ANNOTATION,
        "generation": GENERATION_ANNOTATION,
        "request": REQUEST_ANNOTATION,
    }
    changes = {keys[k]: v for k, v in values.items() if current.get(keys[k]) != v}
    return [Annotate(changes)] if changes else []


@dataclass(frozen=True)
class Cleanup:
    """What deleting an object's placement takes: `actions` (copies and requests deleted), and the
    copies on Ready colonies whose cluster could not be read this pass (`unread`: wait for them)."""

    actions: list[Action]
    unread: tuple[str, ...] = ()


@dataclass(frozen=True)
class CleanupFailures:
    """The failed cleanup tries recorded on an object (CLEANUP_FAILURES_ANNOTATION)."""

    tries: int = 0
    at: datetime | None = None
    error: str = ""

    def record(self, at: datetime, error: str) -> str:
        """The annotation value with one more failed try, at `at`, failing with `error`."""
        return json.dumps({"tries": self.tries + 1, "at": format_time(at), "error": error[:300]})

    def retry_due(self, now: datetime) -> bool:
        """Whether the next try may run: DELETE_RETRY_DELAY_S after the last failure."""
        return self.at is None or (now - self.at).total_seconds() >= DELETE_RETRY_DELAY_S


def cleanup_failures(annotations: Mapping[str, str]) -> CleanupFailures:
    """The failed tries recorded in `annotations` (none when absent or unreadable)."""
    try:
        found = json.loads(annotations.get(CLEANUP_FAILURES_ANNOTATION) or "{}")
        tries = int(found.get("tries") or 0)
    except (ValueError, TypeError, AttributeError):
        return CleanupFailures()
    return CleanupFailures(max(tries, 0), parse_time(found.get("at")), str(found.get("error") or ""))


def copy_left(w: Workload, colony: str, cluster: str) -> str:
    """How a copy left behind is named in the CleanupAbandoned Event."""
    return f"{w.kind} {w.namespace}/{w.name} in colony {colony} cluster {cluster}"


def conclude_cleanup(
    w: Workload, cleanup: Cleanup, then: Callable[[list[Action]], list[Action]]
) -> list[Action]:
    """The actions ending an object's placement: `then(cleanup actions)` (which releases the object).

    While some copy cannot be read: wait; for an object being deleted, each such pass is a failed
    try (CleanupFailed). Once an object being deleted has failed DELETE_RETRIES times, its copies
    are given up: the requests are still deleted, a CleanupAbandoned Event names the copies left,
    and `then` releases the object (colony.scheduling.cleanup: deletion always ends)."""
    failures = cleanup_failures(w.annotations)
    left = [copy_left(w, a.colony, a.cluster) for a in cleanup.actions if isinstance(a, DeleteCopy)]
    left += cleanup.unread
    if w.deleting and left and gives_up(failures.tries):
        kept = [a for a in cleanup.actions if not isinstance(a, DeleteCopy)]
        where = _where([a.colony for a in cleanup.actions if isinstance(a, DeleteCopy)], cleanup.unread)
        message = abandoned_message(where, failures.error or "no answer", left, DELETE_RETRIES)
        return then([*kept, Event(CLEANUP_ABANDONED, message, warning=True)])
    if cleanup.unread:
        return [CleanupFailed(f"cannot read {', '.join(cleanup.unread)}")] if w.deleting else []
    return then(cleanup.actions)


def _where(colonies: Sequence[str], unread: Sequence[str]) -> str:
    named = sorted(set(colonies))
    if not named and unread:
        return "its colony clusters"
    return f"colony {named[0]}" if len(named) == 1 else f"colonies {', '.join(named)}"


def _cleanup(w: Workload, plan: RequestPlan | None, seen: Observed) -> Cleanup:
    """Copy and (own) request deleted; `unread`: the copy's cluster, of a Ready colony, could not be
    read this pass (wait). A copy on a colony that is gone or not Ready and unreachable is left."""
    actions: list[Action] = []
    unread: tuple[str, ...] = ()
    colony, cluster = w.annotations.get(COLONY_ANNOTATION), w.annotations.get(CLUSTER_ANNOTATION)
    if colony and cluster:
        if seen.copy_known:
            if seen.copy is not None:
                actions.append(DeleteCopy(colony, cluster))
        elif seen.colony_ready:
            unread = (copy_left(w, colony, cluster),)
    if plan is not None and plan.present and plan.release:
        actions.append(DeleteRequest(plan.name))
    return Cleanup(actions, unread)


def _waiting_message(w: Workload, plan: RequestPlan) -> str:
    status = (plan.existing or {}).get("status") or {}
    state = status.get("phase") or "new"
    detail = f": {status['message']}" if status.get("message") else ""
    message = f"waiting for GPUs: GPU request {plan.name} is {state}{detail}"
    if not w.candidates.allowed:
        message = f"no colony can take it ({w.selection.source})"
    excluded = w.candidates.summary()
    return f"{message}; excluded: {excluded}" if excluded else message


def _lost(w: Workload, plan: RequestPlan | None, seen: Observed) -> str | None:
    """Why a placed, unfinished object's copy is gone (None: it is fine)."""
    colony = w.annotations.get(COLONY_ANNOTATION, "")
    if not seen.colony_ready:
        return f"colony {colony} is gone or not Ready"
    if colony not in w.candidates.allowed:
        return f"colony {colony} is no longer allowed ({w.selection.source})"
    return request_or_copy_lost(plan, seen, colony)


def request_or_copy_lost(plan: RequestPlan | None, seen: Observed, colony: str) -> str | None:
    """Why a copy on `colony` must be placed again: its GPU request (`plan`, None when it needs no
    GPUs) is gone or no longer holds GPUs, or the copy itself was deleted; None when neither."""
    if plan is not None:
        if not plan.present:
            return f"its GPU request {plan.name} was deleted"
        if not plan.running:
            return f"its GPU request {plan.name} is {plan.phase}"
    if seen.copy_known and seen.copy is None:
        return f"its copy in colony {colony} was deleted"
    return None


def decide(
    w: Workload, plan: RequestPlan | None, seen: Observed, pin: Pin, phase_of: PhaseOf
) -> list[Action]:
    """The actions for one object (see the module docstring); `plan` is None when it needs no GPUs."""
    meta = w.obj["metadata"]
    ours = FINALIZER in (meta.get("finalizers") or [])
    if w.deleting:
        if not ours:
            return []
        return conclude_cleanup(w, _cleanup(w, plan, seen), lambda done: [*done, RemoveFinalizer()])
    actions: list[Action] = [] if ours else [AddFinalizer()]
    colony = w.annotations.get(COLONY_ANNOTATION)
    phase = w.annotations.get(PHASE_ANNOTATION)
    if colony:
        return actions + _placed(w, plan, seen, pin, phase_of, colony, phase)
    if phase in FINISHED_PHASES:
        return actions
    if w.error is not None:
        message = f"cannot compute its demand: {w.error}"
        actions += _set(w, phase="Unplaceable", message=message)
        if w.annotations.get(MESSAGE_ANNOTATION) != message:
            actions.append(Event("Unplaceable", message, warning=True))
        return actions
    if plan is None:
        return actions + _place_without_gpus(w, pin)
    return actions + _queued(w, plan, pin, phase)


def _place_without_gpus(w: Workload, pin: Pin) -> list[Action]:
    """An object asking for no GPUs goes to its first candidate colony directly."""
    if not w.candidates.allowed:
        excluded = f"; excluded: {w.candidates.summary()}" if w.candidates.excluded else ""
        return _set(w, phase="Queued", message=f"no colony can take it ({w.selection.source}){excluded}")
    colony = w.candidates.allowed[0]
    cluster = w.candidates.clusters[colony]
    message = f"placed on colony {colony} (no GPUs requested)"
    if w.candidates.excluded:
        message += f"; excluded: {w.candidates.summary()}"
    return [
        ApplyCopy(colony, cluster, render_copy(w.obj, None, pin)),
        *_set(w, colony=colony, cluster=cluster, phase="Pending", message=message, generation=_generation(w)),
        Event("Placed", message),
    ]


def _generation(w: Workload) -> str:
    return str(w.obj["metadata"].get("generation") or "")


def _queued(w: Workload, plan: RequestPlan, pin: Pin, phase: str | None) -> list[Action]:
    actions: list[Action] = []
    if plan.error is not None:
        message = f"cannot request GPUs: {plan.error}"
        actions += _set(w, phase="Unplaceable", message=message, request=plan.name)
        if w.annotations.get(MESSAGE_ANNOTATION) != message:
            actions.append(Event("Unplaceable", message, warning=True))
        return actions
    if plan.present and plan.phase in TERMINAL_REQUEST_PHASES:
        message = f"GPU request {plan.name} was {plan.phase}; asking again"
        return [DeleteRequest(plan.name), *_set(w, phase="Queued", message=message)]
    status = (plan.existing or {}).get("status") or {}
    granted = str(status.get("colony") or "")
    if plan.present and plan.phase == "Ready" and status.get("reservationLabel") and status.get("nodes"):
        if plan.release and granted not in w.candidates.allowed:
            message = (
                f"GPU request {plan.name} got colony {granted}, which is no longer allowed; asking again"
            )
            return [DeleteRequest(plan.name), *_set(w, phase="Queued", message=message)]
        cluster = str(status["nodes"][0]["cluster"])
        message = (
            f"placed on colony {granted} (cluster {cluster}): {status.get('gpusAllocated')} "
            f"{status.get('gpuType')} GPU(s) of GPU request {plan.name}"
        )
        if w.candidates.excluded:
            message += f"; excluded: {w.candidates.summary()}"
        return [
            ApplyCopy(granted, cluster, render_copy(w.obj, plan, pin)),
            *_set(
                w,
                colony=granted,
                cluster=cluster,
                phase="Pending",
                message=message,
                generation=_generation(w),
                request=plan.name,
            ),
            Event("Placed", message),
        ]
    if plan.manifest is not None:
        actions.append(ApplyRequest(plan.manifest))
    message = _waiting_message(w, plan)
    actions += _set(w, phase="Queued", message=message, request=plan.name)
    if phase is None:
        actions.append(Event("Queued", message))
    return actions


def _placed(
    w: Workload,
    plan: RequestPlan | None,
    seen: Observed,
    pin: Pin,
    phase_of: PhaseOf,
    colony: str,
    phase: str | None,
) -> list[Action]:
    cluster = w.annotations.get(CLUSTER_ANNOTATION) or ""
    finished = phase in FINISHED_PHASES
    if not finished and (why := _lost(w, plan, seen)) is not None:
        actions: list[Action] = []
        if seen.copy_known and seen.copy is not None:  # e.g. on a colony being deleted
            actions.append(DeleteCopy(colony, cluster))
        if plan is not None and plan.present:
            actions.append(DeleteRequest(plan.name))
        message = f"{why}: queued again"
        actions += _set(w, colony=None, cluster=None, generation=None, phase="Queued", message=message)
        actions.append(Event("Rescheduled", message, warning=True))
        return actions
    actions = []
    copy = seen.copy
    if copy is None:
        if finished and plan is not None and plan.present and plan.release:
            actions.append(DeleteRequest(plan.name))
        return actions
    if not finished and w.annotations.get(GENERATION_ANNOTATION) != _generation(w):
        actions.append(ApplyCopy(colony, cluster, render_copy(w.obj, plan, pin)))
        actions += _set(w, generation=_generation(w))
    status = copy.get("status")
    if isinstance(status, dict) and status != (w.obj.get("status") or {}):
        actions.append(MirrorStatus(status))
    current = phase_of(copy)
    if current != phase and not finished:
        message = f"{current} on colony {colony}"
        actions += _set(w, phase=current, message=message)
        actions.append(Event(f"Workload{current}", message, warning=current == "Failed"))
    if (current in FINISHED_PHASES or finished) and plan is not None and plan.present and plan.release:
        actions.append(DeleteRequest(plan.name))
        actions.append(Event("GPUsReleased", f"finished: GPU request {plan.name} deleted, its GPUs freed"))
    return actions


def unplace(w: Workload, plan: RequestPlan | None, seen: Observed) -> list[Action]:
    """The object is no longer selected: copy and request deleted, our annotations and finalizer off."""
    meta = w.obj["metadata"]
    if FINALIZER not in (meta.get("finalizers") or []):
        return []
    message = "no PlacementPolicy or label selects it any more: copy and GPU request deleted"
    return conclude_cleanup(w, _cleanup(w, plan, seen), lambda done: release_object(w, done, message))


def release_object(w: Workload, cleanup: list[Action], message: str) -> list[Action]:
    """After `cleanup` (copies and requests deleted): the finalizer off, and unless the object is being
    deleted, our annotations off too and an Unplaced Event with `message`."""
    if w.deleting:
        return [*cleanup, RemoveFinalizer()]
    annotations = dict.fromkeys((k for k in OWN_ANNOTATIONS if k in w.annotations), None)
    return [*cleanup, Annotate(annotations), RemoveFinalizer(), Event("Unplaced", message)]
