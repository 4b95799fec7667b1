"""Handler runs: how often each kopf handler (and the scheduling loop) ran, with what result and how
long it took, and the Events the operator posted. Every resource handler is wrapped in one place,
`instrument_handlers`, called when colony.controllers is imported."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import kopf
from prometheus_client import Counter, Histogram

RECONCILES = Counter(
    "colony_reconcile_total",
    "Handler runs by kind, handler and result: success, retry (kopf.TemporaryError: waiting for "
    "something) or error (any other exception).",
    ["kind", "handler", "result"],
)
RECONCILE_ERRORS = Counter(
    "colony_reconcile_errors_total",
    "Handler runs that failed with an exception other than kopf.TemporaryError, by exception type.",
    ["kind", "handler", "exception"],
)
RECONCILE_DURATION = Histogram(
    "colony_reconcile_duration_seconds",
    "Seconds one handler run took, by kind and handler.",
    ["kind", "handler"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
)
JOB_POD_READS = Counter(
    "colony_job_pod_reads_total",
    "Reads of a DDPJob's worker pods by its tracking, by source: watch (the cluster's pod watch) or "
    "list (a LIST, while the watch is starting, failing or has not yet delivered the job's launch).",
    ["source"],
)


def record_job_pod_read(source: str) -> None:
    """One read of a job's pods from `source` (watch or list)."""
    JOB_POD_READS.labels(source=source).inc()


EVENTS = Counter(
    "colony_events_total",
    "Kubernetes Events the operator posted, by the involved object's kind, reason and type.",
    ["kind", "reason", "type"],
)

SUCCESS, RETRY, ERROR = "success", "retry", "error"
_INSTRUMENTED = "__colony_instrumented__"


@contextlib.contextmanager
def observe_handler(kind: str, handler: str) -> Iterator[None]:
    """Count one run of `handler` for `kind` with its result and time it (exceptions pass through)."""
    started = time.perf_counter()
    result = SUCCESS
    try:
        yield
    except kopf.TemporaryError:
        result = RETRY
        raise
    except Exception as error:
        result = ERROR
        RECONCILE_ERRORS.labels(kind, handler, type(error).__name__).inc()
        raise
    finally:
        RECONCILES.labels(kind, handler, result).inc()
        RECONCILE_DURATION.labels(kind, handler).observe(time.perf_counter() - started)


F = TypeVar("F", bound=Callable[..., Any])


def observes_itself(fn: F) -> F:
    """Mark a handler that counts and times its own steps with observe_handler (a daemon that loops:
    one run of it would be one reconcile lasting the object's life): instrument leaves it as it is."""
    setattr(fn, _INSTRUMENTED, True)
    return fn


def instrument(fn: Callable[..., Any], kind: str, handler: str) -> Callable[..., Any]:
    """`fn` wrapped by observe_handler; a coroutine function stays one (kopf runs sync ones in threads)."""
    if getattr(fn, _INSTRUMENTED, False):
        return fn
    wrapper: Callable[..., Any]
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            with observe_handler(kind, handler):
                return await fn(*args, **kwargs)

    else:

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with observe_handler(kind, handler):
                return fn(*args, **kwargs)

    setattr(wrapper, _INSTRUMENTED, True)
    return wrapper


def instrument_handlers(registry: Any, kinds: dict[str, str]) -> int:
    """Wrap every resource handler of a kopf registry (create/update/resume/delete, timers, event
    watchers) with `instrument`; `kinds` maps a resource's plural to the kind used as label. Returns
    how many handlers were wrapped; a second call wraps nothing again."""
    wrapped: dict[int, Callable[..., Any]] = {}
    count = 0
    for sub_registry in vars(registry).values():
        handlers = getattr(sub_registry, "_handlers", None)
        if not isinstance(handlers, list):
            continue
        for index, handler in enumerate(handlers):
            selector = getattr(handler, "selector", None)
            if selector is None or getattr(handler.fn, _INSTRUMENTED, False):
                continue  # operator activities (startup, cleanup, login) are not reconciles
            plural = selector.plural or selector.any_name or ""
            kind = kinds.get(plural) or selector.kind or plural
            name = getattr(handler.fn, "__name__", str(handler.id))
            fn = wrapped.setdefault(id(handler.fn), instrument(handler.fn, kind, name))
            handlers[index] = dataclasses.replace(handler, fn=fn)
            count += 1
    return count


def count_event(kind: str, reason: str, warning: bool) -> None:
    """One Event posted."""
    EVENTS.labels(kind, reason, "Warning" if warning else "Normal").inc()
