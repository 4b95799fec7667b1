"""The memory benchmark (bench/operator_memory.py) still runs: at its tiny size (100 GPRs + 20
DDPJobs, 30 s of churn) against its own clusters and operator, it returns well-formed tables with
sane figures. Targets are not asserted here: the tiny size only proves the benchmark works."""

from __future__ import annotations

import math

import pytest
from bench import operator_memory
from bench.operator_memory import Sample, Trend, fit_trend, is_trend
from bench.report import Table

from colony.devenv.tools import Tools


def test_fit_trend_finds_a_slope_and_ignores_noise() -> None:
    growing = [Sample(t, "churn", 100 + t / 60, 0.0) for t in range(0, 600, 5)]  # 1 MiB a minute
    trend = fit_trend(growing)
    assert trend.slope_mib_per_h == pytest.approx(60) and math.isinf(trend.t_stat)
    assert is_trend(trend, 1800)
    flat = [Sample(t, "churn", 100 + (0.5 if t % 10 else -0.5), 0.0) for t in range(0, 600, 5)]
    assert not is_trend(fit_trend(flat), 1800)
    assert not is_trend(Trend(60.0, 10.0, 200.0, 100), 60)  # 1 MiB in a minute is not 5 % of 200


@pytest.mark.timeout(240)
def test_tiny_run_gives_sane_tables(tools: Tools) -> None:
    tables = operator_memory.run("tiny")
    assert [t.benchmark for t in tables] == ["memory"] * 3
    for table in tables:
        assert isinstance(table, Table) and table.rows
        assert all(set(row) <= set(table.columns) for row in table.rows)
        assert table.markdown().startswith("### ")
    summary, phases, churn = tables
    values = {row["metric"]: row["value"] for row in summary.rows}
    baseline = values["baseline RSS (idle, in-run)"]
    assert 30 < baseline < 1024  # MiB: a Python process with kopf loaded
    assert values["RSS after load"] >= 0.9 * baseline
    assert values["peak RSS (any phase)"] >= values["RSS after load"]
    by_phase = {row["phase"]: row for row in phases.rows}
    assert all(row["samples"] > 0 and row["RSS MiB (median)"] > 0 for row in by_phase.values())
    assert by_phase["loaded, settled"]["GPRs"] == 100 and by_phase["loaded, settled"]["DDPJobs"] == 20
    assert not any("NOT fully processed" in note for note in phases.notes), phases.notes
    (row,) = churn.rows
    assert "slope MiB/h (2nd half)" in churn.columns and isinstance(row["slope MiB/h (2nd half)"], float)
    assert row["churn min"] == pytest.approx(0.5, abs=0.1) and row["RSS end MiB"] > 0
