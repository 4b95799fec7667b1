"""Every request to an API server is bounded (issue 17, point 1), shown through a TCP fault proxy in
front of the real management API server: a hung server costs a request its timeout, not forever; a
reset fails fast; a half-open watch is noticed within the stall bound and the informer relists; a
server found hung is marked unreachable, so later requests fail at once until a probe is answered."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlparse

import aiohttp
import pytest
import yaml

from colony.devenv.cluster import LocalCluster
from colony.kube.config import api_client_from_kubeconfig
from colony.kube.informer import Informer
from colony.kube.reachability import ServerUnreachable, guard_requests
from colony.kube.resources import Kube
from colony.kube.timeouts import ApiTimeouts, bound_requests
from tests.faultproxy import FaultProxy

pytestmark = pytest.mark.integration

SHORT = ApiTimeouts(connect_s=1.0, request_s=2.0, watch_s=2.0, probe_s=0.5)


@pytest.fixture
def proxy(management: LocalCluster) -> Iterator[FaultProxy]:
    target = urlparse(management.server)
    assert target.hostname is not None and target.port is not None
    with FaultProxy(target.hostname, target.port) as running:
        yield running


@pytest.fixture
async def kube(management: LocalCluster, proxy: FaultProxy) -> AsyncIterator[Kube]:
    """A client of the management cluster through the proxy, with SHORT timeouts."""
    config: dict[str, Any] = yaml.safe_load(management.kubeconfig())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    api = bound_requests(await api_client_from_kubeconfig(config), SHORT)
    try:
        yield Kube(api)
    finally:
        await api.close()


async def test_a_hung_server_costs_one_request_timeout(kube: Kube, proxy: FaultProxy) -> None:
    assert await kube.list("v1", "Namespace")  # healthy; discovery is cached from here on
    proxy.mode = "hang"
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await kube.list("v1", "Namespace")
    assert time.monotonic() - started < SHORT.request_s + 1.5
    proxy.mode = "pass"
    assert await kube.list("v1", "Namespace")


async def test_a_hung_server_is_marked_unreachable_until_it_answers_a_probe(
    kube: Kube, proxy: FaultProxy
) -> None:
    reachability = guard_requests(kube.api, SHORT)
    try:
        assert await kube.list("v1", "Namespace")
        proxy.mode = "hang"
        with pytest.raises(TimeoutError):
            await kube.list("v1", "Namespace")  # this one pays the request bound...
        assert not reachability.reachable
        started = time.monotonic()
        for _ in range(20):
            with pytest.raises(ServerUnreachable):
                await kube.list("v1", "Namespace")  # ...the next ones are not even sent
        assert time.monotonic() - started < 0.2
        await asyncio.sleep(3 * SHORT.probe_s)
        assert not reachability.reachable  # probes get no answer either
        proxy.mode = "pass"
        proxy.reset_all()  # the hung connections go; the probe opens a fresh one
        assert await _wait_for(lambda: reachability.reachable, SHORT.probe_s + SHORT.request_s + 2)
        assert await kube.list("v1", "Namespace")
        assert reachability.marks == 1
    finally:
        await reachability.close()


async def test_a_reset_fails_fast(kube: Kube, proxy: FaultProxy) -> None:
    assert await kube.list("v1", "Namespace")
    proxy.mode = "reset"
    proxy.reset_all()
    started = time.monotonic()
    with pytest.raises((aiohttp.ClientError, ConnectionError)):
        await kube.list("v1", "Namespace")
    assert time.monotonic() - started < 1.0


async def _wait_for(predicate: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.1)
    return False


def _queue(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "GPUQueue",
        "metadata": {"name": name},
        "spec": {"namespaces": [f"u-{name}"], "quotas": [{"gpuType": "A100", "nominal": 1}]},
    }


async def test_watch_renews_without_relisting_and_a_half_open_watch_is_replaced(
    kube: Kube, proxy: FaultProxy, management: LocalCluster, caplog: pytest.LogCaptureFixture
) -> None:
    informer = Informer(kube.api, "infra.exalsius.ai", "v1", "gpuqueues", "GPUQueue", timeouts=SHORT)
    task = asyncio.create_task(informer.run())
    names: list[str] = []
    try:
        await asyncio.wait_for(informer.synced.wait(), 10)
        # healthy: the server ends each 2 s watch, the informer resumes it from its version
        caplog.set_level(logging.WARNING, logger="colony.kube.informer")
        for _ in range(3):
            names.append(f"q-{uuid.uuid4().hex[:8]}")
            await asyncio.to_thread(management.apply, [_queue(names[-1])])
            assert await _wait_for(lambda: informer.get(names[-1]) is not None, 5), names[-1]
            await asyncio.sleep(SHORT.watch_s)
        assert "listing again" not in caplog.text
        # half-open: the proxy drops everything; an event written now never reaches this watch
        proxy.mode = "hang"
        names.append(f"q-{uuid.uuid4().hex[:8]}")
        await asyncio.to_thread(management.apply, [_queue(names[-1])])
        await asyncio.sleep(SHORT.watch_stall_s + 0.5)
        proxy.mode = "pass"
        assert await _wait_for(lambda: informer.get(names[-1]) is not None, 10), "stale informer"
        assert "listing again" in caplog.text
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        for name in names:
            await asyncio.to_thread(management.kubectl, "delete", "gpuqueue", name, "--ignore-not-found")
