"""`colony queue`: the GPU queues as `squeue`/`kueuectl` show them.

Per GPUQueue: its usage against its quota per GPU type, then its requests: the pending ones in
queue order (position, priority, GPUs, estimated start, why they wait), then the admitted ones.
Requests charged to no queue are listed last. A pending request's reason is printed whole: on an
indented line under its row, or with `-o wide` in a WHY column; `-o yaml|json|jsonpath=` print the
same as data. `-w` keeps the view live, redrawn on every change the API server's watch reports
(GPRs and GPUQueues).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from colony.api import GPR, GPUQUEUE
from colony.cli.gprs import requested_gpus
from colony.cli.jsonpath import OutputChoice
from colony.cli.kube import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    AllNamespacesOption,
    CliError,
    ContextOption,
    KubeconfigOption,
    KubeTable,
    NamespaceOption,
    cli_errors,
    console,
    duration,
    output_option,
    parse_timestamp,
    print_data,
    print_table,
    resolve_namespace,
    run,
)

if TYPE_CHECKING:
    from colony.kube.resources import Kube

PENDING = ("Queued",)
ADMITTED = ("Admitted", "Provisioning", "Ready")
NO_QUEUE = "(no queue)"
REDRAW_DELAY_S = 0.1
"""Changes arriving together (one scheduler pass) are drawn once."""


def quota_usage(queue: Mapping[str, Any]) -> str:
    """`A100 12/16, H100 0/8 (+4 borrowed)`: GPUs used against nominal quota, per GPU type."""
    spec, status = queue.get("spec") or {}, queue.get("status") or {}
    used = {u.get("gpuType"): u for u in status.get("usage") or []}
    parts = []
    for quota in spec.get("quotas") or []:
        gpu_type = quota.get("gpuType")
        usage = used.pop(gpu_type, {})
        part = f"{gpu_type} {usage.get('used', 0)}/{quota.get('nominal', 0)}"
        if usage.get("borrowed"):
            part += f" (+{usage['borrowed']} borrowed)"
        parts.append(part)
    parts += [f"{t} {u.get('used', 0)}/0" for t, u in used.items()]
    return ", ".join(parts) or "no quota"


def start_estimate(status: Mapping[str, Any], now: datetime) -> str:
    """`in 3m`, `now` or "-" for a pending request's estimated start."""
    start = parse_timestamp(status.get("estimatedStartTime"))
    if start is None:
        return "-"
    wait = (start - now).total_seconds()
    return f"in {duration(wait)}" if wait > 0 else "now"


def _gpus(spec: Mapping[str, Any]) -> str:
    return requested_gpus(spec).replace(" x ", "x")


def _status(gpr: Mapping[str, Any]) -> Mapping[str, Any]:
    return gpr.get("status") or {}


QueueGroup = tuple[str, Mapping[str, Any] | None, list[Mapping[str, Any]], list[Mapping[str, Any]]]


def _groups(queues: Sequence[Mapping[str, Any]], gprs: Sequence[Mapping[str, Any]]) -> list[QueueGroup]:
    """(name, GPUQueue or None, pending in queue order, admitted by admission time) per queue, by
    name, then the requests charged to no queue."""
    by_queue: dict[str, list[Mapping[str, Any]]] = {}
    for gpr in gprs:
        if _status(gpr).get("phase") in (*PENDING, *ADMITTED):
            name = _status(gpr).get("queue") or (gpr.get("spec") or {}).get("queueName") or NO_QUEUE
            by_queue.setdefault(str(name), []).append(gpr)
    known = {str(q["metadata"]["name"]): q for q in queues}
    names = sorted(set(known) | (set(by_queue) - {NO_QUEUE})) + ([NO_QUEUE] if NO_QUEUE in by_queue else [])
    groups: list[QueueGroup] = []
    for name in names:
        members = by_queue.get(name, [])
        pending = sorted(
            (g for g in members if _status(g).get("phase") in PENDING),
            key=lambda g: (_status(g).get("positionInQueue") or 10**9, g["metadata"]["name"]),
        )
        admitted = sorted(
            (g for g in members if _status(g).get("phase") in ADMITTED),
            key=lambda g: (str(_status(g).get("admittedAt") or ""), g["metadata"]["name"]),
        )
        groups.append((name, known.get(name), pending, admitted))
    return groups


QUEUE_SHRINK_ORDER = ("colony", "namespace", "gpus", "name")
"""The columns that give way at 80 columns, first first (NAME last)."""
REASON_INDENT = 5
"""Where a pending request's reason line starts: under its NAME."""


