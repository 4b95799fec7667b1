"""`colony simulate --plot`: queue length, GPUs busy and the wait distribution per policy, as a PNG.

matplotlib is an optional extra (`pip install 'colony-operator[plot]'`); nothing else imports it.
The curves come from the completed runs (start, end, GPUs held) and submissions; runs that were
later preempted are not drawn (their GPU time is in the utilization figures of the table).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from colony.simulate.replay import ReplayResult

DAY_S = 86400.0


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def check_plotting() -> None:
    """Raise PlotUnavailable with the install hint when matplotlib is missing."""
    if importlib.util.find_spec("matplotlib") is None:
        raise PlotUnavailable(
            "--plot needs matplotlib: pip install 'colony-operator[plot]' (or pip install matplotlib)"
        )


def step_series(events: Sequence[tuple[float, int]]) -> tuple[list[float], list[int]]:
    """A step curve (times, values) of the running sum of (time, delta) events."""
    times: list[float] = []
    values: list[int] = []
    level = 0
    for t, delta in sorted(events):
        level += delta
        if times and times[-1] == t:
            values[-1] = level
        else:
            times.append(t)
            values.append(level)
    return times, values


def queue_and_busy(
    result: ReplayResult,
) -> tuple[tuple[list[float], list[int]], tuple[list[float], list[int]]]:
    """(queue length, GPUs busy) step curves of a replay, from its completed jobs."""
    queued: list[tuple[float, int]] = []
    busy: list[tuple[float, int]] = []
    for o in result.completed:
        queued += [(o.job.submit_time_s, 1), (o.start_s, -1)]
        busy += [(o.start_s, o.allocated_gpus), (o.end_s, -o.allocated_gpus)]
    for job in result.unfinished:
        queued.append((job.submit_time_s, 1))
    return step_series(queued), step_series(busy)


def plot_results(results: Sequence[ReplayResult], path: Path, title: str) -> None:
    """Draw queue length and GPUs busy over simulated time (days) and the wait CDF into `path`."""
    check_plotting()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_queue, ax_busy, ax_wait) = plt.subplots(3, 1, figsize=(9, 10))
    for result in results:
        (qt, qv), (bt, bv) = queue_and_busy(result)
        ax_queue.step([t / DAY_S for t in qt], qv, where="post", label=result.policy, linewidth=0.8)
        ax_busy.step([t / DAY_S for t in bt], bv, where="post", label=result.policy, linewidth=0.8)
        waits = sorted(o.wait_s / 3600 for o in result.completed)
        if waits:
            ax_wait.plot(waits, [(i + 1) / len(waits) for i in range(len(waits))], label=result.policy)
    if results:
        ax_busy.axhline(results[0].cluster.gpus, color="grey", linestyle=":", linewidth=0.8)
    ax_queue.set(title=title, xlabel="simulated time (days)", ylabel="jobs waiting")
    ax_busy.set(xlabel="simulated time (days)", ylabel="GPUs busy")
    ax_wait.set(xlabel="wait (hours, log scale)", ylabel="fraction of jobs")
    ax_wait.set_xscale("symlog", linthresh=1.0)
    for ax in (ax_queue, ax_busy, ax_wait):
        ax.legend(loc="best")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
