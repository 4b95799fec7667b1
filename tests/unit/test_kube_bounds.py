"""The pure parts of bounded API access (issue 17, point 1): the watch stall detector, the timeout
settings, and the reachability mark of a colony API server (its probe is a plain coroutine here;
the same code runs through a TCP fault proxy against a real API server in
tests/integration/test_api_timeouts.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from colony.kube.helm import LONG_COMMAND_BOUND_S, command_bound
from colony.kube.informer import WatchStalled, until_stalled
from colony.kube.reachability import Reachability, ServerUnreachable
from colony.kube.timeouts import DEFAULT_TIMEOUTS, ApiTimeouts
from colony.settings import SettingsError


async def _events(*delays: float) -> AsyncIterator[int]:
    for i, delay in enumerate(delays):
        await asyncio.sleep(delay)
        yield i


async def test_a_stream_that_keeps_talking_is_never_stalled() -> None:
    seen = [e async for e in until_stalled(_events(0.05, 0.05, 0.05, 0.05), stall_s=0.15)]
    assert seen == [0, 1, 2, 3]  # 0.2 s in all, more than the stall bound: the bound is per event


async def test_silence_past_the_stall_bound_ends_the_watch() -> None:
    seen: list[int] = []
    with pytest.raises(WatchStalled):
        async for event in until_stalled(_events(0.01, 0.01, 5.0), stall_s=0.2):
            seen.append(event)
    assert seen == [0, 1]
    assert issubclass(WatchStalled, TimeoutError)  # the informer relists on it like on any failure


def test_timeouts_default_and_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ApiTimeouts().watch_stall_s == 90.0
    monkeypatch.setenv("COLONY_WATCH_TIMEOUT_SECONDS", "20")
    monkeypatch.setenv("COLONY_UNREACHABLE_PROBE_SECONDS", "0.5")
    loaded = ApiTimeouts.from_environment()
    assert (loaded.watch_s, loaded.watch_stall_s, loaded.probe_s) == (20.0, 30.0, 0.5)
    monkeypatch.setenv("COLONY_WATCH_STALL_SECONDS", "25")
    assert ApiTimeouts.from_environment().watch_stall_s == 25.0


def test_a_stall_bound_within_the_watch_timeout_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLONY_WATCH_TIMEOUT_SECONDS", "60")
    monkeypatch.setenv("COLONY_WATCH_STALL_SECONDS", "60")
    with pytest.raises(SettingsError, match="must exceed the watch timeout"):
        ApiTimeouts.from_environment()
    monkeypatch.setenv("COLONY_WATCH_STALL_SECONDS", "-1")
    with pytest.raises(SettingsError, match="COLONY_WATCH_STALL_SECONDS"):
        ApiTimeouts.from_environment()


async def test_a_marked_server_fails_fast_until_a_probe_is_answered() -> None:
    answers = asyncio.Event()
    probes = 0

    async def probe() -> None:
        nonlocal probes
        probes += 1
        if not answers.is_set():
            raise TimeoutError("no answer")

    reachability = Reachability("https://colony", probe, ApiTimeouts(probe_s=0.05))
    reachability.check()  # reachable: nothing raised
    reachability.failed("TimeoutError")
    reachability.failed("again")  # one mark, one prober
    assert reachability.marks == 1
    with pytest.raises(ServerUnreachable, match="https://colony unreachable"):
        reachability.check()
    await asyncio.sleep(0.3)
    assert probes >= 2 and not reachability.reachable
    answers.set()
    await asyncio.sleep(0.2)
    assert reachability.reachable
    reachability.check()
    settled = probes
    await asyncio.sleep(0.2)
    assert probes == settled  # no probing while reachable
    await reachability.close()


async def test_an_http_error_answers_the_probe() -> None:
    async def probe() -> None:
        raise RuntimeError("403 Forbidden")  # the server answered, if unhappily

    reachability = Reachability("https://colony", probe, ApiTimeouts(probe_s=0.05))
    reachability.failed("reset")
    await asyncio.sleep(0.2)
    assert reachability.reachable
    await reachability.close()


def test_every_helm_process_is_bounded() -> None:
    assert command_bound(["upgrade", "r", "chart", "--install", "--timeout", "10m"]) == LONG_COMMAND_BOUND_S
    assert command_bound(["uninstall", "r"]) == LONG_COMMAND_BOUND_S > 600  # beyond helm's own --timeout
    assert command_bound(["list", "--all-namespaces"]) == 2 * DEFAULT_TIMEOUTS.request_s
    assert command_bound([]) == 2 * DEFAULT_TIMEOUTS.request_s


async def test_one_dropped_connection_is_not_enough_two_in_a_row_are() -> None:
    async def probe() -> None:
        raise TimeoutError

    reachability = Reachability("https://colony", probe, ApiTimeouts(probe_s=10))
    reachability.failed("ServerDisconnectedError", decisive=False)
    reachability.answered()  # a stale keep-alive connection, then an answer
    reachability.failed("ServerDisconnectedError", decisive=False)
    assert reachability.reachable
    reachability.failed("ClientOSError: reset", decisive=False)
    assert not reachability.reachable
    await reachability.close()
