"""`colony simulate`: replay a job trace through the scheduler under several queue orders."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn
from rich.table import Table

from colony.cli.jsonpath import JsonPathTemplate, OutputChoice
from colony.cli.kube import CliError, fail, output_option, print_data
from colony.scheduling.queueing.model import DEFAULT_AGING_S, QueueOrder
from colony.simulate.cluster import SimCluster
from colony.simulate.metrics import Metrics, compute_metrics
from colony.simulate.replay import ReplayResult
from colony.simulate.trace import TraceError, TraceJob, load_trace

WIDTH = 80
"""Tables are laid out for 80 columns, on a terminal or piped."""
MAX_NAMED = 8
"""Dropped jobs named in the summary (all of them are in `-o json`)."""
PROGRESS_AFTER_JOBS = 2000
"""Replays of more jobs than this show a progress bar (simulated time) on a terminal."""


class Policy(StrEnum):
    """Queue orders of the scheduler core (see colony.scheduling.queueing.model.QueueOrder)."""

    fifo = "fifo"
    priority = "priority"
    default = "default"
    shortest = "shortest"
    sjf = "sjf"


_ORDERS: dict[Policy, QueueOrder] = {
    Policy.fifo: "fifo",
    Policy.priority: "priority",
    Policy.default: "default",
    Policy.shortest: "shortest",
    Policy.sjf: "sjf",
}
DEFAULT_POLICIES = (Policy.fifo, Policy.default, Policy.shortest)


class OutputFormat(OutputChoice, StrEnum):
    """How `colony simulate` prints its figures (or `-o jsonpath=TEMPLATE` on what `-o json`
    prints)."""

    table = "table"
    json = "json"


ProgressHook = Callable[[Policy], Callable[[float], None] | None]
"""Per policy, the callback a replay reports its simulated time to (None: none)."""


def run_policies(
    jobs: tuple[TraceJob, ...],
    cluster: SimCluster,
    policies: list[Policy],
    aging_s: float = DEFAULT_AGING_S,
    progress: ProgressHook | None = None,
) -> list[tuple[ReplayResult, Metrics, float]]:
    """Replay `jobs` once per policy with the real scheduler: (result, figures, seconds it took)."""
    from colony.simulate.replay import replay

    results = []
    for policy in policies:
        started = time.perf_counter()
        hook = progress(policy) if progress is not None else None
        result = replay(jobs, cluster, _ORDERS[policy], aging_s=aging_s, progress=hook)
        results.append((result, compute_metrics(result), time.perf_counter() - started))
    return results


def human_seconds(seconds: float) -> str:
    """A short duration for people: 95s, 12.5m, 5.1h, 7.4d."""
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd]?)$")
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> float:
    """Seconds of `300`, `300s`, `90m`, `6h` or `2d` (typer option parser)."""
    found = _DURATION.match(text.strip())
    if found is None or float(found.group(1)) <= 0:
        raise typer.BadParameter(f"{text!r} is not a duration above zero such as 300, 90m, 6h or 2d")
    return float(found.group(1)) * _UNIT_S[found.group(2)]


def _figures_table(results: list[tuple[ReplayResult, Metrics, float]], title: str) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
    table.add_column("policy", no_wrap=True, min_width=8)
    for name in ("jobs", "wait avg", "p95", "p99", "max", "JCT avg", "util %", "run s"):
        table.add_column(name, justify="right", no_wrap=True, min_width=len(name))
    for _, m, runtime in results:
        table.add_row(
            m.policy,
            f"{m.jobs}" + (f"+{m.unfinished}?" if m.unfinished else ""),
            human_seconds(m.avg_wait_s),
            human_seconds(m.p95_wait_s),
            human_seconds(m.p99_wait_s),
            human_seconds(m.max_wait_s),
            human_seconds(m.avg_jct_s),
            f"{m.utilization * 100:.1f}",
            f"{runtime:.2f}" if runtime < 10 else f"{runtime:.0f}",
        )
    return table


def _tenants_table(results: list[tuple[ReplayResult, Metrics, float]]) -> Table | None:
    """Share of busy GPU-seconds per tenant (rows) and policy (columns); None for one tenant."""
    tenants = sorted({t for _, m, _ in results for t in m.tenant_shares})
    if len(tenants) < 2:
        return None
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
    table.add_column("tenant", no_wrap=True, max_width=24, overflow="ellipsis")
    for _, m, _ in results:
        table.add_column(m.policy, justify="right", no_wrap=True, min_width=len(m.policy))
    for tenant in tenants:
        table.add_row(tenant, *(f"{m.tenant_shares.get(tenant, 0.0) * 100:.1f}" for _, m, _ in results))
    return table


def _dropped_line(jobs: tuple[TraceJob, ...], cluster: SimCluster) -> str | None:
    dropped = [job for job in jobs if not cluster.fits(job.gpus)]
    if not dropped:
        return None
    named = ", ".join(f"{job.job_id} ({job.gpus} GPUs)" for job in dropped[:MAX_NAMED])
    more = f" and {len(dropped) - MAX_NAMED} more" if len(dropped) > MAX_NAMED else ""
    return (
        f"{len(dropped)} job(s) cannot fit this cluster and were not replayed: {named}{more}. "
        "Use more --gpus or --gpus-per-node."
    )


def _at_least_one(value: int | None) -> int | None:
    """Typer callback: a count that must be 1 or more (click's range shows `x>=1` in the help)."""
    if value is not None and value < 1:
        raise typer.BadParameter(f"must be 1 or more, got {value}")
    return value


def simulate(
    trace: Annotated[
        Path,
        typer.Argument(
            exists=True, dir_okay=False, help="Job trace CSV: job_id,tenant,submit_time_s,gpus,..."
        ),
    ],
    gpus: Annotated[
        int,
        typer.Option("--gpus", metavar="N", callback=_at_least_one, help="GPUs of the simulated cluster."),
    ],
    gpus_per_node: Annotated[
        int,
        typer.Option(metavar="N", callback=_at_least_one, help="GPUs per node of the simulated cluster."),
    ] = 8,
    policy: Annotated[
        list[Policy] | None,
        typer.Option(
            "--policy",
            metavar="POLICY",
            help="Queue order to replay: fifo, priority, default, shortest or sjf "
            "(repeatable; default: fifo, default and shortest).",
        ),
    ] = None,
    aging: Annotated[
        str,
        typer.Option(
            metavar="DURATION",
            help="Aging of default, shortest and sjf: a request waiting this long (300, 90m, 6h, 2d) "
            "goes before younger ones, and rises one priority level per such period.",
        ),
    ] = "6h",
    limit_jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            "--limit-jobs",
            metavar="N",
            callback=_at_least_one,
            help="Replay only the first N jobs.",
        ),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            metavar="FILE.png",
            dir_okay=False,
            help="Also draw queue length, GPUs busy and waits per policy into this PNG "
            "(needs the `plot` extra: pip install 'colony-operator[plot]').",
        ),
    ] = None,
    output: Annotated[
        OutputChoice, output_option(OutputFormat, "table, json or jsonpath=TEMPLATE.")
    ] = OutputFormat.table,
) -> None:
    """Replay a GPU job trace through the scheduler with simulated time; compare queue orders."""
    aging_s = parse_duration(aging)
    try:
        jobs = load_trace(trace, limit=limit_jobs)
    except TraceError as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(1) from None
    if plot is not None:
        from colony.simulate.plot import PlotUnavailable, check_plotting

        try:
            check_plotting()
        except PlotUnavailable as error:
            typer.echo(str(error), err=True)
            raise typer.Exit(1) from None
    cluster = SimCluster.for_trace(jobs, gpus=gpus, gpus_per_node=gpus_per_node)
    policies = list(dict.fromkeys(policy or DEFAULT_POLICIES))
    errors = Console(stderr=True)
    show_progress = output is OutputFormat.table and errors.is_terminal and len(jobs) > PROGRESS_AFTER_JOBS
    if show_progress:
        end = max((job.submit_time_s for job in jobs), default=0.0) or 1.0
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("simulated {task.fields[at]}"),
            console=errors,
            transient=True,
        ) as bar:

            def progress(p: Policy) -> Callable[[float], None]:
                task = bar.add_task(f"{p.value:>8}", total=end, at="0s")
                return lambda now_s: bar.update(task, completed=min(now_s, end), at=human_seconds(now_s))

            results = run_policies(jobs, cluster, policies, aging_s, progress)
    else:
        results = run_policies(jobs, cluster, policies, aging_s)
    if plot is not None:
        from colony.simulate.plot import plot_results

        plot_results([r for r, _, _ in results], plot, title=f"{trace.name} on {gpus} GPUs")
    if output is OutputFormat.json or isinstance(output, JsonPathTemplate):
        rows = [{**m.to_dict(), "runtime_s": runtime} for _, m, runtime in results]
        dropped = [job.job_id for job in jobs if not cluster.fits(job.gpus)]
        for row in rows:
            row["dropped_jobs"] = dropped
        if isinstance(output, JsonPathTemplate):
            try:
                print_data(rows, output)
            except CliError as error:
                fail(str(error), error.code)
        else:
            typer.echo(json.dumps(rows, indent=2))
        return
    _print_tables(trace, jobs, cluster, results, aging_s)


