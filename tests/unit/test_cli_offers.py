"""`colony offers`: table and JSON output, catalog files, infeasible requests."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from colony.cli.main import app
from colony.pricing.catalog_source import load_default_catalog
from colony.scheduling.offers.catalog import catalog_to_csv
from tests.unit.cli_snapshots import assert_snapshot, render_80

runner = CliRunner()


def table_rows(stdout: str) -> list[list[str]]:
    """The cells of the borderless table: the lines between the CLOUD header and the caption."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("CLOUD"))
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("Catalog:"):
            break
        rows.append(line.replace("x ", "x~").split())
    return [[cell.replace("x~", "x ") for cell in row] for row in rows]


def test_table_lists_the_cheapest_offer_of_each_cloud_first_with_a_caption() -> None:
    result = runner.invoke(app, ["offers", "--gpu", "l4", "--nodes", "2"])
    assert result.exit_code == 0, result.output
    rows = table_rows(result.stdout)
    assert [row[0] for row in rows] == sorted({row[0] for row in rows}, key=[r[0] for r in rows].index)
    assert rows[0] == ["gcp", "us-central1", "g2-standard-4", "1x L4", "1.41", "0.71"]
    totals = [float(row[4]) for row in rows]
    assert totals == sorted(totals)
    assert "gpu-offers.csv" in result.stdout
    assert "capacity" in result.stdout
    assert "--all lists every offer" in result.stderr


def test_all_lists_the_other_offers_after_each_clouds_cheapest() -> None:
    result = runner.invoke(app, ["offers", "--gpu", "l4", "--nodes", "2", "--all", "--limit", "4"])
    assert result.exit_code == 0, result.output
    rows = table_rows(result.stdout)
    assert [(row[0], row[1]) for row in rows] == [
        ("gcp", "us-central1"),
        ("aws", "us-east-1"),
        ("gcp", "europe-west4"),
        ("aws", "us-west-2"),
    ]


def test_an_8_gpu_request_fits_80_columns_and_shows_every_cloud() -> None:
    from colony.cli.offers import offers_table, per_cloud_first
    from colony.scheduling.offers.solver import OfferRequest, cheapest_offers

    request = OfferRequest.build(gpus=["A100"], gpus_per_node=8, nodes=2)
    ranked = per_cloud_first(cheapest_offers(load_default_catalog(), request, limit=None), False, None)
    text = render_80(offers_table(ranked, request, "shipped catalog", wide=False))
    assert {row[0] for row in table_rows(text)} == {"aws", "gcp", "azure", "lambda"}
    assert_snapshot(text, "offers-a100x8x2.txt")
    wide = render_80(offers_table(ranked, request, "shipped catalog", wide=True), wide=True)
    assert "…" not in wide and "31.84" in wide and "$/NODE-H" in wide  # prices whole, as kubectl -o wide
    assert_snapshot(wide, "offers-a100x8x2-wide.txt", fits=False)


def test_json_is_sorted_by_price_with_the_required_keys() -> None:
    args = ["offers", "--gpu", "A100", "--gpu", "H100", "--gpus-per-node", "8", "--nodes", "2", "--spot"]
    result = runner.invoke(app, [*args, "--all", "--limit", "5", "-o", "json"])
    assert result.exit_code == 0, result.output
    offers = json.loads(result.stdout)
    assert isinstance(offers, list) and len(offers) == 5
    prices = [o["price_per_hour"] for o in offers]
    clouds = len({o["cloud"] for o in offers})
    assert prices[:clouds] == sorted(prices[:clouds])  # each cloud's cheapest, cheapest first
    for offer in offers:
        assert {
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
        } <= set(offer)
        assert offer["nodes"] == 2 and offer["spot"] is True and offer["accelerator"] in {"A100", "H100"}
        assert offer["accelerator_count"] >= 8


def test_filters_and_a_user_catalog_file(tmp_path: Path) -> None:
    path = tmp_path / "offers.csv"
    path.write_text(catalog_to_csv(o for o in load_default_catalog() if o.cloud == "aws"))
    args = ["offers", "--gpu", "T4", "--catalog", str(path), "--region", "us-west-2", "-o", "json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    offers = json.loads(result.stdout)
    assert offers[0]["instance_type"] == "g4dn.xlarge"
    assert {(o["cloud"], o["region"]) for o in offers} == {("aws", "us-west-2")}
    table = runner.invoke(app, ["offers", "--gpu", "T4", "--catalog", str(path)])
    assert str(path) in table.stdout.replace("\n", "")


def test_infeasible_request_exits_1_with_the_reason() -> None:
    result = runner.invoke(app, ["offers", "--gpu", "A100", "--gpus-per-node", "8", "--region", "mars-1"])
    assert result.exit_code == 1
    assert "no A100 x8 offer in region(s) mars-1" in result.stderr
    assert result.stdout == ""
    priced = runner.invoke(app, ["offers", "--gpu", "H100", "--gpus-per-node", "8", "--max-price", "1"])
    assert priced.exit_code == 1
    assert "above max price $1.00/h" in priced.stderr


def test_malformed_catalog_file_exits_1_with_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(catalog_to_csv(load_default_catalog()[:2]) + "aws,g5.xlarge,A10G,one,4,16,1,,r,\n")
    result = runner.invoke(app, ["offers", "--gpu", "A10G", "--catalog", str(path)])
    assert result.exit_code == 1
    assert "line 4: accelerator_count is not a number" in result.stderr
