"""The provisioning hook (offer -> Colony) and the pure parsing of AWS price answers."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from colony.api.colony import ColonySpec
from colony.render.offer_colony import ProviderNotSupported, colony_for_offer
from colony.scheduling.offers.aws_prices import cheapest_spot_prices, on_demand_price, with_aws_prices
from colony.scheduling.offers.model import Offer
from colony.scheduling.offers.solver import RankedOffer

P4D = Offer("aws", "us-east-1", "us-east-1a", "p4d.24xlarge", "A100", 8, 96, 1152, 32.77, 9.5)
GCP = Offer("gcp", "us-central1", "us-central1-a", "a2-highgpu-8g", "A100", 8, 96, 680, 29.4, 11.0)


def _ranked(offer: Offer, nodes: int, spot: bool) -> RankedOffer:
    price = (offer.price(spot) or 0.0) * nodes
    return RankedOffer(
        offer=offer,
        nodes=nodes,
        spot=spot,
        price_per_hour=price,
        price_per_gpu_hour=price / (nodes * offer.accelerator_count),
        gpus=nodes * offer.accelerator_count,
    )


def test_an_aws_offer_becomes_an_ephemeral_colony_of_that_instance_type() -> None:
    colony = colony_for_offer(_ranked(P4D, 2, True), name="job-a", namespace="ml", k8s_version="v1.33.1")
    assert colony["metadata"]["labels"]["colony.exalsius.ai/ephemeral"] == "true"
    assert "p4d.24xlarge x2 spot" in colony["metadata"]["annotations"]["colony.exalsius.ai/offer"]
    spec = ColonySpec.model_validate(colony["spec"])  # a valid Colony spec
    (cluster,) = spec.colony_clusters
    assert cluster.aws is not None
    assert (cluster.aws.region, cluster.aws.instance_type, cluster.aws.replicas, cluster.aws.spot) == (
        "us-east-1",
        "p4d.24xlarge",
        2,
        True,
    )


def test_other_clouds_are_refused_with_a_clear_message() -> None:
    with pytest.raises(ProviderNotSupported, match="provider 'gcp' not supported yet"):
        colony_for_offer(_ranked(GCP, 1, False), name="j", namespace="ml", k8s_version="v1.33.1")


def test_spot_history_keeps_the_newest_price_per_zone_and_the_cheapest_zone() -> None:
    t1, t2 = datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC)
    history = [
        {
            "InstanceType": "p4d.24xlarge",
            "AvailabilityZone": "us-east-1a",
            "SpotPrice": "5.0",
            "Timestamp": t1,
        },
        {
            "InstanceType": "p4d.24xlarge",
            "AvailabilityZone": "us-east-1a",
            "SpotPrice": "9.0",
            "Timestamp": t2,
        },
        {
            "InstanceType": "p4d.24xlarge",
            "AvailabilityZone": "us-east-1b",
            "SpotPrice": "7.5",
            "Timestamp": t1,
        },
    ]
    assert cheapest_spot_prices(history) == {"p4d.24xlarge": ("us-east-1b", 7.5)}


def test_on_demand_price_is_read_from_a_price_list_document() -> None:
    document = {
        "product": {"attributes": {"instanceType": "p4d.24xlarge", "regionCode": "us-east-1"}},
        "terms": {
            "OnDemand": {
                "ABC.JRTCKXETXF": {
                    "priceDimensions": {
                        "ABC.JRTCKXETXF.6YS6EN2CT7": {"unit": "Hrs", "pricePerUnit": {"USD": "21.9576000000"}}
                    }
                }
            }
        },
    }
    assert on_demand_price(json.dumps(document)) == ("p4d.24xlarge", "us-east-1", 21.9576)
    assert on_demand_price(json.dumps({"product": {"attributes": {}}})) is None


def test_repricing_touches_only_the_region_and_types_it_has_prices_for() -> None:
    other_region = Offer("aws", "us-west-2", "us-west-2a", "p4d.24xlarge", "A100", 8, 96, 1152, 32.77, 9.5)
    catalog, changed = with_aws_prices(
        [P4D, other_region, GCP], "us-east-1", {"p4d.24xlarge": ("us-east-1c", 4.0)}, {"p4d.24xlarge": 30.0}
    )
    assert changed == 1
    assert catalog[0].zone == "us-east-1c" and catalog[0].spot_price_per_hour == 4.0
    assert catalog[0].price_per_hour == 30.0
    assert catalog[1:] == (other_region, GCP)
