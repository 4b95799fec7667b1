"""Pure: AWS price API answers -> catalog prices.

- Spot: `DescribeSpotPriceHistory` entries; the newest price per (instance type, zone) counts, and
  an offer gets the cheapest zone of its region (the zone is recorded in the offer).
- On-demand: `pricing:GetProducts` PriceList documents (JSON strings); the one USD per-hour
  OnDemand dimension of a product is its price.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from colony.scheduling.offers.model import Offer


def cheapest_spot_prices(history: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, float]]:
    """instance type -> (zone, price) of its cheapest zone, from the newest entry per zone."""
    newest: dict[tuple[str, str], tuple[datetime | str, float]] = {}
    for entry in history:
        key = (str(entry["InstanceType"]), str(entry["AvailabilityZone"]))
        stamp = entry.get("Timestamp") or ""
        if key not in newest or str(stamp) >= str(newest[key][0]):
            newest[key] = (stamp, float(entry["SpotPrice"]))
    cheapest: dict[str, tuple[str, float]] = {}
    for (instance_type, zone), (_, price) in sorted(newest.items()):
        if instance_type not in cheapest or price < cheapest[instance_type][1]:
            cheapest[instance_type] = (zone, price)
    return cheapest


def on_demand_price(price_list_item: str) -> tuple[str, str, float] | None:
    """(instance type, region code, USD per hour) of one PriceList document, or None if it has none."""
    document = json.loads(price_list_item)
    attributes = document.get("product", {}).get("attributes", {})
    instance_type, region = attributes.get("instanceType"), attributes.get("regionCode")
    if not instance_type or not region:
        return None
    for term in document.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            usd = dimension.get("pricePerUnit", {}).get("USD")
            if dimension.get("unit") == "Hrs" and usd is not None and float(usd) > 0:
                return str(instance_type), str(region), float(usd)
    return None


def with_aws_prices(
    catalog: Sequence[Offer],
    region: str,
    spot: Mapping[str, tuple[str, float]],
    on_demand: Mapping[str, float],
) -> tuple[tuple[Offer, ...], int]:
    """The catalog with AWS offers of `region` repriced; also how many offers changed."""
    changed = 0
    result = []
    for offer in catalog:
        if offer.cloud == "aws" and offer.region == region:
            updated = offer
            if offer.instance_type in spot:
                zone, price = spot[offer.instance_type]
                updated = replace(updated, zone=zone, spot_price_per_hour=price)
            if offer.instance_type in on_demand:
                updated = replace(updated, price_per_hour=on_demand[offer.instance_type])
            changed += updated != offer
            offer = updated
        result.append(offer)
    return tuple(result), changed
