"""`colony colonies`: list, inspect, create and delete Colonies, and print a colony cluster's kubeconfig."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError
from rich.table import Table

from colony.api import COLONY
from colony.cli.kube import (
    EXIT_USAGE,
    AllNamespacesOption,
    CliError,
    ContextOption,
    KubeconfigOption,
    NamespaceOption,
    OutputFormat,
    OutputOption,
    WatchOption,
    age,
    cli_errors,
    conditions_rows,
    console,
    create_objects,
    load_documents,
    money,
    not_found,
    print_details,
    print_namespace_list,
    print_objects,
    resolve_namespace,
    run,
    table,
    text,
    watch_forever,
    with_namespace,
)
from colony.cli.waiting import TimeoutOption, WaitOption, wait_for_colonies
from colony.render.contract import RenderedCluster
from colony.render.resources import render_colony_resource

if TYPE_CHECKING:
    from colony.kube.resources import Kube

app = typer.Typer(
    help="Create, inspect and delete Colonies (GPU clusters).", no_args_is_help=True, rich_markup_mode=None
)


def gpus(cluster: Mapping[str, Any]) -> str:
    """`8 x A100, 8 x H100` from a cluster's status.gpus (capacity by product)."""
    return ", ".join(f"{g.get('capacity', 0)} x {g.get('product')}" for g in cluster.get("gpus") or []) or "-"


def colonies_table(colonies: Sequence[Mapping[str, Any]]) -> Table:
    """NAME PHASE READY GPUS $/H COST K8S AGE (READY: ready/total clusters)."""
    rows = []
    for colony in colonies:
        spec, status = colony.get("spec") or {}, colony.get("status") or {}
        total = status.get("totalClusters") or len(spec.get("colonyClusters") or [])
        rows.append(
            (
                colony["metadata"]["name"],
                text(status.get("phase")),
                f"{status.get('readyClusters') or 0}/{total}",
                text(status.get("gpus")),
                money(status.get("pricePerHour")),
                money(status.get("costAccrued")),
                text(spec.get("k8sVersion")),
                age(colony["metadata"].get("creationTimestamp")),
            )
        )
    return table(
        ("name", "phase", "ready", "gpus", "$/h", "cost", "k8s", "age"),
        rows,
        colonies,
        wide_only=("cost", "k8s"),
    )


def clusters_table(colony: Mapping[str, Any]) -> Table:
    """One row per cluster of the colony's status: phase, provider, nodes, GPUs, endpoint, message."""
    rows = [
        (
            c.get("name", "?"),
            text(c.get("provider")),
            text(c.get("phase")),
            f"{c.get('readyNodes', 0)}/{c.get('totalNodes', 0)}",
            gpus(c),
            money(c.get("pricePerHour")),
            text(c.get("controlPlaneEndpoint")),
            text(c.get("message")),
        )
        for c in (colony.get("status") or {}).get("clusters") or []
    ]
    return table(
        ("cluster", "provider", "phase", "nodes", "gpus", "$/h", "endpoint", "message"),
        rows,
        wide_only=("endpoint",),
    )


