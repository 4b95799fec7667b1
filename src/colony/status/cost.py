"""Pure: what colonies and jobs cost.

- A colony cluster's price per hour is the user-declared `pricePerHour` when set, else the catalog
  price of its instance type for AWS (on-demand, times replicas), zero for local Docker clusters,
  and unknown for on-prem and existing clusters without a declared price.
- A cluster is billed while its machines may exist: from Provisioning on, through Ready, Unreachable
  and Deleting (a cluster Failed before provisioning, or still Pending, bills nothing).
- A colony's `costAccrued` grows by the rate recorded in its status over the time since
  `costAccruedAt`; the rate then becomes the sum of its billed clusters' known prices.
- A job's GPU-hours are its GPUs times its wall time from the workers' start to its completion
  (GPUs stay reserved across gang restarts); its cost is GPU-hours times the colony's price per
  GPU-hour when the job was placed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from colony.api.colony import ColonyCluster
from colony.scheduling.offers.model import Offer
from colony.timefmt import format_time, parse_time

BILLED_PHASES = frozenset({"Provisioning", "Ready", "Unreachable", "Deleting"})
COST_DECIMALS = 4


@dataclass(frozen=True)
class ClusterPrice:
    """The hourly price of one colony cluster and where it comes from."""

    price_per_hour: float | None
    source: str


def cluster_price(cluster: ColonyCluster, catalog: Sequence[Offer]) -> ClusterPrice:
    """Price of a cluster per hour: declared, from the catalog (AWS), zero (Docker) or unknown."""
    if cluster.price_per_hour is not None:
        return ClusterPrice(cluster.price_per_hour, "declared in spec")
    if cluster.aws is not None:
        aws = cluster.aws
        offer = next(
            (
                o
                for o in catalog
                if o.cloud == "aws" and o.region == aws.region and o.instance_type == aws.instance_type
            ),
            None,
        )
        kind = "spot" if aws.spot else "on-demand"
        node_price = offer.price(aws.spot) if offer is not None else None
        if node_price is None:
            return ClusterPrice(
                None, f"no {kind} price for {aws.instance_type} in {aws.region} in the catalog"
            )
        return ClusterPrice(
            round(node_price * aws.replicas, COST_DECIMALS),
            f"catalog: aws {aws.region} {aws.instance_type} x{aws.replicas} {kind}",
        )
    if cluster.docker is not None:
        return ClusterPrice(0.0, "local Docker machines")
    return ClusterPrice(None, f"no pricePerHour declared for this {cluster.provider} cluster")


def colony_cost(
    previous: Mapping[str, Any],
    clusters: Sequence[Mapping[str, Any]],
    now: datetime,
    *,
    min_interval_s: float = 60.0,
) -> dict[str, Any]:
    """`pricePerHour`, `costAccrued` and `costAccruedAt` of a colony's status.

    `previous` is the current status, `clusters` the new per-cluster statuses (with `phase` and
    `pricePerHour`). While the rate is unchanged, the accrued cost is brought forward at most every
    `min_interval_s` seconds, so status is not rewritten on every observation.
    """
    now = now.replace(microsecond=0)  # status keeps whole seconds; accrue over exactly those
    billed = [c for c in clusters if c["phase"] in BILLED_PHASES and c.get("pricePerHour") is not None]
    rate = round(sum(float(c["pricePerHour"]) for c in billed), COST_DECIMALS)
    previous_rate = float(previous.get("pricePerHour") or 0.0)
    previous_cost = float(previous.get("costAccrued") or 0.0)
    since = parse_time(previous.get("costAccruedAt"))
    if since is None:
        return {"pricePerHour": rate, "costAccrued": previous_cost, "costAccruedAt": format_time(now)}
    elapsed = max(0.0, (now - since).total_seconds())
    if rate == previous_rate and elapsed < min_interval_s:
        return {
            "pricePerHour": rate,
            "costAccrued": previous_cost,
            "costAccruedAt": previous["costAccruedAt"],
        }
    cost = round(previous_cost + previous_rate * elapsed / 3600, COST_DECIMALS)
    return {"pricePerHour": rate, "costAccrued": cost, "costAccruedAt": format_time(now)}


def price_per_gpu_hour(colony_status: Mapping[str, Any]) -> float | None:
    """The colony's hourly price divided by its GPUs (None when either is unknown or zero GPUs)."""
    price, gpus = colony_status.get("pricePerHour"), colony_status.get("gpus")
    if price is None or not gpus:
        return None
    return round(float(price) / int(gpus), COST_DECIMALS)


def job_usage(
    gpus: int, start: datetime | None, end: datetime, price_per_gpu_hour: float | None
) -> dict[str, float | None]:
    """`gpuHours` and `cost` of a job that holds `gpus` GPUs from `start` to `end`."""
    hours = max(0.0, (end - start).total_seconds()) / 3600 if start else 0.0
    gpu_hours = round(gpus * hours, COST_DECIMALS)
    cost = None if price_per_gpu_hour is None else round(gpu_hours * price_per_gpu_hour, COST_DECIMALS)
    return {"gpuHours": gpu_hours, "cost": cost}


def priced_colony_status(
    status: Mapping[str, Any],
    prices: Mapping[str, ClusterPrice],
    previous: Mapping[str, Any],
    now: datetime,
    *,
    min_interval_s: float = 60.0,
) -> dict[str, Any]:
    """A colony status (from colony_status) with each cluster's price and the colony's cost added."""
    clusters = []
    for cluster in status["clusters"]:
        price = prices.get(cluster["name"], ClusterPrice(None, "cluster not in the spec"))
        entry = {**cluster, "priceSource": price.source}
        if price.price_per_hour is not None:
            entry["pricePerHour"] = price.price_per_hour
        clusters.append(entry)
    return {
        **status,
        "clusters": clusters,
        **colony_cost(previous, clusters, now, min_interval_s=min_interval_s),
    }
