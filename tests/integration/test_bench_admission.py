"""bench/kueue_admission.py at its tiny size: the benchmark still runs end to end against real API
servers and the operator process, and its table is well formed and sane (every request admitted and
finished, an average time to admission per class, no queue or cohort ever beyond its quota)."""

from __future__ import annotations

from typing import Any

import pytest
from bench.kueue_admission import BENCHMARK, SCALES, lower_bound_s, run, total_workloads
from bench.report import Table


@pytest.fixture(scope="module")
def tables() -> list[Table]:
    return run("tiny")


def _row(table: Table, prefix: str) -> dict[str, Any]:
    return next(row for row in table.rows if str(row["system"]).startswith(prefix))


def test_tables_are_well_formed(tables: list[Table]) -> None:
    assert tables and all(t.benchmark == BENCHMARK for t in tables)
    for table in tables:
        assert table.rows and table.title
        for row in table.rows:
            assert set(row) <= set(table.columns), set(row) - set(table.columns)
        markdown = table.markdown()
        assert markdown.startswith(f"### {table.title}") and markdown.count("\n|") >= len(table.rows) + 1


def test_every_request_is_admitted_and_finished_within_quota(tables: list[Table]) -> None:
    scale = SCALES["tiny"]
    ours = _row(tables[0], "colony-operator")
    assert ours["workloads"] == ours["finished"] == total_workloads(scale)
    for klass in scale.classes:
        assert ours[f"admit_{klass.name}_s"] is not None and ours[f"admit_{klass.name}_s"] >= 0
    assert 0 < ours["peak_queue_gpus"] <= scale.nominal + scale.borrowing_limit
    assert 0 < ours["peak_cohort_pct"] <= 100
    assert 0 < ours["cq_usage_pct"] <= 100
    bound, _, _ = lower_bound_s(scale)
    assert ours["wall_s"] >= bound * 0.95  # nothing finishes faster than the work allows
    assert ours["maxrss_mib"] and ours["cpu_s"]


def test_kueue_is_compared_measured_or_published(tables: list[Table]) -> None:
    table = tables[0]
    systems = [str(row["system"]) for row in table.rows]
    assert any(s.startswith("Kueue published") for s in systems)
    assert any(s.startswith("lower bound") for s in systems)
    measured = [row for row in table.rows if "measured here" in str(row["system"])]
    if measured:
        (kueue,) = measured
        assert kueue["finished"] == total_workloads(SCALES["tiny"]) and kueue["wall_s"] > 0
    else:
        assert any(note.startswith("Kueue not run") or "did not run" in note for note in table.notes)
