"""`colony simulate`: replay a job trace through the scheduler under several queue orders."""

from __future__ import annotations

import json
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from colony.scheduling.queueing.model import QueueOrder
from colony.simulate.cluster import SimCluster
from colony.simulate.metrics import Metrics, compute_metrics
from colony.simulate.trace import TraceError, TraceJob, load_trace

PIPED_WIDTH = 160
"""Table width when stdout is not a terminal."""
MAX_TENANT_COLUMNS = 8
"""More tenants than this: shares only in `-o json`."""


class Policy(StrEnum):
    """Queue orders of the scheduler core (see colony.scheduling.queueing.model.QueueOrder)."""

    fifo = "fifo"
    priority = "priority"
    default = "default"


_ORDERS: dict[Policy, QueueOrder] = {
    Policy.fifo: "fifo",
    Policy.priority: "priority",
    Policy.default: "default",
}


class OutputFormat(StrEnum):
    """How `colony simulate` prints its figures."""

    table = "table"
    json = "json"


def run_policies(
    jobs: tuple[TraceJob, ...], cluster: SimCluster, policies: list[Policy]
) -> list[tuple[Metrics, float]]:
    """Replay `jobs` once per policy with the real scheduler: (figures, seconds the replay took)."""
    from colony.simulate.replay import replay

    results = []
    for policy in policies:
        started = time.perf_counter()
        result = replay(jobs, cluster, _ORDERS[policy])
        results.append((compute_metrics(result), time.perf_counter() - started))
    return results


def human_seconds(seconds: float) -> str:
    """A duration for people: 95 s, 12.5 min, 5.1 h, 3.2 d."""
    if seconds < 120:
        return f"{seconds:,.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:,.1f} min"
    if seconds < 172800:
        return f"{seconds / 3600:,.1f} h"
    return f"{seconds / 86400:,.1f} d"


def _table(results: list[tuple[Metrics, float]], title: str, caption: str) -> Table:
    tenants = sorted({t for metrics, _ in results for t in metrics.tenant_shares})
    per_tenant = len(tenants) <= MAX_TENANT_COLUMNS
    table = Table(title=title, caption=caption)
    table.add_column("policy", no_wrap=True)
    names = ["jobs", "dropped", "avg wait", "p95 wait", "avg JCT", "makespan", "util", "preempt"]
    for name in [*names, *(t for t in tenants if per_tenant), "runtime"]:
        table.add_column(name, justify="right", no_wrap=True)
    for m, runtime in results:
        jobs = f"{m.jobs}" + (f" (+{m.unfinished} stuck)" if m.unfinished else "")
        table.add_row(
            m.policy,
            jobs,
            str(m.dropped),
            human_seconds(m.avg_wait_s),
            human_seconds(m.p95_wait_s),
            human_seconds(m.avg_jct_s),
            human_seconds(m.makespan_s),
            f"{m.utilization:.1%}",
            str(m.preemptions),
            *(f"{m.tenant_shares.get(t, 0.0):.1%}" for t in tenants if per_tenant),
            f"{runtime:.2f} s",
        )
    return table


def simulate(
    trace: Annotated[
        Path,
        typer.Argument(
            exists=True, dir_okay=False, help="Job trace CSV: job_id,tenant,submit_time_s,gpus,..."
        ),
    ],
    gpus: Annotated[int, typer.Option("--gpus", min=1, help="GPUs of the simulated cluster.")],
    gpus_per_node: Annotated[int, typer.Option(min=1, help="GPUs per node of the simulated cluster.")] = 8,
    policy: Annotated[
        list[Policy] | None,
        typer.Option("--policy", help="Queue order to replay (repeatable); default: all three."),
    ] = None,
    limit_jobs: Annotated[
        int | None, typer.Option(min=1, help="Replay only the first K jobs (by submission).")
    ] = None,
    output: Annotated[
        OutputFormat, typer.Option("--output", "-o", help="Output format: table or json.")
    ] = OutputFormat.table,
) -> None:
    """Replay a GPU job trace through the scheduler with simulated time; compare queue orders."""
    try:
        jobs = load_trace(trace, limit=limit_jobs)
    except TraceError as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(1) from None
    cluster = SimCluster.for_trace(jobs, gpus=gpus, gpus_per_node=gpus_per_node)
    policies = list(dict.fromkeys(policy or list(Policy)))
    results = run_policies(jobs, cluster, policies)
    if output is OutputFormat.json:
        rows = [{**m.to_dict(), "runtime_s": runtime} for m, runtime in results]
        typer.echo(json.dumps(rows, indent=2))
        return
    nodes = cluster.node_capacities
    of = f"{gpus_per_node}" if nodes[-1] == gpus_per_node else f"up to {gpus_per_node}"
    tenants = {job.tenant for job in jobs}
    title = f"{trace.name}: {len(jobs)} jobs on {gpus} {cluster.gpu_type} GPUs ({len(nodes)} node(s) of {of})"
    caption = (
        "wait = start of the completing run - submission; JCT = completion - submission; "
        "util = busy GPU-s / (GPUs x makespan); preempted jobs restart from scratch"
        + ("; per tenant: share of busy GPU-s." if len(tenants) <= MAX_TENANT_COLUMNS else ".")
    )
    console = Console()
    if not console.is_terminal:
        console = Console(width=PIPED_WIDTH)
    console.print(_table(results, title, caption))
