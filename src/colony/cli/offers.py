"""`colony offers`: the cheapest catalog offers for N nodes of G GPUs each."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from colony.scheduling.offers.model import Offer
from colony.scheduling.offers.solver import OfferRequest, RankedOffer

PIPED_WIDTH = 160
"""Table width when stdout is not a terminal (rich's default, 80, would squeeze the columns)."""


class OutputFormat(StrEnum):
    """How `colony offers` prints its answer."""

    table = "table"
    json = "json"


def _table(ranked: list[RankedOffer], request: OfferRequest, source: str) -> Table:
    pricing = "spot" if request.spot else "on-demand"
    table = Table(
        title=f"Cheapest offers for {request.nodes} node(s) x {request.label} ({pricing})",
        caption=f"Catalog: {source}. A listed offer is a price, not proof of available capacity.",
    )
    for name in ("cloud", "region", "instance type", "GPU"):
        table.add_column(name, no_wrap=True)
    for name in ("GPUs/node", "nodes"):
        table.add_column(name, justify="right", min_width=len(name))
    table.add_column("pricing", min_width=len("on-demand"))
    for name in ("$/h total", "$/GPU-h"):
        table.add_column(name, justify="right", no_wrap=True)
    for r in ranked:
        o = r.offer
        table.add_row(
            o.cloud,
            o.region,
            o.instance_type,
            o.accelerator,
            str(o.accelerator_count),
            str(r.nodes),
            "spot" if r.spot else "on-demand",
            f"{r.price_per_hour:,.2f}",
            f"{r.price_per_gpu_hour:,.3f}",
        )
    return table


def offers(
    gpu: Annotated[
        list[str], typer.Option("--gpu", help="Acceptable GPU type (repeatable), e.g. A100, H100, A100-80GB.")
    ],
    gpus_per_node: Annotated[int, typer.Option(min=1, help="GPUs each node needs (at least).")] = 1,
    nodes: Annotated[int, typer.Option(min=1, help="Nodes, all of one instance type in one region.")] = 1,
    spot: Annotated[bool, typer.Option("--spot", help="Spot prices instead of on-demand.")] = False,
    region: Annotated[
        list[str] | None, typer.Option("--region", help="Allowed region (repeatable); default: any.")
    ] = None,
    cloud: Annotated[
        list[str] | None, typer.Option("--cloud", help="Allowed cloud (repeatable); default: any.")
    ] = None,
    max_price: Annotated[
        float | None, typer.Option(min=0, help="Most USD per hour, for all nodes together.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="How many offers to show.")] = 10,
    catalog: Annotated[
        Path | None,
        typer.Option(exists=True, dir_okay=False, help="Catalog CSV to use instead of the shipped one."),
    ] = None,
    output: Annotated[
        OutputFormat, typer.Option("--output", "-o", help="Output format: table or json.")
    ] = OutputFormat.table,
    refresh_aws: Annotated[
        bool,
        typer.Option(
            "--refresh-aws",
            help="Reprice AWS offers live first (EC2 spot history, Pricing API; your AWS credentials).",
        ),
    ] = False,
) -> None:
    """List the cheapest cloud offers (instance type and region) for a colony's GPU nodes."""
    from colony.pricing.catalog_source import (
        DEFAULT_CATALOG_DESCRIPTION,
        load_catalog_file,
        load_default_catalog,
    )
    from colony.scheduling.offers.catalog import CatalogError
    from colony.scheduling.offers.solver import NoFeasibleOffer, cheapest_offers

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
            offer_list = _refreshed(offer_list)
            source_note = " (AWS repriced live)"
        ranked = cheapest_offers(offer_list, request, limit=limit)
    except CatalogError as error:
        typer.echo(f"{catalog or DEFAULT_CATALOG_DESCRIPTION}: {error}", err=True)
        raise typer.Exit(1) from None
    except NoFeasibleOffer as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(1) from None
    except ValueError as error:
        typer.echo(f"invalid request: {error}", err=True)
        raise typer.Exit(2) from None
    if output is OutputFormat.json:
        typer.echo(json.dumps([r.to_dict() for r in ranked], indent=2))
        return
    source = (str(catalog) if catalog else DEFAULT_CATALOG_DESCRIPTION) + source_note
    console = Console()
    if not console.is_terminal:
        console = Console(width=PIPED_WIDTH)
    console.print(_table(ranked, request, source))


def _refreshed(catalog: tuple[Offer, ...]) -> tuple[Offer, ...]:
    """The catalog with AWS prices fetched live; what could not be fetched is said on stderr."""
    import boto3

    from colony.pricing.aws_refresh import refresh_aws_prices

    refreshed, report = refresh_aws_prices(
        catalog, lambda service, region: boto3.client(service, region_name=region)
    )
    typer.echo(f"repriced {report.offers_changed} AWS offer(s) in {len(report.regions)} region(s)", err=True)
    for problem in report.problems:
        typer.echo(f"warning: {problem}", err=True)
    return refreshed
