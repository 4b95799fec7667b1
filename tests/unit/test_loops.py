"""The batch loop runner survives a failing pass and answers a wake-up at once; the bounded gather
never runs more than its limit at a time and keeps every result in order."""

from __future__ import annotations

import asyncio
import time

import pytest

from colony.controllers.loops import first_error, gather_bounded, run_all, run_passes


def test_a_failing_pass_does_not_stop_the_loop() -> None:
    async def scenario() -> int:
        passes = 0

        async def one_pass() -> None:
            nonlocal passes
            passes += 1
            if passes == 1:
                raise RuntimeError("bad pass")

        loop = asyncio.create_task(run_passes("test", one_pass, 0.01))
        while passes < 3:
            await asyncio.sleep(0.01)
        loop.cancel()
        return passes

    assert asyncio.run(scenario()) >= 3


def test_a_wakeup_runs_the_next_pass_before_the_interval() -> None:
    async def scenario() -> float:
        wakeup = asyncio.Event()
        times: list[float] = []

        async def one_pass() -> None:
            times.append(asyncio.get_running_loop().time())

        loop = asyncio.create_task(run_passes("test", one_pass, 3600, wakeup=wakeup))
        while not times:
            await asyncio.sleep(0.01)
        wakeup.set()
        while len(times) < 2:
            await asyncio.sleep(0.01)
        loop.cancel()
        return times[1] - times[0]

    assert asyncio.run(scenario()) < 5


def test_gather_bounded_respects_its_limit_and_keeps_results_in_order() -> None:
    async def scenario() -> tuple[list[object], int]:
        running = peak = 0

        async def call(i: int) -> int:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.001 * (10 - i))
            running -= 1
            if i == 3:
                raise ValueError("three")
            return i

        return await gather_bounded((call(i) for i in range(10)), 3), peak

    results, peak = asyncio.run(scenario())
    assert peak == 3
    assert [r for r in results if not isinstance(r, BaseException)] == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    error = first_error(results)
    assert isinstance(error, ValueError) and str(error) == "three"
    assert first_error([1, 2]) is None


def test_run_all_finishes_every_call_then_raises_the_first_error() -> None:
    finished: list[int] = []

    async def call(i: int) -> None:
        await asyncio.sleep(0.01 * (5 - i))  # later calls end first
        finished.append(i)
        if i in (1, 3):
            raise ValueError(f"call {i}")

    with pytest.raises(ValueError, match="call 1"):
        asyncio.run(run_all((call(i) for i in range(5)), 2))
    assert sorted(finished) == [0, 1, 2, 3, 4]


def test_gather_bounded_under_a_deadline_cancels_what_is_late_and_keeps_the_rest() -> None:
    """Two hung calls cost one deadline, not two; queued calls behind them that never start are
    timed out too, without a "never awaited" warning; the answers that came are kept in order."""

    async def scenario() -> tuple[list[object], float, list[int]]:
        cancelled: list[int] = []

        async def call(i: int) -> int:
            try:
                if i in (1, 2):
                    await asyncio.Event().wait()  # hangs
                return i
            except asyncio.CancelledError:
                cancelled.append(i)
                raise

        started = time.monotonic()
        results = await gather_bounded((call(i) for i in range(5)), 2, timeout_s=0.2)
        return results, time.monotonic() - started, cancelled

    results, elapsed, cancelled = asyncio.run(scenario())
    assert 0.15 < elapsed < 0.6, elapsed
    assert [r if not isinstance(r, BaseException) else type(r) for r in results] == [
        0,
        TimeoutError,
        TimeoutError,
        TimeoutError,  # 3 and 4 waited behind the hung calls and never started
        TimeoutError,
    ]
    assert sorted(cancelled) == [1, 2]
