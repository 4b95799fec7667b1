"""What the GPR scheduling loop keeps between passes, on kopf's memo: the wake-up event, the parse
cache, the requests the informer saw deleted, the requests of the last read (at the newest version
known), and the admissions being finished in the background."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import kopf


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


def parse_cache(memo: kopf.Memo) -> ParseCache:
    """The loop's ParseCache (memo.parse_cache), made on first use."""
    cache: ParseCache | None = getattr(memo, "parse_cache", None)
    if cache is None:
        cache = memo.parse_cache = ParseCache()
    return cache


def wake_scheduler(memo: kopf.Memo) -> None:
    """Ask for a pass now (a GPR, queue or colony changed)."""
    event: asyncio.Event | None = getattr(memo, "scheduler_wakeup", None)
    if event is not None:
        event.set()


def deleted(memo: kopf.Memo) -> list[dict[str, Any]]:
    """Requests the GPR informer saw deleted since the last pass (their last known state)."""
    if getattr(memo, "gpr_deleted", None) is None:
        memo.gpr_deleted = []
    found: list[dict[str, Any]] = memo.gpr_deleted
    return found


def seen(memo: kopf.Memo) -> dict[str, dict[str, Any]]:
    """The requests of the last pass's read, by key, each at the newest version known: the one
    read, or a later one this process wrote (an admission written after the read must be known
    when the request disappears from the next read, or its labels would stay on)."""
    if getattr(memo, "gpr_seen", None) is None:
        memo.gpr_seen = {}
    known: dict[str, dict[str, Any]] = memo.gpr_seen
    return known


def reservations_in_flight(memo: kopf.Memo) -> dict[str, asyncio.Task[None]]:
    """Admissions whose labels and Ready are being written, by request key."""
    tasks: dict[str, asyncio.Task[None]] | None = getattr(memo, "reservations_in_flight", None)
    if tasks is None:
        tasks = memo.reservations_in_flight = {}
    return tasks