def colony_details(colony: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The `colony colonies get` lines of one colony."""
    meta, spec, status = colony["metadata"], colony.get("spec") or {}, colony.get("status") or {}
    addons = [
        f"{a.get('name')} ({'ready' if a.get('ready') else 'not ready: ' + str(a.get('message', ''))})"
        for a in status.get("addons") or []
    ]
    return [
        ("Name", meta["name"]),
        ("Namespace", meta.get("namespace", "")),
        ("Phase", text(status.get("phase"))),
        ("Kubernetes", text(spec.get("k8sVersion"))),
        ("Clusters", f"{status.get('readyClusters') or 0}/{len(spec.get('colonyClusters') or [])} ready"),
        ("GPUs", text(status.get("gpus"))),
        ("Add-ons", ", ".join(addons)),
        ("Price", f"{money(status.get('pricePerHour'))}/h" if status.get("pricePerHour") is not None else ""),
        ("Cost so far", money(status.get("costAccrued"))),
        ("Age", age(meta.get("creationTimestamp"))),
    ]


async def get_colony(kube: Kube, name: str, namespace: str) -> dict[str, Any]:
    """The Colony, or a not-found CliError naming the list command."""
    colony = await kube.get(COLONY.api_version, COLONY.kind, name, namespace)
    if colony is None:
        raise not_found("Colony", name, namespace, "colonies list")
    return colony


@app.command("list")
@cli_errors
def list_colonies(
    namespace: NamespaceOption = None,
    all_namespaces: AllNamespacesOption = False,
    output: OutputOption = OutputFormat.table,
    watch: WatchOption = False,
    context: ContextOption = None,
    kubeconfig: KubeconfigOption = None,
) -> None:
    """List the Colonies of a namespace (-A: of all namespaces)."""
    print_namespace_list(
        COLONY,
        namespace,
        output,
        colonies_table,
        "Colonies",
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
    """Show one Colony: phase, clusters with their GPUs, add-ons, cost and conditions.

    With -w: its row (or object) again on every change.
    """
    ns = resolve_namespace(namespace)
    if watch:
        watch_forever(
            COLONY,
            ns,
            output,
            colonies_table,
            field_selector=f"metadata.name={name}",
            single=True,
            empty=str(not_found("Colony", name, ns, "colonies list")),
        )
        return
    colony = run(lambda kube: get_colony(kube, name, ns))
    if output not in (OutputFormat.table, OutputFormat.wide):
        print_objects([colony], output, colonies_table, single=True)
        return
    print_details(colony_details(colony))
    if (colony.get("status") or {}).get("clusters"):
        console().print(clusters_table(colony))
    conditions = list(conditions_rows((colony.get("status") or {}).get("conditions") or []))
    if conditions:
        typer.echo("Conditions:")
        for line in conditions:
            typer.echo(f"  {line}")


@app.command()
@cli_errors
def create(
    file: Annotated[
        Path,
        typer.Option(
            "--file", "-f", metavar="FILE|DIR|-", help="Colonies: a YAML file, a directory or - (stdin)."
        ),
    ],
    namespace: NamespaceOption = None,
    wait: WaitOption = False,
    timeout: TimeoutOption = "30m",
    context: ContextOption = None,
    kubeconfig: KubeconfigOption = None,
) -> None:
    """Create the Colonies in FILE (an existing one is an error, never overwritten).

    With --wait: each cluster's phase, nodes and GPUs, live, until every colony is Ready (exit 0),
    one Failed (exit 1, with the reason) or the timeout (exit 1).
    """
    documents = load_documents(file)
    for document in documents:
        if document.get("kind") != COLONY.kind or document.get("apiVersion") != COLONY.api_version:
            raise CliError(
                f"{file}: {document.get('kind')} is not a Colony ({COLONY.api_version})", EXIT_USAGE
            )
    default = resolve_namespace(None)
    colonies = [with_namespace(d, namespace, default) for d in documents]
    run(lambda kube: create_objects(kube, colonies, COLONY.kind, "colonies list"))
    if wait:
        wait_for_colonies(colonies, timeout, gone=False)


@app.command()
@cli_errors
def delete(
    name: str,
    namespace: NamespaceOption = None,
    wait: WaitOption = False,
    timeout: TimeoutOption = "30m",
    context: ContextOption = None,
    kubeconfig: KubeconfigOption = None,
) -> None:
    """Delete a Colony; the operator tears its clusters down (Cluster API) before it disappears.

    With --wait: each cluster's teardown, live, until the colony is gone (exit 0) or the timeout.
    """
    ns = resolve_namespace(namespace)

    async def remove(kube: Kube) -> None:
        if not await kube.delete(COLONY.api_version, COLONY.kind, name, ns):
            raise not_found("Colony", name, ns, "colonies list")

    run(remove)
    typer.echo(f"colony {name} deletion requested in namespace {ns} (its clusters are torn down first)")
    if wait:
        wait_for_colonies([{"metadata": {"name": name, "namespace": ns}}], timeout, gone=True)


def choose_cluster(
    name: str, namespace: str, clusters: Sequence[RenderedCluster], wanted: str | None
) -> RenderedCluster:
    """The cluster `wanted` (--cluster), or the only one; CliError naming the choices otherwise."""
    names = [c.cluster_name for c in clusters]
    if wanted is None and len(clusters) == 1:
        return clusters[0]
    chosen = next((c for c in clusters if c.cluster_name == wanted), None)
    if chosen is not None:
        return chosen
    if wanted is None:
        raise CliError(
            f"colony {name} has {len(names)} clusters ({', '.join(names)}): pick one with --cluster, "
            f"e.g. `colony colonies kubeconfig {name} -n {namespace} --cluster {names[0]}`",
            EXIT_USAGE,
        )
    raise CliError(f"colony {name} has no cluster {wanted}; its clusters: {', '.join(names)}")


@app.command()
@cli_errors
def kubeconfig(
    name: str,
    cluster: Annotated[
        str | None,
        typer.Option("--cluster", metavar="NAME", help="clusterName, when the colony has several."),
    ] = None,
    namespace: NamespaceOption = None,
    context: ContextOption = None,
    kubeconfig: KubeconfigOption = None,
) -> None:
    """Print the kubeconfig of a colony cluster (it holds credentials: keep it safe).

    Read from the cluster's kubeconfig Secret, e.g. `colony colonies kubeconfig my-colony > c.kubeconfig`.
    """
    ns = resolve_namespace(namespace)

    async def read(kube: Kube) -> str:
        colony = await get_colony(kube, name, ns)
        try:
            rendered = render_colony_resource(colony)
        except (ValidationError, ValueError) as error:
            raise CliError(f"colony {name} has an invalid spec: {error}") from error
        target = choose_cluster(name, ns, rendered.clusters, cluster)
        secret = await kube.get("v1", "Secret", target.kubeconfig_secret, ns)
        if secret is None:
            phase = next(
                (
                    c.get("phase")
                    for c in (colony.get("status") or {}).get("clusters") or []
                    if c.get("name") == target.cluster_name
                ),
                "Pending",
            )
            raise CliError(
                f"the kubeconfig Secret {ns}/{target.kubeconfig_secret} of cluster {target.cluster_name} "
                f"does not exist yet (cluster {phase}): wait until `colony colonies get {name} -n {ns}` "
                "shows it Ready"
            )
        encoded = (secret.get("data") or {}).get(target.kubeconfig_key)
        if not encoded:
            raise CliError(f"Secret {ns}/{target.kubeconfig_secret} has no key {target.kubeconfig_key!r}")
        try:
            return base64.b64decode(encoded).decode()
        except (binascii.Error, UnicodeDecodeError) as error:
            raise CliError(f"Secret {ns}/{target.kubeconfig_secret} does not hold a kubeconfig") from error

    typer.echo(run(read).rstrip("\n"))
