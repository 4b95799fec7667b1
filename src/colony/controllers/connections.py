"""kopf's API session, with a bound on the requests it has in flight.

kopf's own session has no limit (`TCPConnector(limit=0)`): every per-object worker that patches
at the same moment opens a TLS connection of its own. When thousands of objects change at once
(10,000 GPRs created, a relist, the API server slowing down and kopf retrying), the operator held
2,000 connections and their buffers: RSS went from 300 to 550 MiB and stayed there
(bench/operator_memory.py). Here kopf logs in as it would by itself (the client library's
configuration: in-cluster or kubeconfig), and at most REQUESTS_IN_FLIGHT requests wait for an
answer at a time; the rest queue. Watch streams are long-lived and not counted, so any number of
watched namespaces still works.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import kopf

REQUESTS_IN_FLIGHT = 32
"""More would not make a 2-core operator faster: its handlers, not the API server, are the limit."""


def bounded(limit: int) -> Any:
    """An aiohttp client middleware: at most `limit` requests (watch streams excepted) at a time."""
    slots = asyncio.Semaphore(limit)

    async def middleware(request: aiohttp.ClientRequest, handler: Any) -> aiohttp.ClientResponse:
        if request.url.query.get("watch") == "true":
            response: aiohttp.ClientResponse = await handler(request)
            return response
        async with slots:
            response = await handler(request)
            return response

    return middleware


@kopf.on.login()
async def login(**kwargs: Any) -> kopf.AiohttpSession | None:
    """kopf's default login, through a session that bounds the requests in flight."""
    info = kopf.login_via_client(**kwargs)
    if info is None:
        return None
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, ssl=info.as_ssl_context()),
        headers=info.as_http_headers(),
        trust_env=info.trust_env,
        middlewares=(bounded(REQUESTS_IN_FLIGHT),),
    )
    return kopf.AiohttpSession(
        server=info.server,
        default_namespace=info.default_namespace,
        priority=info.priority,
        expiration=info.expiration,
        aiohttp_session=session,
    )
