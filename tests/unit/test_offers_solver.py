"""The cheapest-offer solver, checked against a naive brute force on the shipped catalog."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

from colony.pricing.catalog_source import load_default_catalog
from colony.scheduling.offers.model import Offer
from colony.scheduling.offers.solver import (
    NoFeasibleOffer,
    OfferRequest,
    RankedOffer,
    cheapest_offers,
)

TO_DICT_KEYS = {
    "cloud",
    "region",
    "zone",
    "instance_type",
    "accelerator",
    "accelerator_count",
    "nodes",
    "spot",
    "price_per_hour",
    "price_per_gpu_hour",
    "vcpus",
    "memory_gib",
}


@dataclass(frozen=True)
class Case:
    """A request in canonical names, so the brute force needs nothing from the code under test."""

    gpus: tuple[str, ...]
    gpus_per_node: int = 1
    nodes: int = 1
    spot: bool = False
    regions: tuple[str, ...] = ()
    clouds: tuple[str, ...] = ()
    max_price: float | None = None
    expected_min: float | None = field(default=None, compare=False)

    def request(self) -> OfferRequest:
        return OfferRequest.build(
            gpus=self.gpus,
            gpus_per_node=self.gpus_per_node,
            nodes=self.nodes,
            spot=self.spot,
            regions=self.regions,
            clouds=self.clouds,
            max_price_per_hour=self.max_price,
        )


def brute_force(catalog: Iterable[Offer], case: Case) -> list[float]:
    """Every feasible total price per hour, by applying the rules one offer at a time."""
    totals = []
    for offer in catalog:
        if offer.accelerator not in case.gpus:
            continue
        if offer.accelerator_count < case.gpus_per_node:
            continue
        if case.clouds and offer.cloud not in case.clouds:
            continue
        if case.regions and offer.region not in case.regions:
            continue
        node_price = offer.spot_price_per_hour if case.spot else offer.price_per_hour
        if node_price is None:
            continue
        total = node_price * case.nodes
        if case.max_price is not None and total > case.max_price:
            continue
        totals.append(total)
    return totals


BASKET = [
    Case(("A100",), 8, expected_min=15.92),
    Case(("A100",), 8, nodes=2, expected_min=31.84),
    Case(("A100",), 8, nodes=2, spot=True),
    Case(("H100",), 8),
    Case(("H100",), 8, spot=True),
    Case(("H100",), 8, nodes=4, spot=True, clouds=("aws", "gcp")),
    Case(("L4",), 1, expected_min=0.70683),
    Case(("L4",), 1, spot=True),
    Case(("L4",), 4, nodes=3, regions=("us-east-1", "europe-west4")),
    Case(("A10G",), 1, spot=True, regions=("eu-central-1",)),
    Case(("A100-80GB",), 8, clouds=("gcp",), expected_min=8.79698 + 14.76958),
    Case(("A100-80GB",), 2, spot=True, clouds=("azure",)),
    Case(("H200",), 8, expected_min=12.8793 + 36.60258),
    Case(("H200",), 8, spot=True, regions=("us-west-2",)),
    Case(("A100", "H100"), 8, nodes=2),
    Case(("A100", "A100-80GB", "H100", "H200"), 4, nodes=2, spot=True),
    Case(("T4", "V100"), 1, clouds=("aws", "azure"), regions=("westus2", "us-west-2")),
    Case(("V100-32GB",), 8, spot=True),
    Case(("K80",), 1, clouds=("azure",), expected_min=0.18),
    Case(("H100",), 8, nodes=2, max_price=100.0),
    Case(("H100",), 1, nodes=8, spot=True, max_price=25.0),
    Case(("B200", "GH200"), 1, regions=("us-east-1",)),
    Case(("A100",), 16, expected_min=9.68403 + 25.81838),
]


@pytest.fixture(scope="module")
def catalog() -> tuple[Offer, ...]:
    return load_default_catalog()


@pytest.mark.parametrize("case", BASKET, ids=str)
def test_cheapest_matches_brute_force(catalog: tuple[Offer, ...], case: Case) -> None:
    totals = brute_force(catalog, case)
    assert totals, "every basket request is feasible"
    ranked = cheapest_offers(catalog, case.request(), limit=1000)
    assert ranked[0].price_per_hour == min(totals)
    if case.expected_min is not None:
        assert ranked[0].price_per_hour == pytest.approx(case.expected_min)
    assert sorted(r.price_per_hour for r in ranked) == sorted(totals)
    prices = [(r.price_per_hour, r.price_per_gpu_hour) for r in ranked]
    assert prices == sorted(prices)
    for r in ranked:
        assert r.nodes == case.nodes and r.spot == case.spot
        assert r.gpus == case.nodes * r.offer.accelerator_count
        assert r.price_per_gpu_hour == pytest.approx(r.price_per_hour / r.gpus)


def test_the_basket_is_big_and_varied() -> None:
    assert len(BASKET) >= 15
    assert any(c.spot for c in BASKET) and any(not c.spot for c in BASKET)
    assert any(c.regions for c in BASKET) and any(c.clouds for c in BASKET)
    assert any(c.nodes > 1 for c in BASKET) and any(len(c.gpus) > 1 for c in BASKET)
    assert any(c.max_price is not None for c in BASKET)


def test_limit_and_tie_order(catalog: tuple[Offer, ...]) -> None:
    request = OfferRequest.build(gpus=["A100"], gpus_per_node=8, nodes=2)
    assert len(cheapest_offers(catalog, request, limit=3)) == 3
    assert len(cheapest_offers(catalog, request)) == 10
    every = cheapest_offers(catalog, request, limit=None)
    assert len(every) == len([o for o in catalog if o.accelerator == "A100" and o.accelerator_count >= 8])
    lambda_ties = [r.offer.region for r in every if r.price_per_hour == every[0].price_per_hour]
    assert lambda_ties == sorted(lambda_ties) and len(lambda_ties) == 17
    with pytest.raises(ValueError):
        cheapest_offers(catalog, request, limit=0)


def test_max_price_is_inclusive(catalog: tuple[Offer, ...]) -> None:
    request = OfferRequest.build(gpus=["L4"], max_price_per_hour=0.70683)
    (only,) = cheapest_offers(catalog, request)
    assert (only.offer.cloud, only.offer.instance_type, only.offer.region) == (
        "gcp",
        "g2-standard-4",
        "us-central1",
    )


def test_request_normalizes_and_validates() -> None:
    request = OfferRequest.build(gpus="a100 80gb", clouds=["AWS"], regions=[" us-east-1"])
    assert request.accelerators == frozenset({"A100-80GB"})
    assert request.clouds == frozenset({"aws"}) and request.regions == frozenset({"us-east-1"})
    assert OfferRequest(accelerators=frozenset({"Tesla V100"})).accelerators == frozenset({"V100"})
    bad_requests: list[dict[str, Any]] = [
        {"gpus": []},
        {"gpus": [""]},
        {"gpus": ["A100"], "gpus_per_node": 0},
        {"gpus": ["A100"], "nodes": 0},
        {"gpus": ["A100"], "max_price_per_hour": -1.0},
    ]
    for bad in bad_requests:
        with pytest.raises(ValueError):
            OfferRequest.build(**bad)


def test_ranked_offer_to_dict(catalog: tuple[Offer, ...]) -> None:
    best = cheapest_offers(catalog, OfferRequest.build(gpus=["L4"], nodes=3))[0]
    data = best.to_dict()
    assert set(data) >= TO_DICT_KEYS
    assert data["instance_type"] == "g2-standard-4" and data["nodes"] == 3 and data["spot"] is False
    assert data["price_per_hour"] == pytest.approx(3 * 0.70683)
    assert data["price_per_gpu_hour"] == pytest.approx(0.70683)
    with pytest.raises(ValueError):
        RankedOffer.of(next(o for o in catalog if o.price_per_hour is None), 1, spot=False)


INFEASIBLE = [
    ({"gpus": ["X100"]}, "gpu_type", ["'X100'", "known: A10, A100"]),
    ({"gpus": ["A100"], "gpus_per_node": 32}, "gpus_per_node", ["A100", "at least 32 GPUs", "largest: 16"]),
    (
        {"gpus": ["A100"], "gpus_per_node": 8, "clouds": ["oracle"], "regions": ["mars-1"]},
        "cloud",
        ["A100 x8", "cloud(s) oracle", "clouds with one: aws, azure, gcp, lambda"],
    ),
    (
        {"gpus": ["A100"], "gpus_per_node": 8, "regions": ["mars-1"]},
        "region",
        ["A100 x8", "region(s) mars-1", "regions with one:", "us-central1"],
    ),
    (
        {"gpus": ["A100"], "gpus_per_node": 8, "clouds": ["aws"], "regions": ["westus2"]},
        "region",
        ["region(s) westus2", "regions with one on aws: ap-northeast-1, eu-central-1, us-east-1, us-west-2"],
    ),
    (
        {"gpus": ["A100"], "spot": True, "clouds": ["lambda"]},
        "pricing",
        ["no spot price for A100 x1", "us-east-1", "on-demand prices there"],
    ),
    (
        {"gpus": ["A100"], "gpus_per_node": 8, "nodes": 2, "max_price_per_hour": 10.0},
        "max_price",
        ["costs $31.84/h", "total for 2 nodes", "above max price $10.00/h", "gpu_8x_a100"],
    ),
]


@pytest.mark.parametrize(("request_args", "constraint", "phrases"), INFEASIBLE)
def test_infeasible_names_the_first_empty_constraint(
    catalog: tuple[Offer, ...], request_args: dict[str, Any], constraint: str, phrases: list[str]
) -> None:
    with pytest.raises(NoFeasibleOffer) as raised:
        cheapest_offers(catalog, OfferRequest.build(**request_args))
    assert raised.value.constraint == constraint
    for phrase in phrases:
        assert phrase in str(raised.value)


def test_on_demand_pricing_constraint() -> None:
    p5e = Offer("aws", "us-west-2", "usw2-az3", "p5e.48xlarge", "H200", 8, 192.0, 2048.0, None, 24.9358)
    with pytest.raises(NoFeasibleOffer) as raised:
        cheapest_offers([p5e], OfferRequest.build(gpus=["H200"], gpus_per_node=8))
    assert raised.value.constraint == "pricing"
    assert "no on-demand price for H200 x8 in region(s) us-west-2" in str(raised.value)
    assert "spot prices there: 1 offer(s)" in str(raised.value)
    assert isinstance(raised.value, ValueError)
    (spot,) = cheapest_offers([p5e], OfferRequest.build(gpus=["H200"], gpus_per_node=8, spot=True))
    assert spot.price_per_hour == 24.9358
