"""What the GPR scheduling loop keeps between passes: one SchedulerState per operator context
(`OperatorContext.scheduler`), holding the wake-up event, the parse cache, the requests the
informer saw deleted, the requests of the last read (at the newest version known), the admissions
and releases being written in the background, the informers, and the requests backing off after a
failure.

This module is imported by `colony.controllers.context`, so it imports nothing from
`colony.controllers` (the context would import itself through it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from colony.kube.informer import Informer
from colony.scheduling.backoff import Backoff

if TYPE_CHECKING:
    from colony.controllers.context import OperatorContext


class ParseCache:
    """Values derived from a request's spec, kept from one pass to the next: a waiting request is
    validated and turned into the core's GpuRequest once per spec (generation), not on every pass
    (thousands wait at once). What a pass did not ask for is dropped when it ends."""

    def __init__(self) -> None:
        self._previous: dict[tuple[Any, ...], Any] = {}
        self._current: dict[tuple[Any, ...], Any] = {}

    def get(self, key: tuple[Any, ...], compute: Callable[..., Any], *args: Any) -> Any:
        """The value for `key`, `compute(*args)` only when the previous or this pass has none."""
        if key in self._current:
            return self._current[key]
        value = self._previous[key] if key in self._previous else compute(*args)
        self._current[key] = value
        return value

    def end_pass(self) -> None:
        """Forget what this pass did not use."""
        self._previous, self._current = self._current, {}


BACKGROUND_WRITERS = 32
"""Admissions and releases written in the background at once: the pass's own reads must still
find a connection (colony.kube.config.CONNECTIONS, which kopf's handlers share too)."""


@dataclass(frozen=True)
class ReleaseInFlight:
    """A request's labels (then its finalizer) being taken off in the background, and the nodes
    they are on: a new label on one of them waits for it (reservations.reserve)."""

    task: asyncio.Task[None]
    nodes: frozenset[tuple[str, str, str]]
    """(colony, cluster, node) of each label."""


@dataclass
class SchedulerState:
    """What the scheduling loop of one operator process keeps from one pass to the next. Its
    background tasks (the loop, the informers' watches, the status writers) run as the context's
    named tasks (`OperatorContext.start`); only the admissions and releases in flight, one per
    request, are kept here."""

    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    """Set to ask for a pass now (a GPR, queue or colony changed)."""
    parse_cache: ParseCache = field(default_factory=ParseCache)
    """Specs validated and parsed, by uid and generation."""
    deleted: list[dict[str, Any]] = field(default_factory=list)
    """Requests the GPR informer saw deleted since the last pass (their last known state)."""
    released: set[str] = field(default_factory=set)
    """Uids of requests being deleted that were released before their finalizer was let go: when
    they disappear from the read they are not released a second time."""
    seen: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The requests of the last pass's read, by key, each at the newest version known: the one
    read, or a later one this process wrote (an admission written after the read must be known
    when the request disappears from the next read, or its labels would stay on)."""
    estimates_refreshed_at: float = 0.0
    """When (epoch seconds) the last pass wrote every estimate that moved, not only the prompt ones
    (scheduling.queueing.rules.is_prompt)."""
    reservations_in_flight: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    """Admissions whose status, labels and Ready are being written, by request key."""
    write_slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(BACKGROUND_WRITERS))
    """Held by an admission or release while it writes (never while it waits for another)."""
    assumed: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Requests whose admission's status write is in flight, as they will be once it lands (the
    version decided on, with the admission's status): a pass schedules them as running."""
    releases_in_flight: dict[str, ReleaseInFlight] = field(default_factory=dict)
    """Requests whose labels and finalizer are being taken off in the background, by request key."""
    events_in_flight: set[asyncio.Task[None]] = field(default_factory=set)
    """Events being posted without holding up a pass (writes.event_in_background)."""
    informers: dict[str, Informer] = field(default_factory=dict)
    """The informers of the kinds a pass reads, by name (world.INFORMED)."""
    backoff: Backoff = field(default_factory=Backoff)
    """Requests whose handling failed (writes.guarded), by key: skipped by the pass's steps until
    their backoff is over (their GPUs stay counted), reset by a new generation or a pass that
    handles them without failing."""


def wake_scheduler(context: OperatorContext) -> None:
    """Ask for a pass now (a GPR, queue or colony changed)."""
    context.scheduler.wakeup.set()
