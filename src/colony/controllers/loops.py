"""The two pieces every batch loop of the operator is built from: a pass runner and a bounded gather.

A batch loop (GPR scheduling, DDPJob tracking, placement) runs one pass over everything it owns,
then waits for a wake-up (an event that changed something) or its interval, whichever comes first.
One bad pass is logged and the next one retries; the loop never dies of it. Inside a pass, the
writes to many objects go out concurrently, at most `limit` at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from colony import metrics

T = TypeVar("T")
log = logging.getLogger(__name__)


async def run_passes(
    name: str,
    one_pass: Callable[[], Awaitable[Any]],
    interval_s: float,
    *,
    wakeup: asyncio.Event | None = None,
    settle_s: float = 0.0,
    metric_kind: str | None = None,
) -> None:
    """Run `one_pass` until cancelled: after each pass, wait `settle_s` (events arriving meanwhile
    join the next pass), then until `wakeup` is set or `interval_s` passed. A pass that raises is
    logged and counted (metrics.observe_handler under `metric_kind`), never fatal."""
    while True:
        started = time.monotonic()
        try:
            with metrics.observe_handler(metric_kind or name, f"{name}_pass"):
                await one_pass()
        except asyncio.CancelledError:
            raise
        except Exception:  # one bad pass must not stop the loop; the next one retries
            log.exception("%s pass failed", name)
        if settle_s:
            await asyncio.sleep(settle_s)
        if wakeup is None:
            await asyncio.sleep(interval_s)
        else:
            wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wakeup.wait(), interval_s)
        log.debug("%s pass took %.3fs", name, time.monotonic() - started)


async def gather_bounded(
    calls: Iterable[Awaitable[T]], limit: int, timeout_s: float | None = None
) -> list[T | BaseException]:
    """Await every call, at most `limit` at once; each one's result or the exception it raised, in
    the order given (a failure never cancels the others). With `timeout_s`, all of them share that
    one deadline: a call not done by then is cancelled and its result is a TimeoutError (a pass's
    reads of many clusters cost at most one deadline, however many of them hang)."""
    semaphore = asyncio.Semaphore(limit)

    async def bounded(call: Awaitable[T]) -> T:
        try:
            async with semaphore:
                return await call
        finally:
            if inspect.iscoroutine(call):
                call.close()  # cancelled before it started: never "never awaited"

    tasks = [asyncio.ensure_future(bounded(call)) for call in calls]
    if timeout_s is None or not tasks:
        return list(await asyncio.gather(*tasks, return_exceptions=True))
    _, late = await asyncio.wait(tasks, timeout=max(timeout_s, 0.0))
    for task in late:
        task.cancel()
    await asyncio.gather(*late, return_exceptions=True)
    return [
        TimeoutError(f"no answer within {timeout_s:g}s")
        if task.cancelled()
        else (task.exception() or task.result())
        for task in tasks
    ]


def first_error(results: Iterable[object]) -> BaseException | None:
    """The first exception among gather_bounded's results (None when every call succeeded)."""
    return next((r for r in results if isinstance(r, BaseException)), None)


async def run_all(calls: Iterable[Awaitable[object]], limit: int) -> None:
    """Await every call, at most `limit` at once; once all are done, raise the first error (a
    failure never cancels the others, and none is left running)."""
    error = first_error(await gather_bounded(calls, limit))
    if error is not None:
        raise error
