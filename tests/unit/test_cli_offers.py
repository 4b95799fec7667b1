"""`colony offers`: table and JSON output, catalog files, infeasible requests."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from colony.cli.main import app
from colony.pricing.catalog_source import load_default_catalog
from colony.scheduling.offers.catalog import catalog_to_csv

runner = CliRunner()


def table_rows(stdout: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.split("│")[1:-1]] for line in stdout.splitlines() if "│" in line]


def test_table_lists_the_cheapest_first_with_a_caption() -> None:
    result = runner.invoke(app, ["offers", "--gpu", "l4", "--nodes", "2", "--limit", "4"])
    assert result.exit_code == 0, result.output
    rows = table_rows(result.stdout)
    assert len(rows) == 4
    assert rows[0][:7] == ["gcp", "us-central1", "g2-standard-4", "L4", "1", "2", "on-demand"]
    assert rows[0][7] == "1.41"
    totals = [float(row[7]) for row in rows]
    assert totals == sorted(totals)
    assert "gpu-offers.csv" in result.stdout
    assert "capacity" in result.stdout


def test_json_is_sorted_by_price_with_the_required_keys() -> None:
    args = ["offers", "--gpu", "A100", "--gpu", "H100", "--gpus-per-node", "8", "--nodes", "2", "--spot"]
    result = runner.invoke(app, [*args, "--limit", "5", "-o", "json"])
    assert result.exit_code == 0, result.output
    offers = json.loads(result.stdout)
    assert isinstance(offers, list) and len(offers) == 5
    prices = [o["price_per_hour"] for o in offers]
    assert prices == sorted(prices)
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
