"""`colony queue`: the GPU queues as `squeue`/`kueuectl` show them.

Per GPUQueue: its usage against its quota per GPU type, then its requests: the pending ones in
queue order (position, priority, GPUs, estimated start, why they wait), then the admitted ones.
Requests charged to no queue are listed last. `-w` keeps the view live, redrawn on every change
the API server's watch reports (GPRs and GPUQueues).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from colony.api import GPR, GPUQUEUE
from colony.cli.gprs import requested_gpus
from colony.cli.kube import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    AllNamespacesOption,
    CliError,
    ContextOption,
    KubeconfigOption,
    NamespaceOption,
    cell,
    cli_errors,
    console,
    duration,
    parse_timestamp,
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


def _rows(gprs: Sequence[Mapping[str, Any]], now: datetime, namespaces: bool) -> Table:
    result = Table(box=None, pad_edge=False, show_edge=False, header_style="bold", padding=(0, 1))
    result.add_column("POS", justify="right", no_wrap=True)
    result.add_column("NAME", overflow="ellipsis", max_width=24)
    if namespaces:
        result.add_column("NAMESPACE", no_wrap=True, max_width=16)
    result.add_column("PRIO", justify="right", no_wrap=True)
    result.add_column("GPUS", overflow="ellipsis", max_width=16)
    result.add_column("STATE", no_wrap=True)
    result.add_column("START", no_wrap=True)
    result.add_column("WHY", overflow="ellipsis")
    pending = sorted(
        (g for g in gprs if (g.get("status") or {}).get("phase") in PENDING),
        key=lambda g: ((g.get("status") or {}).get("positionInQueue") or 10**9, g["metadata"]["name"]),
    )
    admitted = sorted(
        (g for g in gprs if (g.get("status") or {}).get("phase") in ADMITTED),
        key=lambda g: (str((g.get("status") or {}).get("admittedAt") or ""), g["metadata"]["name"]),
    )
    for gpr in [*pending, *admitted]:
        spec, status = gpr.get("spec") or {}, gpr.get("status") or {}
        waiting = status.get("phase") in PENDING
        cells = [
            str(status.get("positionInQueue") or "-") if waiting else "-",
            gpr["metadata"]["name"],
            *([str(gpr["metadata"].get("namespace", ""))] if namespaces else []),
            str(spec.get("priority", 101)),
            _gpus(spec),
            str(status.get("phase")),
            start_estimate(status, now) if waiting else "running",
            (status.get("message") or "-") if waiting else (status.get("colony") or "-"),
        ]
        result.add_row(*(cell(c) for c in cells))
    return result


def queue_view(
    queues: Sequence[Mapping[str, Any]],
    gprs: Sequence[Mapping[str, Any]],
    *,
    namespaces: bool = False,
    now: datetime | None = None,
) -> RenderableType:
    """The whole view: one block per queue (header line with usage vs quota, then its requests)."""
    moment = now or datetime.now(UTC)
    by_queue: dict[str, list[Mapping[str, Any]]] = {}
    for gpr in gprs:
        phase = (gpr.get("status") or {}).get("phase")
        if phase in PENDING or phase in ADMITTED:
            name = (
                (gpr.get("status") or {}).get("queue") or (gpr.get("spec") or {}).get("queueName") or NO_QUEUE
            )
            by_queue.setdefault(str(name), []).append(gpr)
    blocks: list[RenderableType] = []
    known = {str(q["metadata"]["name"]): q for q in queues}
    names = sorted(set(known) | (set(by_queue) - {NO_QUEUE})) + ([NO_QUEUE] if NO_QUEUE in by_queue else [])
    for name in names:
        members = by_queue.get(name, [])
        pending = sum(1 for g in members if (g.get("status") or {}).get("phase") in PENDING)
        header = Text(f"{name}", style="bold")
        queue = known.get(name)
        if queue is not None:
            cohort = (queue.get("spec") or {}).get("cohort")
            header.append(f"  {quota_usage(queue)}")
            if cohort:
                header.append(f"  cohort {cohort}")
        header.append(f"  pending {pending}, admitted {len(members) - pending}")
        blocks.append(header)
        if members:
            blocks.append(_rows(members, moment, namespaces))
        blocks.append(Text(""))
    if not blocks:
        return Text("no GPU queues and no pending or admitted requests")
    return Group(*blocks[:-1])


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


@cli_errors
def queue(
    namespace: NamespaceOption = None,
    all_namespaces: AllNamespacesOption = False,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Keep the view live (Ctrl-C stops).")] = False,
    context: ContextOption = None,
    kubeconfig: KubeconfigOption = None,
) -> None:
    """GPU queues: usage vs quota, pending and admitted requests.

    Pending requests come in queue order with their position, priority, GPUs, estimated start and
    why they wait; admitted ones with the colony they run on.
    """
    if all_namespaces and namespace:
        raise CliError("-A and -n exclude each other: drop one of them", EXIT_USAGE)
    ns = None if all_namespaces else resolve_namespace(namespace)
    out = console()
    if not watch:
        queues, gprs = run(lambda kube: _read(kube, ns))
        out.print(queue_view(_visible(queues, gprs, ns), gprs, namespaces=ns is None))
        return

    def draw_lines(queues: list[dict[str, Any]], gprs: list[dict[str, Any]]) -> None:
        out.print(Text(f"-- {datetime.now(UTC):%H:%M:%S} UTC", style="dim"))
        out.print(queue_view(queues, gprs, namespaces=ns is None))
        sys.stdout.flush()

    try:
        if out.is_terminal:
            from rich.live import Live

            with Live(console=out, auto_refresh=False) as live:

                def draw_live(queues: list[dict[str, Any]], gprs: list[dict[str, Any]]) -> None:
                    live.update(queue_view(queues, gprs, namespaces=ns is None), refresh=True)

                run(lambda kube: _watch(kube, ns, draw_live))
        else:
            run(lambda kube: _watch(kube, ns, draw_lines))
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED) from None
