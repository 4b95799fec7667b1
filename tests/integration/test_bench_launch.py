"""The launch benchmark (bench/launch_throughput.py) still runs at its tiny size: its own clusters and
operator, every contender creates every object, and the table carries figures and ratio columns."""

from __future__ import annotations

import pytest
from bench.launch_throughput import BENCHMARK, COLUMNS, SIZES, run


@pytest.mark.timeout(300)
def test_tiny_launch_benchmark_produces_a_sane_table() -> None:
    size = SIZES["tiny"]
    tables = run("tiny")

    assert len(tables) == 1
    table = tables[0]
    assert table.benchmark == BENCHMARK
    assert table.columns == COLUMNS
    assert table.targets
    contenders = {row["contender"]: row for row in table.rows}
    assert {"floor: plain client, POST", "colony-operator"} <= set(contenders)
    for name, row in contenders.items():
        assert set(row) <= set(COLUMNS), name
        assert row["jobs"] == size.jobs, name
        assert row["pods"] == size.jobs * size.workers, name
        seen, expected = row["objects"].split("/")
        assert seen == expected, f"{name}: {row['objects']} objects"
        assert row["wall s"] > 0, name
        assert row["pods/s"] > 0, name
        assert 0 < row["p50 job s"] <= row["p99 job s"] <= row["wall s"] + 1e-9, name
        assert row["ours ÷ this (wall)"] > 0, name
        assert row["ours ÷ this (p99)"] > 0, name
    assert contenders["colony-operator"]["ours ÷ this (wall)"] == pytest.approx(1.0)
    markdown = table.markdown()
    assert "colony-operator" in markdown and "ours ÷ this (wall)" in markdown
    assert any(note.startswith("target within 1.3x of the floor") for note in table.notes)