class _Rows:
    """A queue's requests as a table; unless wide, each pending request's reason follows its row,
    whole (wrapped, never cut), on an indented line of its own, as squeue's REASON."""

    def __init__(self, table: Table, reasons: list[str | None]) -> None:
        self.table = table
        self.reasons = reasons

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = console.render_lines(self.table, options, pad=False)
        for index, line in enumerate(lines):
            yield from line
            yield Segment.line()
            reason = self.reasons[index - 1] if 0 < index <= len(self.reasons) else None
            if reason:
                why = Table.grid(padding=(0, 1))
                why.add_column(no_wrap=True)
                why.add_column(overflow="fold")
                why.add_row("why:", reason)
                yield from console.render(Padding(why, (0, 0, 0, REASON_INDENT), expand=False), options)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.table)


def _rows(
    pending: Sequence[Mapping[str, Any]],
    admitted: Sequence[Mapping[str, Any]],
    now: datetime,
    namespaces: bool,
    wide: bool,
) -> RenderableType:
    result = KubeTable(QUEUE_SHRINK_ORDER)
    headers = ["POS", "NAME", *(["NAMESPACE"] if namespaces else []), "PRIO", "GPUS", "STATE", "START"]
    headers += ["COLONY", *(["WHY"] if wide else [])]
    for header in headers:
        result.add_column(header, justify="right" if header in ("POS", "PRIO") else "left", no_wrap=True)
    result.natural = [len(header) for header in headers]
    reasons: list[str | None] = []
    for gpr in [*pending, *admitted]:
        spec, status = gpr.get("spec") or {}, _status(gpr)
        waiting = status.get("phase") in PENDING
        reason = (status.get("message") or "-") if waiting else "-"
        cells = [
            str(status.get("positionInQueue") or "-") if waiting else "-",
            gpr["metadata"]["name"],
            *([str(gpr["metadata"].get("namespace", ""))] if namespaces else []),
            str(spec.get("priority", 101)),
            _gpus(spec),
            str(status.get("phase")),
            start_estimate(status, now) if waiting else "running",
            "-" if waiting else (status.get("colony") or "-"),
            *([reason] if wide else []),
        ]
        result.add_cells(cells)
        reasons.append(reason if waiting and not wide else None)
    return result if wide else _Rows(result, reasons)


def queue_view(
    queues: Sequence[Mapping[str, Any]],
    gprs: Sequence[Mapping[str, Any]],
    *,
    namespaces: bool = False,
    wide: bool = False,
    now: datetime | None = None,
) -> RenderableType:
    """The whole view: one block per queue (header line with usage vs quota, then its requests).
    Pending requests' reasons are whole: on a line under each row, or with `wide` in a WHY column
    (the widest rows then need a wide terminal, as kubectl's -o wide)."""
    moment = now or datetime.now(UTC)
    blocks: list[RenderableType] = []
    for name, queue, pending, admitted in _groups(queues, gprs):
        header = Text(f"{name}", style="bold")
        if queue is not None:
            cohort = (queue.get("spec") or {}).get("cohort")
            header.append(f"  {quota_usage(queue)}")
            if cohort:
                header.append(f"  cohort {cohort}")
        header.append(f"  pending {len(pending)}, admitted {len(admitted)}")
        blocks.append(header)
        if pending or admitted:
            blocks.append(_rows(pending, admitted, moment, namespaces, wide))
        blocks.append(Text(""))
    if not blocks:
        return Text("no GPU queues and no pending or admitted requests")
    return Group(*blocks[:-1])


def _request(gpr: Mapping[str, Any]) -> dict[str, Any]:
    spec, status = gpr.get("spec") or {}, _status(gpr)
    return {
        "name": gpr["metadata"]["name"],
        "namespace": gpr["metadata"].get("namespace"),
        "phase": status.get("phase"),
        "position": status.get("positionInQueue"),
        "priority": spec.get("priority", 101),
        "gpus": requested_gpus(spec),
        "estimatedStartTime": status.get("estimatedStartTime"),
        "message": status.get("message"),
        "colony": status.get("colony"),
        "admittedAt": status.get("admittedAt"),
    }


