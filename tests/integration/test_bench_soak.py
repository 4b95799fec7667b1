"""The soak benchmark (bench/soak.py) still works: its verdict on made-up samples, and a tiny run
(a few churn cycles) against its own clusters and operator that returns a sane table. Flatness is
not asserted on the tiny run: half a minute proves the benchmark works, not the operator."""

from __future__ import annotations

import pytest
from bench import soak
from bench.__main__ import BENCHMARKS, ON_DEMAND
from bench.soak import Sample, verdict

from colony.devenv.tools import Tools

pytestmark = pytest.mark.integration


def test_verdict_tells_flat_from_growing() -> None:
    flat = [Sample(t, 40 + t % 2, 12, 150.0 + (t % 3)) for t in range(50)]
    assert all(row["flat"] for row in verdict(flat))
    leaking = [Sample(t, 40 + t, 12 + t // 5, 150.0 + t) for t in range(50)]
    rows = {row["resource"]: row for row in verdict(leaking)}
    assert not rows["open files"]["flat"] and not rows["threads"]["flat"] and not rows["RSS MiB"]["flat"]
    assert rows["open files"]["growth"] == rows["open files"]["end"] - rows["open files"]["start"] > 5
    with pytest.raises(ValueError, match="run longer"):
        verdict(flat[:3])


def test_soak_is_a_bench_entry_run_only_on_demand() -> None:
    assert BENCHMARKS["soak"] == "bench.soak" and "soak" in ON_DEMAND
    assert BENCHMARKS["storm"] == "bench.storm" and "storm" not in ON_DEMAND


@pytest.mark.timeout(300)
def test_tiny_soak_reports_files_threads_and_memory(tools: Tools, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLONY_SOAK_MINUTES", "0.4")
    (table,) = soak.run("tiny")
    assert table.benchmark == "soak" and table.markdown().startswith("### ")
    rows = {row["resource"]: row for row in table.rows}
    assert set(rows) == {"open files", "threads", "RSS MiB"}
    assert 5 < rows["open files"]["start"] < 1000 and 1 <= rows["threads"]["start"] < 200
    assert 30 < rows["RSS MiB"]["start"] < 1024  # MiB: a Python process with kopf loaded
    assert all(isinstance(row["flat"], bool) for row in rows.values())
    assert "churn cycles" in table.notes[0] and ("FLAT" in table.notes[1] or "GROWING" in table.notes[1])
