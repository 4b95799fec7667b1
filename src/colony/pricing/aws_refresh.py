"""Live AWS prices with boto3: spot from EC2 DescribeSpotPriceHistory, on-demand from the Pricing API.

Never needed for tests or the demo (the shipped catalog is used); `colony offers --refresh-aws` and
the operator setting COLONY_OFFERS_REFRESH_AWS use it with the usual AWS credential chain.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from colony.scheduling.offers.aws_prices import cheapest_spot_prices, on_demand_price, with_aws_prices
from colony.scheduling.offers.model import Offer

PRICING_REGION = "us-east-1"  # the Pricing API is served from a few regions only


@dataclass
class RefreshReport:
    """What a refresh changed, and what it could not do (with the reason)."""

    offers_changed: int = 0
    regions: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def refresh_aws_prices(
    catalog: Sequence[Offer],
    client: Callable[[str, str], Any],
    *,
    spot: bool = True,
    on_demand: bool = True,
) -> tuple[tuple[Offer, ...], RefreshReport]:
    """Reprice the catalog's AWS offers; `client(service, region)` makes a boto3 client.

    A region or API that fails is reported and keeps its catalog prices.
    """
    report = RefreshReport()
    offers = tuple(catalog)
    regions = sorted({o.region for o in offers if o.cloud == "aws"})
    for region in regions:
        types = sorted({o.instance_type for o in offers if o.cloud == "aws" and o.region == region})
        spot_prices: dict[str, tuple[str, float]] = {}
        demand_prices: dict[str, float] = {}
        if spot:
            try:
                spot_prices = _spot(client("ec2", region), types)
            except (ClientError, BotoCoreError) as error:
                report.problems.append(f"spot prices in {region}: {error}")
        if on_demand:
            try:
                demand_prices = _on_demand(client("pricing", PRICING_REGION), region, types)
            except (ClientError, BotoCoreError) as error:
                # One answer for the whole API (no access, not served): do not ask again per region.
                report.problems.append(f"on-demand prices (Pricing API): {error}")
                on_demand = False
        offers, changed = with_aws_prices(offers, region, spot_prices, demand_prices)
        report.offers_changed += changed
        report.regions.append(region)
    return offers, report


def _spot(ec2: Any, types: Sequence[str]) -> dict[str, tuple[str, float]]:
    history: list[dict[str, Any]] = []
    pages = ec2.get_paginator("describe_spot_price_history").paginate(
        InstanceTypes=list(types), ProductDescriptions=["Linux/UNIX"], StartTime=datetime.now(UTC)
    )
    for page in pages:
        history += page["SpotPriceHistory"]
    return cheapest_spot_prices(history)


def _on_demand(pricing: Any, region: str, types: Sequence[str]) -> dict[str, float]:
    prices: dict[str, float] = {}
    for instance_type in types:
        filters = [
            {"Type": "TERM_MATCH", "Field": name, "Value": value}
            for name, value in (
                ("instanceType", instance_type),
                ("regionCode", region),
                ("operatingSystem", "Linux"),
                ("tenancy", "Shared"),
                ("preInstalledSw", "NA"),
                ("capacitystatus", "Used"),
            )
        ]
        for page in pricing.get_paginator("get_products").paginate(ServiceCode="AmazonEC2", Filters=filters):
            for item in page["PriceList"]:
                parsed = on_demand_price(item)
                if parsed is not None:
                    prices[parsed[0]] = parsed[2]
    return prices
