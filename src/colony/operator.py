"""Run the kopf operator in this process against the current kubeconfig."""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import contextlib
import ctypes
from collections.abc import Sequence
from typing import TYPE_CHECKING

import kopf

if TYPE_CHECKING:
    from colony.controllers.webhook import WebhookOptions

TLS_READ_BUFFER = 64 * 1024
"""Bytes asyncio's TLS transport reads at once; it allocates that much for every connection."""
MMAP_THRESHOLD = 64 * 1024
"""Allocations of this size and larger get their own memory mapping, unmapped when freed."""
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number
HEAP_TRIM_INTERVAL_S = 30.0
"""How often the heap's free pages are handed back to the system (trim_heap)."""


def limit_connection_memory() -> bool:
    """Keep the memory of API connections small, and give it back when they close.

    kopf opens a TLS connection per concurrent request (its connector has no limit): hundreds in a
    burst of events, each with a read buffer of 256 KiB by asyncio's default. 64 KiB is plenty
    (responses are read in a loop). glibc's malloc serves such buffers from the heap once it has
    freed one, and a fragmented heap does not shrink: RSS stayed at the peak of the burst
    (bench/operator_memory.py). A fixed mmap threshold gives each buffer its own mapping, returned
    to the system when the connection closes. Returns whether malloc took the setting (glibc).
    """
    asyncio.sslproto.SSLProtocol.max_size = TLS_READ_BUFFER
    with contextlib.suppress(OSError, AttributeError):
        return bool(ctypes.CDLL("libc.so.6").mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    return False


def trim_heap() -> bool:
    """Hand the heap's free pages back to the system (glibc's malloc_trim).

    After a load peak (thousands of requests listed, created and deleted at once) CPython frees the
    objects but glibc keeps their pages in the heap, so RSS, which is what a memory limit counts,
    stays at the peak. Returns whether any memory was released (False without glibc).
    """
    with contextlib.suppress(OSError, AttributeError):
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    return False


async def trim_heap_periodically(interval_s: float = HEAP_TRIM_INTERVAL_S) -> None:
    """trim_heap() every `interval_s` until cancelled (a few milliseconds each)."""
    while True:
        await asyncio.sleep(interval_s)
        trim_heap()


async def _operate(namespaces: Sequence[str], liveness_endpoint: str | None) -> None:
    """kopf's operator, with the heap trimmed alongside."""
    trimming = asyncio.create_task(trim_heap_periodically())
    try:
        await kopf.operator(
            clusterwide=not namespaces,
            namespaces=list(namespaces),
            standalone=True,
            liveness_endpoint=liveness_endpoint,
            memo=kopf.Memo(namespaces=list(namespaces)),
        )
    finally:
        trimming.cancel()


def run_operator(
    namespaces: Sequence[str] = (),
    *,
    liveness_endpoint: str | None = None,
    verbose: bool = False,
    json_logs: bool = False,
    metrics_port: int | None = None,
    webhook: WebhookOptions | None = None,
) -> None:
    """Run until SIGINT/SIGTERM. Watches `namespaces`, or the whole cluster when empty; serves
    Prometheus metrics on `metrics_port` and the validating admission webhook
    (colony.controllers.webhook) when given. Raises ValueError when the webhook's certificate is
    missing."""
    import colony.controllers  # noqa: F401 - registers the handlers (instrumented with metrics)
    from colony import metrics
    from colony.logging_setup import configure_logging

    if webhook is not None:
        from colony.controllers import webhook as admission

        admission.enable(webhook)

    limit_connection_memory()
    if metrics_port is not None:
        metrics.serve(metrics_port)

    configure_logging(verbose=verbose, json_logs=json_logs)
    asyncio.run(_operate(namespaces, liveness_endpoint))
