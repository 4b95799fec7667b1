"""The cheapest-offer solver: which instance type, where, is the cheapest way to get N nodes of G GPUs.

A colony never spans regions, and its nodes are alike: a solution is ONE offer (one instance type in
one region, or zone) rented `nodes` times, one instance per node. An offer is feasible when its GPU type
is acceptable, it has at least `gpus_per_node` GPUs, its cloud and region are allowed, it has a price
for the pricing kind (spot or on-demand) and the total for all nodes is within the max price.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from colony.scheduling.offers.gpu_names import normalize_gpu
from colony.scheduling.offers.model import Offer

Constraint = Literal["gpu_type", "gpus_per_node", "cloud", "region", "pricing", "max_price"]
JSONScalar = str | int | float | bool | None


class NoFeasibleOffer(ValueError):
    """No offer meets the request; `constraint` names the first constraint that left none."""

    def __init__(self, constraint: Constraint, message: str) -> None:
        super().__init__(message)
        self.constraint: Constraint = constraint


def _pricing(spot: bool) -> str:
    return "spot" if spot else "on-demand"


def _money(value: float) -> str:
    text = f"{value:.5f}".rstrip("0")
    whole, _, cents = text.partition(".")
    return f"${whole}.{cents.ljust(2, '0')}"


def _names(values: Iterable[str]) -> str:
    return ", ".join(sorted(set(values))) or "none"


@dataclass(frozen=True)
class OfferRequest:
    """What a colony needs: `nodes` alike nodes, each with `gpus_per_node` GPUs of an acceptable type.

    GPU names are normalized (gpu_names) and clouds lower-cased on construction. Empty `regions` or
    `clouds` allow any; `max_price_per_hour` is for all nodes together (None: no limit).
    """

    accelerators: frozenset[str]
    gpus_per_node: int = 1
    nodes: int = 1
    spot: bool = False
    regions: frozenset[str] = frozenset()
    clouds: frozenset[str] = frozenset()
    max_price_per_hour: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "accelerators", frozenset(normalize_gpu(a) for a in self.accelerators))
        object.__setattr__(self, "clouds", frozenset(c.strip().lower() for c in self.clouds))
        object.__setattr__(self, "regions", frozenset(r.strip() for r in self.regions))
        if not self.accelerators or "" in self.accelerators:
            raise ValueError("an offer request needs at least one (non-empty) GPU type")
        if self.gpus_per_node < 1 or self.nodes < 1:
            raise ValueError(f"gpus_per_node and nodes must be >= 1, not {self.gpus_per_node}, {self.nodes}")
        if self.max_price_per_hour is not None and not self.max_price_per_hour >= 0:
            raise ValueError(f"max_price_per_hour must be >= 0, not {self.max_price_per_hour}")

    @classmethod
    def build(
        cls,
        gpus: Iterable[str] | str,
        gpus_per_node: int = 1,
        nodes: int = 1,
        spot: bool = False,
        regions: Iterable[str] = (),
        clouds: Iterable[str] = (),
        max_price_per_hour: float | None = None,
    ) -> OfferRequest:
        """A request from plain arguments (any iterables; one GPU name may be a plain string)."""
        return cls(
            accelerators=frozenset((gpus,) if isinstance(gpus, str) else gpus),
            gpus_per_node=gpus_per_node,
            nodes=nodes,
            spot=spot,
            regions=frozenset(regions),
            clouds=frozenset(clouds),
            max_price_per_hour=max_price_per_hour,
        )

    @property
    def label(self) -> str:
        """E.g. "A100/H100 x8": the GPU types and GPUs per node, for messages."""
        return f"{'/'.join(sorted(self.accelerators))} x{self.gpus_per_node}"


@dataclass(frozen=True)
class RankedOffer:
    """A solution: `nodes` instances of `offer`, with totals for all of them (USD per hour)."""

    offer: Offer
    nodes: int
    spot: bool
    price_per_hour: float
    price_per_gpu_hour: float
    gpus: int

    @classmethod
    def of(cls, offer: Offer, nodes: int, spot: bool) -> RankedOffer:
        """Rank `nodes` instances of `offer` (which must have a price for the pricing kind)."""
        node_price = offer.price(spot)
        if node_price is None:
            raise ValueError(f"{offer.instance_type} in {offer.region} has no {_pricing(spot)} price")
        gpus = nodes * offer.accelerator_count
        total = node_price * nodes
        return cls(offer, nodes, spot, total, total / gpus, gpus)

    def to_dict(self) -> dict[str, JSONScalar]:
        """A JSON-ready summary (prices rounded to 6 decimals, as in the catalog)."""
        o = self.offer
        return {
            "cloud": o.cloud,
            "region": o.region,
            "zone": o.zone,
            "instance_type": o.instance_type,
            "accelerator": o.accelerator,
            "accelerator_count": o.accelerator_count,
            "nodes": self.nodes,
            "gpus": self.gpus,
            "spot": self.spot,
            "pricing": _pricing(self.spot),
            "price_per_hour": round(self.price_per_hour, 6),
            "price_per_gpu_hour": round(self.price_per_gpu_hour, 6),
            "node_price_per_hour": o.price(self.spot),
            "vcpus": o.vcpus,
            "memory_gib": o.memory_gib,
        }


def _sort_key(r: RankedOffer) -> tuple[float, float, str, str, str, str]:
    o = r.offer
    return (r.price_per_hour, r.price_per_gpu_hour, o.cloud, o.region, o.instance_type, o.zone or "")


def _narrow(
    candidates: Sequence[Offer], keep: Callable[[Offer], bool], constraint: Constraint, why: Callable[[], str]
) -> list[Offer]:
    kept = [o for o in candidates if keep(o)]
    if not kept:
        raise NoFeasibleOffer(constraint, why())
    return kept


def _feasible(catalog: Sequence[Offer], request: OfferRequest) -> list[Offer]:
    r = request
    by_type = _narrow(
        catalog,
        lambda o: o.accelerator in r.accelerators,
        "gpu_type",
        lambda: (
            f"no offer of GPU type {', '.join(repr(a) for a in sorted(r.accelerators))} "
            f"(known: {_names(o.accelerator for o in catalog)})"
        ),
    )
    big_enough = _narrow(
        by_type,
        lambda o: o.accelerator_count >= r.gpus_per_node,
        "gpus_per_node",
        lambda: (
            f"no {'/'.join(sorted(r.accelerators))} offer with at least {r.gpus_per_node} GPUs per node "
            f"(largest: {max(o.accelerator_count for o in by_type)})"
        ),
    )
    on_cloud = _narrow(
        big_enough,
        lambda o: not r.clouds or o.cloud in r.clouds,
        "cloud",
        lambda: (
            f"no {r.label} offer on cloud(s) {_names(r.clouds)} "
            f"(clouds with one: {_names(o.cloud for o in big_enough)})"
        ),
    )
    in_region = _narrow(
        on_cloud,
        lambda o: not r.regions or o.region in r.regions,
        "region",
        lambda: (
            f"no {r.label} offer in region(s) {_names(r.regions)} "
            f"(regions with one{' on ' + _names(r.clouds) if r.clouds else ''}: "
            f"{_names(o.region for o in on_cloud)})"
        ),
    )
    return _narrow(
        in_region,
        lambda o: o.price(r.spot) is not None,
        "pricing",
        lambda: (
            f"no {_pricing(r.spot)} price for {r.label} in region(s) "
            f"{_names(o.region for o in in_region)} ({_other_pricing(in_region, r.spot)})"
        ),
    )


def _other_pricing(offers: Sequence[Offer], spot: bool) -> str:
    other = [o for o in offers if o.price(not spot) is not None]
    if not other:
        return "no prices at all there"
    return f"{_pricing(not spot)} prices there: {len(other)} offer(s)"


def cheapest_offers(
    catalog: Iterable[Offer], request: OfferRequest, limit: int | None = 10
) -> list[RankedOffer]:
    """The cheapest feasible solutions, cheapest first, at most `limit` (None: all).

    Order: total price per hour, then price per GPU-hour, cloud, region, instance type, zone.
    Raises NoFeasibleOffer, naming the first constraint (GPU type, GPUs per node, cloud, region,
    pricing kind, max price) that left no candidate and what was available.
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1, not {limit}")
    ranked = sorted(
        (RankedOffer.of(o, request.nodes, request.spot) for o in _feasible(tuple(catalog), request)),
        key=_sort_key,
    )
    cap = request.max_price_per_hour
    affordable = [r for r in ranked if cap is None or r.price_per_hour <= cap]
    if not affordable:
        best = ranked[0]
        nodes = f"{best.nodes} node{'s' if best.nodes > 1 else ''}"
        raise NoFeasibleOffer(
            "max_price",
            f"the cheapest feasible offer ({best.offer.cloud} {best.offer.instance_type} in "
            f"{best.offer.region}, {_pricing(best.spot)}) costs {_money(best.price_per_hour)}/h "
            f"(total for {nodes}), above max price {_money(cap or 0.0)}/h",
        )
    return affordable if limit is None else affordable[:limit]
