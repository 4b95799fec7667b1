"""`colony gpr`: list and inspect GPU Provisioning Requests (queue position, wait, placement, cost)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from colony.api import GPR
from colony.cli.kube import (
    AllNamespacesOption,
    ContextOption,
    KubeconfigOption,
    NamespaceOption,
    OutputFormat,
    OutputOption,
    WatchOption,
    age,
    cli_errors,
    conditions_rows,
    duration,
    money,
    not_found,
    number,
    parse_timestamp,
    print_details,
    print_namespace_list,
    print_objects,
    resolve_namespace,
    run,
    table,
    text,
    watch_forever,
)

if TYPE_CHECKING:
    from colony.kube.resources import Kube

app = typer.Typer(
    help="Inspect GPU Provisioning Requests (GPRs).", no_args_is_help=True, rich_markup_mode=None
)


def requested_gpus(spec: Mapping[str, Any]) -> str:
    """`2 x 8 H100|A100-80GB`: nodes x GPUs per node, and the acceptable types."""
    shapes = [spec["gpuShape"]] if spec.get("gpuShape") else list(spec.get("gpuShapes") or [])
    nodes, per_node = spec.get("numberOfGPUNodes", 1), spec.get("numberOfGPUs", "?")
    return f"{nodes} x {per_node} {'|'.join(shapes) or '?'}"


def estimated_start(status: Mapping[str, Any], now: datetime | None = None) -> str:
    """`in 3m (12:04 UTC)` for a queued request, "-" when there is no estimate."""
    start = parse_timestamp(status.get("estimatedStartTime"))
    if status.get("phase") not in (None, "Queued", "Admitted", "Provisioning") or start is None:
        return "-"
    wait = (start - (now or datetime.now(UTC))).total_seconds()
    return f"in {duration(wait)} ({start:%H:%M} UTC)" if wait > 0 else f"now ({start:%H:%M} UTC)"


def gprs_table(gprs: Sequence[Mapping[str, Any]], now: datetime | None = None) -> Table:
    """NAME PHASE QUEUE POSITION EST. START COLONY GPUS ALLOCATED COST AGE."""
    rows = []
    for gpr in gprs:
        spec, status = gpr.get("spec") or {}, gpr.get("status") or {}
        allocated = status.get("gpusAllocated")
        rows.append(
            (
                gpr["metadata"]["name"],
                text(status.get("phase")),
                text(status.get("queue")),
                text(status.get("positionInQueue")),
                estimated_start(status, now),
                text(status.get("colony")),
                requested_gpus(spec),
                f"{allocated} {status.get('gpuType') or ''}".strip() if allocated else "-",
                money(status.get("cost")),
                age(gpr["metadata"].get("creationTimestamp"), now),
            )
        )
    columns = (
        "name",
        "phase",
        "queue",
        "position",
        "est. start",
        "colony",
        "gpus",
        "allocated",
        "cost",
        "age",
    )
    return table(columns, rows, gprs, wide_only=("est. start", "colony", "allocated", "cost"))


def gpr_details(gpr: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The `colony gpr get` lines of one request."""
    meta, spec, status = gpr["metadata"], gpr.get("spec") or {}, gpr.get("status") or {}
    nodes = ", ".join(
        f"{n.get('cluster')}/{n.get('node')}: {n.get('gpus')}" for n in status.get("nodes") or []
    )
    wait = status.get("estimatedWaitSeconds")
    return [
        ("Name", meta["name"]),
        ("Namespace", meta.get("namespace", "")),
        ("Phase", text(status.get("phase"))),
        ("Message", text(status.get("message"))),
        ("Requested", f"{requested_gpus(spec)}, priority {spec.get('priority', 101)}"),
        ("Queue", text(status.get("queue") or spec.get("queueName"))),
        ("Position", text(status.get("positionInQueue"))),
        ("Estimated wait", duration(wait) if wait is not None else "-"),
        ("Estimated start", estimated_start(status)),
        ("Colony", text(status.get("colony"))),
        ("Provisioned colony", text(status.get("provisionedColony"))),
        (
            "GPUs allocated",
            f"{status['gpusAllocated']} {status.get('gpuType') or ''}".strip()
            if status.get("gpusAllocated")
            else "-",
        ),
        ("Nodes", nodes),
        ("Reservation label", text(status.get("reservationLabel"))),
        ("Evicted by", text(status.get("evictedBy"))),
        ("Retries", text(status.get("retryCount"))),
        ("GPU-hours", number(status.get("gpuHours"))),
        ("Cost", money(status.get("cost"))),
        ("Age", age(meta.get("creationTimestamp"))),
    ]


@app.command("list")
@cli_errors
def list_gprs(
    namespace: NamespaceOption = None,
    all_namespaces: AllNamespacesOption = False,
    output: OutputOption = OutputFormat.table,
    watch: WatchOption = False,
    context: ContextOption = None,
    kubeconfig: KubeconfigOption = None,
) -> None:
    """List the GPU Provisioning Requests of a namespace (-A: of all namespaces)."""
    print_namespace_list(
        GPR,
        namespace,
        output,
        gprs_table,
        "GPUProvisioningRequests",
        all_namespaces=all_namespaces,
        watch=watch,
    )


@app.command("get")
@cli_errors
def get(
    name: str,
    namespace: NamespaceOption = None,
    output: OutputOption = OutputFormat.table,
    watch: WatchOption = False,
    context: ContextOption = None,
    kubeconfig: KubeconfigOption = None,
) -> None:
    """Show one GPU Provisioning Request: phase, queue position and wait, placement and cost.

    With -w: its row (or object) again on every change.
    """
    ns = resolve_namespace(namespace)
    if watch:
        watch_forever(
            GPR,
            ns,
            output,
            gprs_table,
            field_selector=f"metadata.name={name}",
            single=True,
            empty=str(not_found("GPUProvisioningRequest", name, ns, "gpr list")),
        )
        return

    async def read(kube: Kube) -> dict[str, Any]:
        gpr = await kube.get(GPR.api_version, GPR.kind, name, ns)
        if gpr is None:
            raise not_found("GPUProvisioningRequest", name, ns, "gpr list")
        return gpr

    gpr = run(read)
    if output not in (OutputFormat.table, OutputFormat.wide):
        print_objects([gpr], output, gprs_table, single=True)
        return
    print_details(gpr_details(gpr))
    conditions = list(conditions_rows((gpr.get("status") or {}).get("conditions") or []))
    if conditions:
        typer.echo("Conditions:")
        for line in conditions:
            typer.echo(f"  {line}")
