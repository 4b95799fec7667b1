"""`colonies create --wait` and `colonies delete --wait`: each cluster's phase and node/GPU counts,
live, from the API server's watch of the Colonies (nothing polls).

A colony is done when Ready; it has failed when it or one of its clusters is Failed (Cluster API
gave up: the colony itself shows Degraded then, its other clusters keep working). An Unreachable
cluster may come back, so it is waited for until the timeout.

On a terminal (and without NO_COLOR) a rich live table is redrawn in place; otherwise one plain line
is printed per change. Exit 0 when every colony is Ready (create) or gone (delete); exit 1 with the
reason when one Failed, or when the timeout passes first.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Group
from rich.table import Table
from rich.text import Text

from colony.api import COLONY
from colony.cli.kube import EXIT_INTERRUPTED, EXIT_USAGE, CliError, console, duration, run

if TYPE_CHECKING:
    from rich.live import Live

    from colony.kube.resources import Kube

WaitOption = Annotated[
    bool, typer.Option("--wait", help="Follow until done, showing each cluster's progress.")
]
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s?)?$")


def checked_duration(value: str) -> str:
    """The `--timeout` callback: `value` unchanged when it is a duration, else BadParameter (a
    one-line usage error, exit 2) while options are parsed, before the command creates or deletes
    anything."""
    try:
        parse_duration(value)
    except CliError as error:
        raise typer.BadParameter(str(error).removeprefix("--timeout ")) from None
    return value


TimeoutOption = Annotated[
    str,
    typer.Option(
        "--timeout",
        metavar="DURATION",
        callback=checked_duration,
        help="Most time --wait waits, e.g. 90s, 30m, 1h.",
    ),
]


def parse_duration(value: str) -> float:
    """Seconds of `90s`, `30m`, `1h30m` or a plain number of seconds; CliError (usage) otherwise."""
    match = _DURATION.match(value.strip())
    if not value.strip() or match is None:
        raise CliError(f"--timeout {value}: use a duration such as 90s, 30m or 1h", EXIT_USAGE)
    hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return float(hours * 3600 + minutes * 60 + seconds)


def cluster_gpus(cluster: Mapping[str, Any]) -> int:
    """GPUs a cluster of the colony's status reports (capacity, all products)."""
    return sum(int(g.get("capacity") or 0) for g in cluster.get("gpus") or [])


@dataclass(frozen=True)
class ClusterLine:
    """One cluster's progress (or the colony's own line, `cluster` empty)."""

    colony: str
    cluster: str
    phase: str
    nodes: str
    gpus: int
    message: str

    def text(self) -> str:
        """`my-colony/docker-1  Provisioning  nodes 0/2  gpus 0  message`."""
        where = f"{self.colony}/{self.cluster}" if self.cluster else self.colony
        tail = f"  {self.message}" if self.message else ""
        return f"{where}  {self.phase}  nodes {self.nodes}  gpus {self.gpus}{tail}"


def progress_lines(name: str, colony: Mapping[str, Any] | None, gone: bool) -> list[ClusterLine]:
    """The colony's line and one line per cluster of its status (a deleted colony: one line)."""
    if colony is None:
        return [ClusterLine(name, "", "gone" if gone else "not found", "-", 0, "")]
    status = colony.get("status") or {}
    clusters = status.get("clusters") or []
    ready = sum(int(c.get("readyNodes") or 0) for c in clusters)
    total = sum(int(c.get("totalNodes") or 0) for c in clusters)
    lines = [
        ClusterLine(
            name,
            "",
            str(status.get("phase") or "Pending"),
            f"{ready}/{total}",
            sum(cluster_gpus(c) for c in clusters),
            "",
        )
    ]
    for cluster in clusters:
        lines.append(
            ClusterLine(
                name,
                str(cluster.get("name", "?")),
                str(cluster.get("phase") or "Pending"),
                f"{cluster.get('readyNodes') or 0}/{cluster.get('totalNodes') or 0}",
                cluster_gpus(cluster),
                " ".join(str(cluster.get("message") or "").split())[:120],
            )
        )
    return lines


def failure_reason(colony: Mapping[str, Any]) -> str:
    """Why a colony Failed: its message, a failed cluster's message, or a False condition's."""
    status = colony.get("status") or {}
    reasons = [
        f"{c.get('name')}: {c.get('message')}"
        for c in status.get("clusters") or []
        if c.get("phase") == "Failed" and c.get("message")
    ]
    if status.get("message"):
        reasons.insert(0, str(status["message"]))
    if not reasons:
        reasons = [
            f"{c.get('type')}: {c.get('message') or c.get('reason')}"
            for c in status.get("conditions") or []
            if c.get("status") == "False"
        ]
    return "; ".join(reasons) or "no reason given"


