"""How the GPR scheduling loop writes a request: status merge patches (onto the version read, or
recomputed on a fresh version after a 409), the operator's finalizer, Events, and bounded
concurrency. Every write this process makes is remembered (state.seen, the GPR informer), so the
next pass knows it even before the watch brings it.

One request's failure never stops the others: each step runs a request's work through `guarded`,
which records what failed (a ProcessingFailed warning Event) and backs the request off
(state.SchedulerState.backoff); the steps skip a request while `backing_off`."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from colony import events
from colony.api import GPR
from colony.controllers.gpr.world import informer
from colony.controllers.loops import run_all
from colony.kube.informer import newer, trimmed
from colony.kube.resources import Conflict, KubeApiError, NotFound
from colony.labels import FINALIZER
from colony.scheduling.fault_rules import transition_applies
from colony.scheduling.queueing.objects import request_key

if TYPE_CHECKING:
    from colony.controllers.context import OperatorContext

WRITE_CONCURRENCY = 24
"""Requests the loop applies decisions to at once (colony.kube.config.CONNECTIONS connections, which
kopf's handlers share)."""
WRITE_ATTEMPTS = 3
"""Tries of a status write carrying a resourceVersion precondition (each after a 409 re-reads the
request and recomputes the write from the fresh version); then the next pass decides afresh."""

PROCESSING_FAILED = "ProcessingFailed"
"""The reason of the warning Event on a request whose handling in a pass raised."""

T = TypeVar("T")
log = logging.getLogger(__name__)


def clock() -> float:
    """The clock backoffs are measured on (monotonic seconds)."""
    return time.monotonic()


StatusUpdate = Callable[[Mapping[str, Any]], Mapping[str, Any] | None]
"""From a version of a request, the status fields to write onto it, or None to write nothing."""


async def concurrently(calls: Iterable[Awaitable[Any]], limit: int = WRITE_CONCURRENCY) -> None:
    """`loops.run_all` at the loop's write concurrency: at most `limit` in flight, every call runs
    to its end, then the first error (if any) is raised."""
    await run_all(calls, limit)


def remember(context: OperatorContext, written: dict[str, Any]) -> None:
    """Keep a request version this process wrote (see `state.seen`; the informer keeps it too),
    trimmed like the informer's copies: a write's response carries managedFields, and one is kept
    per request, thousands at once."""
    known, key = context.scheduler.seen, request_key(written)
    watcher = informer(context)
    # the next pass sees this write even before the watch brings it; one trimmed copy serves both
    kept = watcher.put(written) if watcher is not None else None
    if key not in known or newer(written, known[key]):
        known[key] = kept if kept is not None else trimmed(written)


def is_accepted(gpr: Mapping[str, Any]) -> bool:
    """Whether the request's spec was accepted at its generation (accept.accept)."""
    observed = (gpr.get("status") or {}).get("observedGeneration")
    return bool(observed == gpr["metadata"].get("generation"))


def newest_known(context: OperatorContext, read: dict[str, Any]) -> dict[str, Any]:
    """`read`, or the version of it this process wrote since (`remember`) when that is newer: a
    step late in a pass must not redo what a background write finished after the pass's read."""
    known = context.scheduler.seen.get(request_key(read))
    return known if known is not None and newer(known, read) else read


async def patch(
    context: OperatorContext,
    gpr: Mapping[str, Any],
    status: Mapping[str, Any],
    *,
    only_if_unchanged: bool = False,
) -> dict[str, Any] | None:
    """Merge-patch the GPR's status; the patched GPR, or None when it is gone or, with
    `only_if_unchanged`, when it changed since `gpr` was read (the status was computed from a stale
    read)."""
    meta = gpr["metadata"]
    version = meta.get("resourceVersion") if only_if_unchanged else None
    try:
        patched: dict[str, Any] = await context.kube.patch_status(
            GPR.api_version, GPR.kind, meta["name"], meta["namespace"], status, resource_version=version
        )
    except (NotFound, Conflict):
        return None
    remember(context, patched)
    return patched


async def write_on_version(
    context: OperatorContext, gpr: Mapping[str, Any], update: StatusUpdate
) -> tuple[dict[str, Any] | None, Mapping[str, Any] | None]:
    """Merge-patch `update(gpr)` onto exactly the version `gpr` is (resourceVersion precondition);
    after a 409 the request is read again and `update` is asked again on the fresh version, up to
    WRITE_ATTEMPTS times: a write is never computed from one version and applied onto another.
    Returns (the patched request or None, the last version seen: None when it is gone)."""
    meta = gpr["metadata"]
    current: Mapping[str, Any] | None = gpr
    for _ in range(WRITE_ATTEMPTS):
        if current is None:
            break
        status = update(current)
        if status is None:
            break
        try:
            patched: dict[str, Any] = await context.kube.patch_status(
                GPR.api_version,
                GPR.kind,
                meta["name"],
                meta["namespace"],
                status,
                resource_version=current["metadata"].get("resourceVersion"),
            )
        except NotFound:
            return None, None
        except Conflict:
            current = await context.kube.get(GPR.api_version, GPR.kind, meta["name"], meta["namespace"])
            continue
        remember(context, patched)
        return patched, patched
    return None, current


def moving(
    read: Mapping[str, Any],
    status: Mapping[str, Any],
    from_phases: Sequence[str | None],
    *,
    same_spec: bool = False,
    same_allocation: bool = False,
    provisioned: tuple[str | None] | None = None,
) -> StatusUpdate:
    """The StatusUpdate of a phase change decided on `read`: `status` on `read` itself, and on a
    fresh version only while `transition_applies` (and, when `provisioned` is given, its
    provisionedColony is `provisioned[0]`)."""

    def update(current: Mapping[str, Any]) -> Mapping[str, Any] | None:
        if current is read:
            return status
        applies = transition_applies(
            read, current, from_phases, same_spec=same_spec, same_allocation=same_allocation
        )
        if (
            provisioned is not None
            and (current.get("status") or {}).get("provisionedColony") != provisioned[0]
        ):
            return None
        return status if applies else None

    return update


async def set_finalizer(
    context: OperatorContext, gpr: Mapping[str, Any], *, hold: bool
) -> dict[str, Any] | None:
    """Put the operator's finalizer on a request (`hold`) or take it off: a merge patch of the
    whole list, onto the version it was computed from (after a 409 the request is read again).
    Returns the request as it now is (as given when there was nothing to do), None when it is gone
    or, for `hold`, being deleted (no finalizer can be added then)."""
    current: Mapping[str, Any] | None = gpr
    for _ in range(WRITE_ATTEMPTS):
        if current is None:
            return None
        meta = current["metadata"]
        if hold and meta.get("deletionTimestamp"):
            return None
        finalizers = list(meta.get("finalizers") or [])
        if (FINALIZER in finalizers) == hold:
            return dict(current)
        wanted = [*finalizers, FINALIZER] if hold else [f for f in finalizers if f != FINALIZER]
        body = {"metadata": {"finalizers": wanted or None, "resourceVersion": meta.get("resourceVersion")}}
        try:
            patched: dict[str, Any] = await context.kube.patch(
                GPR.api_version, GPR.kind, meta["name"], meta["namespace"], body
            )
        except NotFound:
            return None
        except Conflict:
            current = await context.kube.get(GPR.api_version, GPR.kind, meta["name"], meta["namespace"])
            continue
        remember(context, patched)
        return patched
    raise Conflict(409, "Conflict", f"finalizer of {request_key(gpr)}: the request kept changing")


async def event(
    context: OperatorContext, gpr: Mapping[str, Any], reason: str, message: str, warning: bool = False
) -> None:
    """A Kubernetes Event on the GPR (posted directly: this loop runs outside kopf's handlers)."""
    await events.post_now(
        context.kube, GPR.api_version, GPR.kind, gpr["metadata"], reason, message, warning=warning
    )


def event_in_background(context: OperatorContext, gpr: Mapping[str, Any], reason: str, message: str) -> None:
    """`event`, posted without holding up the pass (an Event is a record, nothing waits for it);
    the scheduler's cleanup waits for those still in flight."""
    posting = context.scheduler.events_in_flight
    task = asyncio.create_task(event(context, gpr, reason, message))
    posting.add(task)
    task.add_done_callback(posting.discard)


def _generation(gpr: Mapping[str, Any]) -> Any:
    """What ends a request's backoff when it changes: its generation (a spec change, or its
    deletion), else its resourceVersion."""
    meta = gpr.get("metadata") or {}
    return (meta.get("generation") or meta.get("resourceVersion"), bool(meta.get("deletionTimestamp")))


def backing_off(context: OperatorContext, gpr: Mapping[str, Any]) -> bool:
    """Whether the request's handling failed lately and its backoff is not over (the steps of a
    pass skip it; a running one keeps its GPUs)."""
    return context.scheduler.backoff.waiting(request_key(gpr), _generation(gpr), clock())


async def record_failure(
    context: OperatorContext, gpr: Mapping[str, Any], step: str, error: BaseException
) -> None:
    """A request's handling in `step` raised: back it off and say why (log, and a warning Event on
    the request; posting it may fail too, that is only logged)."""
    key = request_key(gpr)
    reason = f"{type(error).__name__}: {error}"
    wait = context.scheduler.backoff.failed(key, _generation(gpr), clock(), reason)
    message = f"{step} failed: {reason}; retried in {wait:.0f}s"
    log.warning("%s: %s", key, message, exc_info=not isinstance(error, KubeApiError | OSError | TimeoutError))
    try:
        await event(context, gpr, PROCESSING_FAILED, message, warning=True)
    except Exception as problem:  # the failure is in the backoff and the log
        log.warning("could not post %s on %s: %s", PROCESSING_FAILED, key, problem)


async def guarded(
    context: OperatorContext, gpr: Mapping[str, Any], step: str, work: Awaitable[T]
) -> T | None:
    """`work` (one request's part of a pass step); when it raises, the error is recorded on the
    request (`record_failure`) and None returned: the rest of the pass goes on without it."""
    try:
        return await work
    except asyncio.CancelledError:
        raise
    except Exception as error:  # one request's error stays with that request
        await record_failure(context, gpr, step, error)
        return None
