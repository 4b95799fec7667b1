"""Time bounds on every request to an API server (issue 17: one hung server never stalls a loop).

A server that accepts connections and never answers would otherwise hold a request forever:
kubernetes_asyncio sets no timeout unless each call passes one. `bound_requests` gives every
request of an ApiClient a default bound, so no call site can forget it; a call that passes its own
`_request_timeout` (the informer's watch) keeps it.

Settings (environment, seconds, each above zero):

| variable | default | what |
| --- | --- | --- |
| COLONY_API_CONNECT_TIMEOUT_SECONDS | 5 | TCP + TLS connect |
| COLONY_API_REQUEST_TIMEOUT_SECONDS | 30 | one whole request, answer included |
| COLONY_WATCH_TIMEOUT_SECONDS | 60 | a watch's `timeoutSeconds`: the server ends it, it is resumed |
| COLONY_WATCH_STALL_SECONDS | 1.5 x watch | no event and no bookmark this long: the watch is dead, relist |
| COLONY_UNREACHABLE_PROBE_SECONDS | 2 | how often an unreachable colony API server is probed |
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
from kubernetes_asyncio import client

from colony.settings import SettingsError, positive_seconds


@dataclass(frozen=True)
class ApiTimeouts:
    """Seconds allowed to connect, to complete one request, and for a watch to stay silent."""

    connect_s: float = 5.0
    request_s: float = 30.0
    watch_s: float = 60.0
    """Server-side timeoutSeconds of a watch: the server ends it, the informer resumes it."""
    stall_s: float | None = None
    """No event and no bookmark for this long: the watch is dead (a half-open connection). Must
    exceed `watch_s`, since a quiet healthy watch is silent until the server ends it; None: 1.5 x."""
    probe_s: float = 2.0
    """How often an unreachable colony API server is probed (kube/reachability.py)."""

    def __post_init__(self) -> None:
        if self.stall_s is not None and self.stall_s <= self.watch_s:
            raise SettingsError(
                f"the watch stall bound ({self.stall_s:g}s) must exceed the watch timeout"
                f" ({self.watch_s:g}s): a quiet watch is silent until the server ends it"
            )

    @property
    def watch_stall_s(self) -> float:
        """A watch silent for this long is dead: the server ends every watch after `watch_s`."""
        return self.stall_s if self.stall_s is not None else self.watch_s * 1.5

    @classmethod
    def from_environment(cls) -> ApiTimeouts:
        """The settings in the table above, each with its default."""
        watch_s = positive_seconds("COLONY_WATCH_TIMEOUT_SECONDS", cls.watch_s)
        return cls(
            connect_s=positive_seconds("COLONY_API_CONNECT_TIMEOUT_SECONDS", cls.connect_s),
            request_s=positive_seconds("COLONY_API_REQUEST_TIMEOUT_SECONDS", cls.request_s),
            watch_s=watch_s,
            stall_s=positive_seconds("COLONY_WATCH_STALL_SECONDS", watch_s * 1.5),
            probe_s=positive_seconds("COLONY_UNREACHABLE_PROBE_SECONDS", cls.probe_s),
        )

    def request(self) -> aiohttp.ClientTimeout:
        """The bound of one ordinary request (connect, then the whole answer)."""
        return aiohttp.ClientTimeout(total=self.request_s, sock_connect=self.connect_s)

    def watch(self) -> aiohttp.ClientTimeout:
        """The bound of a watch stream: no total, but silence longer than the stall limit ends it."""
        return aiohttp.ClientTimeout(sock_connect=self.connect_s, sock_read=self.watch_stall_s)


DEFAULT_TIMEOUTS = ApiTimeouts.from_environment()


def _is_watch(query_params: Sequence[tuple[str, Any]] | None) -> bool:
    return any(key == "watch" and value not in (False, "false", None) for key, value in query_params or ())


def bound_requests(api: client.ApiClient, timeouts: ApiTimeouts = DEFAULT_TIMEOUTS) -> client.ApiClient:
    """Give every request of `api` a default time bound (a watch gets the stall bound); returns `api`."""
    rest = api.rest_client
    unbounded: Callable[..., Awaitable[Any]] = rest.request

    async def request(
        method: str,
        url: str,
        query_params: Sequence[tuple[str, Any]] | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        if kwargs.get("_request_timeout") is None:
            kwargs["_request_timeout"] = timeouts.watch() if _is_watch(query_params) else timeouts.request()
        return await unbounded(method, url, query_params, *args, **kwargs)

    rest.request = request  # type: ignore[method-assign,assignment]  # same call shape, bounded
    return api
