"""The benchmark suite runs end to end at its tiny size (so no benchmark rots) and stores its results.

Only the benchmarks without a test of their own run here: launch, admission and memory have
tests/integration/test_bench_{launch,admission,memory}.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from colony.devenv.tools import repo_root

pytestmark = pytest.mark.integration


def test_tiny_suite_prints_tables_and_stores_results(tmp_path: Path) -> None:
    names = ["scheduler", "quality", "teardown"]
    command = [sys.executable, "-m", "bench", "--size", "tiny", "--results-dir", str(tmp_path)]
    for name in names:
        command += ["--only", name]
    result = subprocess.run(command, cwd=repo_root(), capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "machine: " in result.stdout and "| pending | colonies |" in result.stdout
    (stored,) = tmp_path.glob("*.json")
    document = json.loads(stored.read_text())
    assert document["size"] == "tiny" and document["errors"] == {}
    assert document["machine"]["cores"] >= 1 and document["machine"]["memory_gib"] > 0
    tables = {table["benchmark"]: table for table in document["tables"]}
    assert sorted(tables) == sorted(names)

    (scheduler,) = tables["scheduler"]["rows"]
    assert scheduler["pending"] == 1000 and scheduler["admitted"] > 0
    assert scheduler["pure ms"] > 0 and scheduler["compiled ms"] > 0

    quality = {row["policy"]: row for row in tables["quality"]["rows"]}
    assert set(quality) == {"fifo", "priority", "default", "shortest", "sjf"}
    assert quality["default"]["avg wait s"] < quality["fifo"]["avg wait s"]
    assert quality["sjf"]["avg wait s"] < quality["fifo"]["avg wait s"]
    assert quality["fifo"]["wait vs FIFO"] == "1.00x"

    operator, baseline = tables["teardown"]["rows"]
    assert operator["n"] == 3 and baseline["n"] == 3
    assert baseline["p50 s"] > 0 and 0 < operator["p50 s"] <= operator["p99 s"]
