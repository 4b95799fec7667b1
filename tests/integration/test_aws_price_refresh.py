"""Live AWS repricing against moto in server mode (a real HTTP endpoint speaking the EC2 and Pricing
APIs), then the solver on the refreshed catalog."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from colony.pricing.aws_refresh import refresh_aws_prices
from colony.pricing.catalog_source import load_default_catalog
from colony.scheduling.offers.solver import OfferRequest, cheapest_offers

MOTO_SPOT_PRICE = 0.00001  # what moto's DescribeSpotPriceHistory answers for every offered type


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def aws_client() -> Iterator[Callable[[str, str], Any]]:
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()

    def client(service: str, region: str) -> Any:
        return boto3.client(
            service,
            region_name=region,
            endpoint_url=f"http://127.0.0.1:{port}",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    try:
        yield client
    finally:
        server.stop()


def test_refreshed_spot_prices_change_the_cheapest_offer(aws_client: Callable[[str, str], Any]) -> None:
    catalog = load_default_catalog()
    request = OfferRequest.build(gpus=["A100"], gpus_per_node=8, nodes=2, spot=True)
    before = cheapest_offers(catalog, request)[0]
    assert before.offer.cloud != "aws" or (before.offer.spot_price_per_hour or 0) > MOTO_SPOT_PRICE

    refreshed, report = refresh_aws_prices(catalog, aws_client)

    assert report.offers_changed > 0
    assert set(report.regions) == {o.region for o in catalog if o.cloud == "aws"}
    # moto does not serve the Pricing API: on-demand prices keep their catalog values, and we say so.
    assert any("on-demand prices" in p for p in report.problems)
    assert [o.price_per_hour for o in refreshed] == [o.price_per_hour for o in catalog]
    after = cheapest_offers(refreshed, request)[0]
    assert after.offer.cloud == "aws" and after.offer.accelerator == "A100"
    assert after.offer.spot_price_per_hour == MOTO_SPOT_PRICE
    assert after.price_per_hour == pytest.approx(2 * MOTO_SPOT_PRICE)
    assert after.offer.zone and after.offer.zone.startswith(after.offer.region)
    assert (after.offer.cloud, after.offer.region, after.offer.instance_type) != (
        before.offer.cloud,
        before.offer.region,
        before.offer.instance_type,
    ) or after.price_per_hour < before.price_per_hour
