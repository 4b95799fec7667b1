"""The GPU price catalog: GPU names, CSV parsing (GCP host + GPU sums, errata), round trip, errors."""

from __future__ import annotations

import csv
import io
from collections import Counter
from importlib import resources
from pathlib import Path

import pytest

from colony.pricing.catalog_source import load_catalog_file, load_default_catalog
from colony.scheduling.offers.catalog import (
    COLUMNS,
    ERRATA,
    CatalogError,
    catalog_to_csv,
    parse_catalog_csv,
)
from colony.scheduling.offers.gpu_names import normalize_gpu
from colony.scheduling.offers.model import Offer

# shared/ lies beside the repository (as CI lays it out).
SHARED_CSV = Path(__file__).resolve().parents[3] / "shared" / "data" / "gpu-offers.csv"
HEADER = ",".join(COLUMNS)


def shipped_text() -> str:
    return resources.files("colony").joinpath("data", "gpu-offers.csv").read_text(encoding="utf-8")


def find(offers: tuple[Offer, ...], instance_type: str, region: str) -> Offer:
    (offer,) = [o for o in offers if o.instance_type == instance_type and o.region == region]
    return offer


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("A100", "A100"),
        ("a100", "A100"),
        ("A100-40GB", "A100"),
        ("NVIDIA A100", "A100"),
        ("NVIDIA-A100-SXM4-40GB", "A100"),
        ("A100-80GB", "A100-80GB"),
        ("a100 80gb", "A100-80GB"),
        ("A100_80G", "A100-80GB"),
        ("A100 80 GB", "A100-80GB"),
        ("NVIDIA-A100-SXM4-80GB", "A100-80GB"),
        ("V100", "V100"),
        ("Tesla V100", "V100"),
        ("Tesla-V100-SXM2-16GB", "V100"),
        ("V100-32GB", "V100-32GB"),
        ("tesla_v100_32gb", "V100-32GB"),
        ("H100", "H100"),
        ("H100-80GB", "H100"),
        ("NVIDIA-H100-80GB-HBM3", "H100"),
        ("h100 mega", "H100-MEGA"),
        ("H100-MEGA", "H100-MEGA"),
        ("A10G", "A10G"),
        ("nvidia-a10g", "A10G"),
        ("A10", "A10"),
        ("l4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("Tesla T4", "T4"),
        ("tesla-k80", "K80"),
        ("h200", "H200"),
        ("b200", "B200"),
        ("gh200", "GH200"),
        ("a6000", "A6000"),
        ("RTX A6000", "A6000"),
        ("rtx6000", "RTX6000"),
        ("RTX 6000", "RTX6000"),
        ("  Super Chip_9000 ", "SUPER-CHIP-9000"),
    ],
)
def test_gpu_name_aliases(alias: str, canonical: str) -> None:
    assert normalize_gpu(alias) == canonical
    assert normalize_gpu(canonical) == canonical


def test_offer_counts_by_cloud() -> None:
    """Raw rows per cloud differ from offers for GCP only.

    GCP has 140 rows: 71 host rows (VM shell) and 69 GPU rows. Each host row plus its GPU row is one
    offer (71); GPU rows are not offers themselves, and the 17 T4/V100 GPU rows attach to N1 hosts
    that are not in the file. Every other cloud's row is one offer (none has a zero GPU count).
    """
    raw = Counter(row["cloud"] for row in csv.DictReader(io.StringIO(shipped_text())))
    assert raw == {"lambda": 374, "aws": 159, "gcp": 140, "azure": 38}
    offers = parse_catalog_csv(shipped_text())
    assert Counter(o.cloud for o in offers) == {"lambda": 374, "aws": 159, "gcp": 71, "azure": 38}
    gcp = [o for o in offers if o.cloud == "gcp"]
    assert {o.accelerator for o in gcp} == {"A100", "A100-80GB", "H100", "H100-MEGA", "H200", "L4"}
    assert all(o.instance_type and o.vcpus and o.accelerator_count >= 1 for o in offers)


def test_gcp_offers_add_host_and_gpu_prices() -> None:
    offers = parse_catalog_csv(shipped_text())
    g2 = find(offers, "g2-standard-4", "us-central1")
    assert (g2.accelerator, g2.accelerator_count, g2.zone) == ("L4", 1, "us-central1-a")
    assert g2.price_per_hour == pytest.approx(0.14679 + 0.56004) == 0.70683
    assert g2.spot_price_per_hour == pytest.approx(0.05874 + 0.2231)
    a2 = find(offers, "a2-highgpu-1g", "us-central1")
    assert (a2.accelerator, a2.accelerator_count) == ("A100", 1)
    assert a2.price_per_hour == 3.67339
    assert find(offers, "g2-standard-96", "europe-west4").accelerator_count == 8
    assert find(offers, "a2-ultragpu-8g", "us-central1").accelerator == "A100-80GB"
    assert find(offers, "a3-megagpu-8g", "us-central1").price_per_hour == pytest.approx(9.46006 + 82.75421)
    h200 = find(offers, "a3-ultragpu-8g", "us-central1")
    assert (h200.accelerator, h200.zone) == ("H200", "us-central1-b")


