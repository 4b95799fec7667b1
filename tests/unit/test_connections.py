"""kopf's API session: kopf's own login, with a bound on the requests in flight (watches excepted)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import aiohttp
import kopf
import pytest
import yaml
from aiohttp import web
from kubernetes.config import kube_config

from colony.controllers.connections import bounded, login


async def test_bounded_lets_limit_requests_in_flight_and_watches_past() -> None:
    in_flight = peak = 0
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        if request.query.get("watch") != "true":
            await release.wait()
        in_flight -= 1
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/", slow)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        async with aiohttp.ClientSession(middlewares=(bounded(3),)) as session:

            async def get(query: str = "") -> str:
                async with session.get(f"http://127.0.0.1:{port}/{query}") as response:
                    return await response.text()

            requests = [asyncio.create_task(get()) for _ in range(10)]
            await asyncio.sleep(0.3)
            assert peak == 3  # the other 7 wait for a slot
            assert await asyncio.wait_for(get("?watch=true"), 5) == "ok"  # not held back
            release.set()
            assert await asyncio.gather(*requests) == ["ok"] * 10
    finally:
        await runner.cleanup()


async def test_login_reads_the_kubeconfig_as_kopf_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": {"server": "https://127.0.0.1:6443", "insecure-skip-tls-verify": True}}
        ],
        "users": [{"name": "u", "user": {"token": "secret-token"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "ns"}}],
        "current-context": "x",
    }
    (tmp_path / "config").write_text(yaml.safe_dump(kubeconfig))
    # the client library reads $KUBECONFIG when imported: point its default at this file instead
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(tmp_path / "config"))
    context = await login(logger=logging.getLogger("test"), settings=kopf.OperatorSettings())
    assert isinstance(context, kopf.AiohttpSession)
    try:
        assert context.server == "https://127.0.0.1:6443"
        assert context.aiohttp_session.headers["Authorization"] == "Bearer secret-token"
        assert context.aiohttp_session._middlewares  # the bound is in place
    finally:
        await context.aiohttp_session.close()
