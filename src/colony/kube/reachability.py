"""Fail fast on a colony API server that stopped answering (issue 17: one hung cluster stays local).

A request to a hung server costs its caller the whole request bound (or the caller's own deadline).
Paid once per pass and per object, that turns every loop touching the colony into a loop as slow as
the bound. `guard_requests` wraps an ApiClient so that a timeout or a broken connection marks its
server unreachable: from then on every request to it fails at once with `ServerUnreachable` (a
`ConnectionError`, which every caller already handles as "cannot reach the cluster") while one
background probe (`GET /version`, every `probe_s`) waits for the server to answer again. The first
answer closes the mark. A healthy server that was merely slow costs one probe round trip.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import aiohttp
from kubernetes_asyncio import client

from colony.kube.timeouts import DEFAULT_TIMEOUTS, ApiTimeouts

log = logging.getLogger(__name__)

Request = Callable[..., Awaitable[Any]]


class ServerUnreachable(ConnectionError):
    """The API server is marked unreachable (a recent request timed out or lost its connection);
    no request is sent until a probe gets an answer."""


SLOW_CANCEL_S = 1.0
"""A request its caller cancelled after waiting this long counts as unanswered (the caller's deadline)."""
FAILURES: tuple[type[BaseException], ...] = (TimeoutError, aiohttp.ClientConnectionError, ConnectionError)
"""What counts against a server: it did not answer in time, or the connection failed."""
DECISIVE: tuple[type[BaseException], ...] = (TimeoutError, aiohttp.ClientConnectorError)
"""Failures that mark a server at once: no answer in time, or no new connection. A connection
dropped under a request (a reset, a pooled keep-alive connection the server had closed) marks it
only when the next request fails too (CONNECTION_FAILURES in a row)."""
CONNECTION_FAILURES = 2
_NO_ANSWER: tuple[type[BaseException], ...] = (*FAILURES, OSError)


class Reachability:
    """Whether one API server answers; the mark is set by a failed request and cleared by a probe."""

    def __init__(self, server: str, probe: Request, timeouts: ApiTimeouts = DEFAULT_TIMEOUTS) -> None:
        """`probe()` sends one small request past the guard (raising when there is no answer)."""
        self.server = server
        self.timeouts = timeouts
        self._probe = probe
        self.why: str | None = None
        """Why the server is marked unreachable; None while it is reachable."""
        self.since: float | None = None
        self.marks = 0
        """How often the server was marked unreachable (for tests and logs)."""
        self.failures = 0
        """Failed requests in a row (a success resets it)."""
        self._prober: asyncio.Task[None] | None = None

    @property
    def reachable(self) -> bool:
        return self.why is None

    def check(self) -> None:
        """Raise ServerUnreachable while the server is marked."""
        if self.why is not None:
            age = time.monotonic() - (self.since or time.monotonic())
            raise ServerUnreachable(f"API server {self.server} unreachable for {age:.0f}s: {self.why}")

    def answered(self) -> None:
        """A request got an answer."""
        self.failures = 0

    def failed(self, why: str, decisive: bool = True) -> None:
        """A request found the server not answering: mark it and start probing (a failure that is
        not `decisive` only from CONNECTION_FAILURES in a row)."""
        self.failures += 1
        if self.why is not None or (not decisive and self.failures < CONNECTION_FAILURES):
            return
        self.why, self.since = why, time.monotonic()
        self.marks += 1
        log.warning(
            "API server %s marked unreachable: %s; probing every %gs", self.server, why, self.timeouts.probe_s
        )
        self._prober = asyncio.get_running_loop().create_task(self._probe_until_answered())

    async def _probe_until_answered(self) -> None:
        while True:
            await asyncio.sleep(self.timeouts.probe_s)
            try:
                async with asyncio.timeout(min(self.timeouts.request_s, self.timeouts.probe_s + 1)):
                    await self._probe()
            except _NO_ANSWER as error:
                log.debug("API server %s still unreachable: %s", self.server, _describe(error))
                continue
            except Exception as error:  # an HTTP error is an answer: the server is back
                log.debug("API server %s answered the probe with %s", self.server, _describe(error))
            down = time.monotonic() - (self.since or time.monotonic())
            log.warning("API server %s answers again (after %.1fs)", self.server, down)
            self.why = self.since = None
            self.failures = 0
            self._prober = None
            return

    async def close(self) -> None:
        """Stop probing."""
        if self._prober is not None:
            self._prober.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._prober
            self._prober = None


def _describe(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:200]}" if text else type(error).__name__


def guard_requests(api: client.ApiClient, timeouts: ApiTimeouts = DEFAULT_TIMEOUTS) -> Reachability:
    """Put `api` behind a Reachability of its server (see the module doc); returns it.

    Wraps `api.rest_client.request` (after `bound_requests`, so every request has a bound): a
    request to a marked server raises ServerUnreachable without being sent; a request that times
    out or loses its connection marks the server (see DECISIVE). A request cancelled by its caller
    after waiting at least SLOW_CANCEL_S (a caller's deadline on a server that does not answer)
    marks it too.
    """
    rest = api.rest_client
    unguarded: Request = rest.request
    server = str(api.configuration.host)

    async def probe() -> None:
        response = await unguarded(
            "GET", f"{server}/version", None, headers={"Accept": "application/json"}, _preload_content=False
        )
        response.release()

    reachability = Reachability(server, probe, timeouts)

    async def request(
        method: str,
        url: str,
        query_params: Sequence[tuple[str, Any]] | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        reachability.check()
        started = time.monotonic()
        try:
            response = await unguarded(method, url, query_params, *args, **kwargs)
        except FAILURES as error:
            reachability.failed(_describe(error), decisive=isinstance(error, DECISIVE))
            raise
        except asyncio.CancelledError:
            if time.monotonic() - started >= SLOW_CANCEL_S:
                reachability.failed(f"no answer within {time.monotonic() - started:.1f}s")
            raise
        reachability.answered()
        return response

    rest.request = request  # type: ignore[method-assign,assignment]  # same call shape, guarded
    return reachability