def _print_tables(
    trace: Path,
    jobs: tuple[TraceJob, ...],
    cluster: SimCluster,
    results: list[tuple[ReplayResult, Metrics, float]],
    aging_s: float,
) -> None:
    nodes = cluster.node_capacities
    of = f"{cluster.gpus_per_node}" if nodes[-1] == cluster.gpus_per_node else f"<={cluster.gpus_per_node}"
    title = f"{trace.name}: {len(jobs)} jobs, {cluster.gpus} {cluster.gpu_type} GPUs, {len(nodes)} x {of}"
    console = Console(width=WIDTH, soft_wrap=False)
    console.print(_figures_table(results, title))
    notes = [
        "wait: submission to start of the run that completed; JCT: submission to end;",
        "util %: busy GPU-s / (GPUs x makespan); run s: seconds the replay took.",
    ]
    if any(m.unfinished for _, m, _ in results):
        notes.append("N+M?: N completed, M never started (the policy would not start them).")
    aged = [p for p in ("default", "shortest", "sjf") if any(r.policy == p for r, _, _ in results)]
    if aged:
        policies = ", ".join(aged) if "sjf" in aged else "default, shortest"
        notes.append(f"aging {human_seconds(aging_s)} ({policies}); shortest: highest response ratio.")
    if any(r.policy == "sjf" for r, _, _ in results):
        notes.append("sjf: strict shortest GPU time first (no backfill within a priority).")
    for note in notes:
        console.print(note, highlight=False)
    dropped = _dropped_line(jobs, cluster)
    if dropped:
        console.print(dropped, highlight=False)
    tenants = _tenants_table(results)
    if tenants is not None:
        console.print()
        console.print("GPU share per tenant, % of busy GPU-s:", highlight=False)
        console.print(tenants)
