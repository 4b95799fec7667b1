"""Run the kopf operator in this process against the current kubeconfig."""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import contextlib
import ctypes
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import kopf

from colony.kube.leader import DEFAULT_LEASE_NAME, ElectionTimings

if TYPE_CHECKING:
    from colony.controllers.context import OperatorSettings
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


@dataclass(frozen=True)
class LeaderElection:
    """Run the handlers and loops only while holding the Lease `namespace/name` (colony.kube.leader)."""

    namespace: str
    name: str = DEFAULT_LEASE_NAME
    timings: ElectionTimings = field(default_factory=ElectionTimings)


class LeadershipLost(Exception):
    """The Lease was lost while leading: the process exits, and restarts as a follower."""


LEADERSHIP_LOST_EXIT_CODE = 3
STANDBY_STOP_TIMEOUT_S = 5.0
"""How long a follower's standby operator may take to stop when it becomes the leader."""
LEADER_STOP_TIMEOUT_S = 1.0
"""How long a leader that lost the Lease waits for its handlers to stop before it exits anyway (well
within the margin lease duration - renew deadline, after which a successor may start)."""


def standby_registry(webhook: WebhookOptions | None) -> kopf.OperatorRegistry:
    """What a follower serves while it waits for the Lease: the validating webhook (it writes
    nothing), and through kopf the liveness endpoint. No handler that watches or writes objects.
    It logs in as kopf's default registry does without the sync client library (colony.import_guard):
    through kubernetes_asyncio's config (in-cluster service account, else the kubeconfig)."""
    registry = kopf.OperatorRegistry()
    kopf.on.login(registry=registry)(kopf.login_via_async_client)
    if webhook is not None:
        from colony.controllers import webhook as admission

        admission.enable(webhook, registry=registry)
    return registry


async def _kopf(
    namespaces: Sequence[str],
    liveness_endpoint: str | None,
    registry: kopf.OperatorRegistry | None = None,
    stop_flag: asyncio.Event | None = None,
    operator_settings: OperatorSettings | None = None,
) -> None:
    """kopf's operator. With `operator_settings` (the leader, or the only replica) it runs every
    handler and loop on an OperatorContext built first and closed after kopf stops; without (a
    standby registry) it carries none."""
    memo = kopf.Memo()
    context = None
    if operator_settings is not None:
        from colony.controllers.context import open_context

        context = await open_context(namespaces, operator_settings)
        memo.context = context  # every handler and loop takes what it needs from it (context_of)
    try:
        await kopf.operator(
            clusterwide=not namespaces,
            namespaces=list(namespaces),
            standalone=True,
            liveness_endpoint=liveness_endpoint,
            memo=memo,
            registry=registry,
            stop_flag=stop_flag,
        )
    finally:
        if context is not None:
            await context.close()


async def _stop(task: asyncio.Task[None], flag: asyncio.Event, timeout_s: float) -> None:
    """Ask kopf to stop (its cleanup handlers run), then cancel it after `timeout_s`."""
    flag.set()
    done, _ = await asyncio.wait({task}, timeout=timeout_s)
    if not done:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _lead(
    namespaces: Sequence[str],
    liveness_endpoint: str | None,
    election: LeaderElection,
    webhook: WebhookOptions | None,
    operator_settings: OperatorSettings,
) -> None:
    """A follower (standby: webhook and liveness only) until the Lease is ours, then the operator
    with every handler and loop for as long as we hold it. Returns when the operator stops (SIGTERM:
    the Lease is released first); raises LeadershipLost when the Lease is lost."""
    from colony.kube.config import default_api_client
    from colony.kube.leader import LeaderElector
    from colony.kube.resources import Kube

    api = await default_api_client()
    elector = LeaderElector(Kube(api), election.namespace, election.name, timings=election.timings)
    try:
        standby_stop = asyncio.Event()
        standby = asyncio.create_task(
            _kopf(namespaces, liveness_endpoint, standby_registry(webhook), standby_stop)
        )
        acquiring = asyncio.create_task(elector.acquire())
        await asyncio.wait({standby, acquiring}, return_when=asyncio.FIRST_COMPLETED)
        if not acquiring.done():  # the standby operator stopped (SIGTERM) before we led
            acquiring.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await acquiring
            await standby
            return
        await _stop(standby, standby_stop, STANDBY_STOP_TIMEOUT_S)
        holding = asyncio.create_task(elector.hold())
        leader_stop = asyncio.Event()
        leading = asyncio.create_task(
            _kopf(namespaces, liveness_endpoint, stop_flag=leader_stop, operator_settings=operator_settings)
        )
        await asyncio.wait({holding, leading}, return_when=asyncio.FIRST_COMPLETED)
        if holding.done():
            await _stop(leading, leader_stop, LEADER_STOP_TIMEOUT_S)
            raise LeadershipLost(f"{elector.identity} lost Lease {election.namespace}/{election.name}")
        holding.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await holding
        await leading
        await elector.step_down()
    finally:
        await api.close()


async def _operate(
    namespaces: Sequence[str],
    liveness_endpoint: str | None,
    operator_settings: OperatorSettings,
    election: LeaderElection | None = None,
    webhook: WebhookOptions | None = None,
) -> None:
    """kopf's operator (behind leader election when asked), with the heap trimmed alongside."""
    trimming = asyncio.create_task(trim_heap_periodically())
    try:
        if election is None:
            await _kopf(namespaces, liveness_endpoint, operator_settings=operator_settings)
        else:
            await _lead(namespaces, liveness_endpoint, election, webhook, operator_settings)
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
    election: LeaderElection | None = None,
) -> None:
    """Run until SIGINT/SIGTERM. Watches `namespaces`, or the whole cluster when empty; serves
    Prometheus metrics on `metrics_port` and the validating admission webhook
    (colony.controllers.webhook) when given. With `election`, only the holder of its Lease runs the
    handlers and loops; a follower serves the webhook and liveness only, and a leader that loses the
    Lease exits with LEADERSHIP_LOST_EXIT_CODE. Raises ValueError when the webhook's certificate is
    missing."""
    import colony.controllers  # noqa: F401 - registers the handlers (instrumented with metrics)
    from colony import metrics
    from colony.controllers.context import OperatorSettings
    from colony.logging_setup import configure_logging

    if webhook is not None:
        from colony.controllers import webhook as admission

        admission.enable(webhook)

    operator_settings = OperatorSettings.from_env()  # a bad setting stops us here, with its name
    limit_connection_memory()
    if metrics_port is not None:
        metrics.serve(metrics_port)

    configure_logging(verbose=verbose, json_logs=json_logs)
    try:
        asyncio.run(_operate(namespaces, liveness_endpoint, operator_settings, election, webhook))
    except LeadershipLost as lost:
        logging.getLogger(__name__).error("%s; exiting (a restart makes this replica a follower)", lost)
        raise SystemExit(LEADERSHIP_LOST_EXIT_CODE) from None