def outcome(
    names: Sequence[str], colonies: Mapping[str, Mapping[str, Any] | None], gone: bool
) -> tuple[bool, str] | None:
    """(succeeded, message) once the wait is over, else None."""
    if gone:
        if all(colonies.get(n) is None for n in names):
            return True, f"{', '.join(names)} deleted"
        return None
    for name in names:
        status = (colonies.get(name) or {}).get("status") or {}
        failed = [c for c in status.get("clusters") or [] if c.get("phase") == "Failed"]
        if status.get("phase") == "Failed" or failed:
            return False, f"colony {name} Failed: {failure_reason(colonies.get(name) or {})}"
    if all((colonies.get(n) or {}).get("status", {}).get("phase") == "Ready" for n in names):
        total = sum(
            cluster_gpus(c)
            for n in names
            for c in ((colonies.get(n) or {}).get("status") or {}).get("clusters") or []
        )
        return True, f"{', '.join(names)} Ready ({total} GPUs)"
    return None


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"


class Display:
    """Plain lines per change, or a live table on a terminal."""

    def __init__(self, live: Live | None) -> None:
        self.live = live
        self.started = time.monotonic()
        self.last: dict[tuple[str, str], ClusterLine] = {}

    def update(self, lines: list[ClusterLine]) -> None:
        """Show the colonies' current lines: new or changed ones are printed (plain mode)."""
        seconds = time.monotonic() - self.started
        if self.live is not None:
            view = Table(box=None, pad_edge=False, header_style="bold")
            for column in ("COLONY", "CLUSTER", "PHASE", "NODES", "GPUS", "MESSAGE"):
                view.add_column(column, no_wrap=True, overflow="ellipsis")
            for line in lines:
                view.add_row(
                    line.colony, line.cluster or "-", line.phase, line.nodes, str(line.gpus), line.message
                )
            footer = Text(f"elapsed {_elapsed(seconds)} - Ctrl-C stops waiting", style="dim")
            self.live.update(Group(view, footer), refresh=True)
            return
        for line in lines:
            key = (line.colony, line.cluster)
            if self.last.get(key) != line:
                self.last[key] = line
                typer.echo(f"[{_elapsed(seconds):>5}] {line.text()}")
        sys.stdout.flush()


async def _follow(
    kube: Kube, namespace: str, names: Sequence[str], gone: bool, display: Display
) -> tuple[bool, str]:
    from colony.cli.watching import list_objects, watch_events

    objects, version = await list_objects(kube, COLONY, namespace)
    colonies: dict[str, dict[str, Any] | None] = {n: None for n in names}
    colonies.update({o["metadata"]["name"]: o for o in objects if o["metadata"]["name"] in names})

    def show() -> tuple[bool, str] | None:
        display.update([line for n in names for line in progress_lines(n, colonies[n], gone)])
        return outcome(names, colonies, gone)

    result = show()
    if result is not None:
        return result
    async for event in watch_events(kube, COLONY, namespace, version):
        name = event.object["metadata"]["name"]
        if name not in colonies:
            continue
        colonies[name] = None if event.type == "DELETED" else event.object
        result = show()
        if result is not None:
            return result
    raise AssertionError("unreachable: the watch never ends")


def plain_output() -> bool:
    """Plain lines instead of a live view: not a terminal, or NO_COLOR set (any value)."""
    return "NO_COLOR" in os.environ or not console().is_terminal


def wait_for_colonies(colonies: Sequence[Mapping[str, Any]], timeout: str, *, gone: bool) -> None:
    """Follow the colonies until Ready (or gone), printing progress; exit 1 on Failed or timeout."""
    seconds = parse_duration(timeout)
    namespaces = {str(c["metadata"]["namespace"]) for c in colonies}
    if len(namespaces) > 1:
        raise CliError("--wait follows colonies of one namespace at a time", EXIT_USAGE)
    namespace = namespaces.pop()
    names = [str(c["metadata"]["name"]) for c in colonies]

    async def follow(kube: Kube, display: Display) -> tuple[bool, str]:
        try:
            return await asyncio.wait_for(_follow(kube, namespace, names, gone, display), seconds)
        except TimeoutError:
            current = [(n, await _current(kube, namespace, n)) for n in names]
            state = "; ".join(progress_lines(n, c, gone)[0].text() for n, c in current)
            goal = "gone" if gone else "Ready"
            return False, f"timed out after {duration(seconds)} before {goal}: {state}"

    try:
        if plain_output():
            succeeded, message = run(lambda kube: follow(kube, Display(None)))
        else:
            from rich.live import Live

            with Live(console=console(), auto_refresh=False, transient=False) as live:
                succeeded, message = run(lambda kube: follow(kube, Display(live)))
    except KeyboardInterrupt:
        typer.echo("\nstopped waiting; the operator carries on", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    if not succeeded:
        raise CliError(message)
    typer.echo(message)


async def _current(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    return await kube.get(COLONY.api_version, COLONY.kind, name, namespace)
