"""`colony offers`: the cheapest catalog offers for N nodes of G GPUs each.

Like `sky show-gpus`: the cheapest offer of each cloud first (cheapest cloud on top), and with
`--all` every other feasible offer after them, cheapest first. The table fits 80 columns; `-o wide`
adds zone, vCPUs, memory and the price per node.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.console import Console
from rich.table import Table

from colony.cli.jsonpath import JsonPathTemplate, OutputChoice
from colony.cli.kube import (
    EXIT_FAILURE,
    EXIT_USAGE,
    CliError,
    fail,
    output_option,
    print_data,
    print_table,
)
from colony.scheduling.offers.model import Offer
from colony.scheduling.offers.solver import OfferRequest, RankedOffer

PIPED_WIDTH = 160
"""Table width when stdout is not a terminal (rich's default, 80, would squeeze the columns)."""


class OutputFormat(OutputChoice, StrEnum):
    """How `colony offers` prints its answer (or `-o jsonpath=TEMPLATE` on what `-o json` prints)."""

    table = "table"
    wide = "wide"
    json = "json"
    yaml = "yaml"


def per_cloud_first(ranked: list[RankedOffer], show_all: bool, limit: int | None) -> list[RankedOffer]:
    """The cheapest offer of each cloud (in price order), then, when `show_all`, the others in
    price order; at most `limit`. `ranked` is cheapest first."""
    seen: set[str] = set()
    first: list[RankedOffer] = []
    rest: list[RankedOffer] = []
    for offer in ranked:
        if offer.offer.cloud in seen:
            rest.append(offer)
        else:
            seen.add(offer.offer.cloud)
            first.append(offer)
    chosen = first + (rest if show_all else [])
    return chosen[:limit] if limit is not None else chosen


def gpus_cell(offer: Offer) -> str:
    """`8x A100-80GB` (GPUs per node and type)."""
    return f"{offer.accelerator_count}x {offer.accelerator}"


def offers_table(ranked: list[RankedOffer], request: OfferRequest, source: str, wide: bool) -> Table:
    """The offers as a borderless table that fits 80 columns (wide: zone, vCPUs, memory, $/node)."""
    pricing = "spot" if request.spot else "on-demand"
    result = Table(
        box=None,
        pad_edge=False,
        header_style="bold",
        title=f"{request.nodes} node(s) x {request.label}, {pricing}, USD",
        title_justify="left",
        caption=f"Catalog: {source}. A price, not proof of capacity.",
        caption_justify="left",
    )
    result.add_column("CLOUD", no_wrap=True)
    result.add_column("REGION", no_wrap=True, overflow="ellipsis")
    if wide:
        result.add_column("ZONE", no_wrap=True)
    result.add_column("INSTANCE", no_wrap=True, overflow="ellipsis")
    result.add_column("GPUS/NODE", no_wrap=True)
    if wide:
        for name in ("NODES", "VCPUS", "MEM GIB", "$/NODE-H"):
            result.add_column(name, justify="right", no_wrap=True)
    result.add_column("$/H", justify="right", no_wrap=True)
    result.add_column("$/GPU-H", justify="right", no_wrap=True)
    for r in ranked:
        o = r.offer
        node_price = o.price(r.spot)
        extra = (
            [
                str(r.nodes),
                f"{o.vcpus:g}" if o.vcpus is not None else "-",
                f"{o.memory_gib:g}" if o.memory_gib is not None else "-",
                f"{node_price:,.2f}" if node_price is not None else "-",
            ]
            if wide
            else []
        )
        result.add_row(
            o.cloud,
            o.region,
            *([o.zone or "-"] if wide else []),
            o.instance_type,
            gpus_cell(o),
            *extra,
            f"{r.price_per_hour:,.2f}",
            f"{r.price_per_gpu_hour:,.2f}",
        )
    return result


def offers(
    gpu: Annotated[
        list[str],
        typer.Option(
            "--gpu", metavar="TYPE", help="Acceptable GPU type (repeatable): A100, H100, A100-80GB..."
        ),
    ],
    gpus_per_node: Annotated[int, typer.Option(metavar="N", help="GPUs each node needs (at least).")] = 1,
    nodes: Annotated[
        int, typer.Option(metavar="N", help="Nodes, all of one instance type in one region.")
    ] = 1,
    spot: Annotated[bool, typer.Option("--spot", help="Spot prices instead of on-demand.")] = False,
    region: Annotated[
        list[str] | None,
        typer.Option("--region", metavar="REGION", help="Allowed region (repeatable); default: any."),
    ] = None,
    cloud: Annotated[
        list[str] | None,
        typer.Option("--cloud", metavar="CLOUD", help="Allowed cloud (repeatable); default: any."),
    ] = None,
    max_price: Annotated[
        float | None, typer.Option(metavar="USD", help="Most USD per hour, for all nodes together.")
    ] = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="After each cloud's cheapest offer, every other one.")
    ] = False,
    limit: Annotated[int | None, typer.Option(metavar="N", help="Show at most N offers.")] = None,
    catalog: Annotated[
        Path | None,
        typer.Option(metavar="CSV", help="Catalog CSV to use instead of the shipped one."),
    ] = None,
    output: Annotated[
        OutputChoice, output_option(OutputFormat, "table, wide, json, yaml or jsonpath=TEMPLATE.")
    ] = OutputFormat.table,
    refresh_aws: Annotated[
        bool,
        typer.Option(
            "--refresh-aws",
            help="Reprice AWS offers live first (EC2 spot history and Pricing API; your AWS "
            "credentials). Exit 1 when no price could be fetched.",
        ),
    ] = False,
) -> None:
    """Cheapest cloud offers for a colony's GPU nodes.

    The instance type and region to rent: each cloud's cheapest offer, cheapest cloud first;
    --all lists the others too.
    """
    from colony.pricing.catalog_source import (
        DEFAULT_CATALOG_DESCRIPTION,
        load_catalog_file,
        load_default_catalog,
    )
    from colony.scheduling.offers.catalog import CatalogError
    from colony.scheduling.offers.solver import NoFeasibleOffer, cheapest_offers

    for name, value in (("--gpus-per-node", gpus_per_node), ("--nodes", nodes), ("--limit", limit)):
        if value is not None and value < 1:
            fail(f"{name} {value}: must be at least 1", EXIT_USAGE)
    if max_price is not None and max_price < 0:
        fail(f"--max-price {max_price}: must not be negative", EXIT_USAGE)
    if catalog is not None and not catalog.is_file():
        fail(f"--catalog {catalog}: no such file", EXIT_USAGE)
    source_note = ""
    try:
        offer_list = load_catalog_file(catalog) if catalog else load_default_catalog()
        request = OfferRequest.build(
            gpus=gpu,
            gpus_per_node=gpus_per_node,
            nodes=nodes,
            spot=spot,
            regions=region or (),
            clouds=cloud or (),
            max_price_per_hour=max_price,
        )
        if refresh_aws:
            offer_list, source_note = _refreshed(offer_list)
        ranked = per_cloud_first(cheapest_offers(offer_list, request, limit=None), show_all, limit)
    except CatalogError as error:
        fail(f"{catalog or DEFAULT_CATALOG_DESCRIPTION}: {error}", EXIT_FAILURE)
    except NoFeasibleOffer as error:
        fail(str(error), EXIT_FAILURE)
    except ValueError as error:
        fail(f"invalid request: {error}", EXIT_USAGE)
    if isinstance(output, JsonPathTemplate):
        try:
            print_data([r.to_dict() for r in ranked], output)
        except CliError as error:
            fail(str(error), error.code)
        return
    if output in (OutputFormat.json, OutputFormat.yaml):
        data = [r.to_dict() for r in ranked]
        typer.echo(
            json.dumps(data, indent=2) if output is OutputFormat.json else yaml.safe_dump(data).rstrip()
        )
        return
    source = (str(catalog) if catalog else DEFAULT_CATALOG_DESCRIPTION) + source_note
    console = Console()
    if not console.is_terminal:
        console = Console(width=PIPED_WIDTH)
    wide = output is OutputFormat.wide
    print_table(offers_table(ranked, request, source, wide), wide=wide, out=console)
    if not show_all:
        typer.echo("Cheapest offer per cloud; --all lists every offer.", err=True)


def _refreshed(catalog: tuple[Offer, ...]) -> tuple[tuple[Offer, ...], str]:
    """The catalog with AWS prices fetched live, and the note for the caption. Nothing fetched is
    an error (exit 1), a partial refresh a warning per problem on stderr."""
    import boto3

    from colony.pricing.aws_refresh import refresh_aws_prices

    refreshed, report = refresh_aws_prices(
        catalog, lambda service, region: boto3.client(service, region_name=region)
    )
    if report.problems and report.offers_changed == 0:
        fail(f"AWS prices were not refreshed: {report.problems[0]}", EXIT_FAILURE)
    typer.echo(f"repriced {report.offers_changed} AWS offer(s) in {len(report.regions)} region(s)", err=True)
    for problem in report.problems:
        typer.echo(f"warning: {problem}", err=True)
    return refreshed, " (AWS partly repriced live)" if report.problems else " (AWS repriced live)"