def queue_data(queues: Sequence[Mapping[str, Any]], gprs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What `-o json|yaml|jsonpath=` print: `{"queues": [...]}`, per queue (name null: the requests
    charged to no queue) its cohort, quotas and usage, then its pending and admitted requests
    (reasons whole, in `message`)."""
    return {
        "queues": [
            {
                "name": None if name == NO_QUEUE else name,
                "cohort": ((queue or {}).get("spec") or {}).get("cohort"),
                "quotas": ((queue or {}).get("spec") or {}).get("quotas") or [],
                "usage": ((queue or {}).get("status") or {}).get("usage") or [],
                "pending": [_request(g) for g in pending],
                "admitted": [_request(g) for g in admitted],
            }
            for name, queue, pending, admitted in _groups(queues, gprs)
        ]
    }


async def _read(kube: Kube, namespace: str | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from colony.cli.watching import list_objects

    (queues, _), (gprs, _) = await asyncio.gather(
        list_objects(kube, GPUQUEUE, None), list_objects(kube, GPR, namespace)
    )
    return queues, gprs


def _visible(
    queues: list[dict[str, Any]], gprs: list[dict[str, Any]], namespace: str | None
) -> list[dict[str, Any]]:
    """With one namespace, only the queues that serve it or hold its requests."""
    if namespace is None:
        return queues
    used = {(g.get("status") or {}).get("queue") for g in gprs}
    return [
        q
        for q in queues
        if q["metadata"]["name"] in used or namespace in ((q.get("spec") or {}).get("namespaces") or [])
    ]


async def _watch(kube: Kube, namespace: str | None, draw: Any) -> None:
    from colony.cli.watching import list_objects, watch_events

    caches: dict[str, dict[str, dict[str, Any]]] = {"q": {}, "g": {}}
    changed = asyncio.Event()

    async def follow(key: str, resource: Any, ns: str | None) -> None:
        objects, version = await list_objects(kube, resource, ns)
        caches[key] = {o["metadata"]["uid"]: o for o in objects}
        changed.set()
        async for event in watch_events(kube, resource, ns, version):
            uid = event.object["metadata"]["uid"]
            if event.type == "DELETED":
                caches[key].pop(uid, None)
            else:
                caches[key][uid] = event.object
            changed.set()

    tasks = [
        asyncio.create_task(follow("q", GPUQUEUE, None)),
        asyncio.create_task(follow("g", GPR, namespace)),
    ]
    try:
        while True:
            waiter = asyncio.create_task(changed.wait())
            done, _ = await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
            for task in tasks:
                if task in done:
                    task.result()  # a failed watch ends the view with its error
            await asyncio.sleep(REDRAW_DELAY_S)
            changed.clear()
            gprs = list(caches["g"].values())
            draw(_visible(list(caches["q"].values()), gprs, namespace), gprs)
    finally:
        for task in tasks:
            task.cancel()


class QueueFormat(OutputChoice, StrEnum):
    """How `colony queue` prints (or `-o jsonpath=TEMPLATE` on what `-o json` prints)."""

    table = "table"
    wide = "wide"
    yaml = "yaml"
    json = "json"


@cli_errors
def queue(
    namespace: NamespaceOption = None,
    all_namespaces: AllNamespacesOption = False,
    output: Annotated[
        OutputChoice,
        output_option(QueueFormat, "table, wide (reasons in a column), yaml, json or jsonpath=TEMPLATE."),
    ] = QueueFormat.table,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Keep the view live (Ctrl-C stops).")] = False,
    context: ContextOption = None,
    kubeconfig: KubeconfigOption = None,
) -> None:
    """GPU queues: usage vs quota, pending and admitted requests.

    Pending requests come in queue order with their position, priority, GPUs, estimated start and
    why they wait (on a line under the row; -o wide: in a column); admitted ones with the colony
    they run on.
    """
    if all_namespaces and namespace:
        raise CliError("-A and -n exclude each other: drop one of them", EXIT_USAGE)
    ns = None if all_namespaces else resolve_namespace(namespace)
    wide = output is QueueFormat.wide
    tabular = output in (QueueFormat.table, QueueFormat.wide)
    out = console()

    def view(queues: list[dict[str, Any]], gprs: list[dict[str, Any]]) -> RenderableType:
        return queue_view(queues, gprs, namespaces=ns is None, wide=wide)

    def show(queues: list[dict[str, Any]], gprs: list[dict[str, Any]]) -> None:
        if tabular:
            print_table(view(queues, gprs), wide=wide, out=out)
        else:
            if watch and output is QueueFormat.yaml:
                typer.echo("---")
            print_data(queue_data(queues, gprs), output)

    if not watch:
        queues, gprs = run(lambda kube: _read(kube, ns))
        show(_visible(queues, gprs, ns), gprs)
        return

    def draw_lines(queues: list[dict[str, Any]], gprs: list[dict[str, Any]]) -> None:
        if tabular:
            out.print(Text(f"-- {datetime.now(UTC):%H:%M:%S} UTC", style="dim"))
        show(queues, gprs)
        sys.stdout.flush()

    try:
        if out.is_terminal and output is QueueFormat.table:  # wide: whole lines, redrawn below
            from rich.live import Live

            with Live(console=out, auto_refresh=False) as live:

                def draw_live(queues: list[dict[str, Any]], gprs: list[dict[str, Any]]) -> None:
                    live.update(view(queues, gprs), refresh=True)

                run(lambda kube: _watch(kube, ns, draw_live))
        else:
            run(lambda kube: _watch(kube, ns, draw_lines))
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED) from None