def test_source_oddities_are_kept_or_corrected() -> None:
    offers = parse_catalog_csv(shipped_text())
    p5e = find(offers, "p5e.48xlarge", "us-west-2")
    assert p5e.price_per_hour is None
    assert p5e.spot_price_per_hour == 24.9358
    nd = find(offers, "Standard_ND96isr_H100_v5", "eastus")
    assert nd.accelerator_count == 8
    assert [(e.cloud, e.instance_type, e.accelerator_count) for e in ERRATA] == [
        ("azure", "Standard_ND96isr_H100_v5", 8)
    ]


def test_round_trip_csv_offers_csv_offers() -> None:
    offers = parse_catalog_csv(shipped_text())
    text = catalog_to_csv(offers)
    again = parse_catalog_csv(text)
    assert again == offers
    assert catalog_to_csv(again) == text
    assert text.splitlines()[0] == HEADER


def test_loaders_read_the_shipped_copy(tmp_path: Path) -> None:
    assert load_default_catalog() is load_default_catalog()
    assert load_default_catalog() == parse_catalog_csv(shipped_text())
    path = tmp_path / "offers.csv"
    path.write_text(catalog_to_csv(load_default_catalog()[:3]))
    assert load_catalog_file(path) == load_default_catalog()[:3]


@pytest.mark.skipif(not SHARED_CSV.is_file(), reason="shared data not mounted")
def test_shipped_csv_is_a_byte_copy_of_shared_data() -> None:
    shipped = resources.files("colony").joinpath("data", "gpu-offers.csv").read_bytes()
    assert shipped == SHARED_CSV.read_bytes()


def test_gcp_rows_pair_by_region_prefer_the_host_zone_and_need_both_prices() -> None:
    text = "\n".join(
        [
            HEADER,
            "gcp,g2-standard-8,,,8.0,32.0,0.3,,r1,r1-b",
            "gcp,,L4,1,,,0.5,0.2,r1,r1-a",
            "gcp,,L4,1,,,0.6,0.25,r1,r1-b",
            "gcp,g2-standard-8,,,8.0,32.0,0.4,0.1,r2,r2-a",
            "gcp,,T4,1,,,0.35,0.17,r1,r1-a",
            "gcp,n1-standard-8,,,8.0,30.0,0.38,0.11,r1,r1-a",
        ]
    )
    (offer,) = parse_catalog_csv(text)
    assert (offer.region, offer.zone, offer.accelerator) == ("r1", "r1-b", "L4")
    assert offer.price_per_hour == 0.9
    assert offer.spot_price_per_hour is None


def test_rows_without_gpus_are_skipped() -> None:
    text = "\n".join(
        [
            HEADER,
            "aws,m5.large,,,2.0,8.0,0.096,0.04,us-east-1,use1-az1",
            "aws,g9.none,T4,0.0,4.0,16.0,0.5,0.2,us-east-1,use1-az1",
            "",
            "AWS,g4dn.xlarge,tesla t4,1.0,4.0,16.0,0.526,,us-east-1,",
        ]
    )
    (offer,) = parse_catalog_csv(text)
    assert offer == Offer("aws", "us-east-1", None, "g4dn.xlarge", "T4", 1, 4.0, 16.0, 0.526, None)


@pytest.mark.parametrize(
    ("text", "line", "needle"),
    [
        ("", 1, "empty"),
        ("cloud,instance_type,accelerator\naws,x,T4", 1, "missing column"),
        (f"{HEADER}\naws,g4dn.xlarge,T4,1,4,16,0.5,0.2,us-east-1", 2, "cells"),
        (f"{HEADER}\naws,g4dn.xlarge,T4,1,4,16,0.5,0.2,us-east-1,\naws,g5,A10G,one,4,16,1,,r,", 3, "count"),
        (f"{HEADER}\n\naws,g4dn.xlarge,T4,1,4,16,cheap,0.2,us-east-1,", 3, "price_per_hour"),
        (f"{HEADER}\naws,g4dn.xlarge,T4,1.5,4,16,0.5,0.2,us-east-1,", 2, "whole number"),
        (f"{HEADER}\naws,g4dn.xlarge,T4,1,4,16,-0.5,0.2,us-east-1,", 2, ">= 0"),
        (f"{HEADER}\naws,g4dn.xlarge,T4,1,4,16,0.5,nan,us-east-1,", 2, "finite"),
        (f"{HEADER}\naws,,T4,1,4,16,0.5,0.2,us-east-1,", 2, "instance_type is empty"),
        (f"{HEADER}\naws,g4dn.xlarge,T4,1,4,16,0.5,0.2,,", 2, "region is empty"),
        (f"{HEADER}\ngcp,,T4,x,,,0.35,0.17,r1,r1-a", 2, "accelerator_count"),
    ],
)
def test_malformed_rows_raise_with_their_line(text: str, line: int, needle: str) -> None:
    with pytest.raises(CatalogError) as raised:
        parse_catalog_csv(text)
    assert raised.value.line == line
    assert str(raised.value).startswith(f"line {line}: ")
    assert needle in str(raised.value)
    assert isinstance(raised.value, ValueError)
