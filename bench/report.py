"""What every benchmark returns and how the suite prints and stores it.

A benchmark module in `bench/` exposes `run(size: str) -> list[Table]`, where size is one of
SIZES: `tiny` (CI: seconds, only proves the benchmark still runs), `quick` (`make bench-quick`:
a few minutes in all) or `full` (`make bench`: the sizes the issue names). Each Table carries its
own baseline rows or ratio columns measured in the same run, so a figure is never compared with
one taken on another machine.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SIZES = ("tiny", "quick", "full")
RESULTS_DIR = Path(__file__).resolve().parent / "results"


@dataclass
class Table:
    """One result table: `rows` are dicts keyed by `columns`; `notes` say what was compared, what
    the baseline is and where a target was missed and why."""

    benchmark: str
    title: str
    columns: list[str]
    rows: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    targets: dict[str, Any] = field(default_factory=dict)

    def markdown(self) -> str:
        """The table as GitHub markdown, with its title as a heading and the notes below."""
        lines = [f"### {self.title}", "", "| " + " | ".join(self.columns) + " |"]
        lines.append("|" + "---|" * len(self.columns))
        for row in self.rows:
            lines.append("| " + " | ".join(format_cell(row.get(c, "")) for c in self.columns) + " |")
        lines += [""] + [f"- {note}" for note in self.notes]
        return "\n".join(lines).rstrip() + "\n"


def format_cell(value: Any) -> str:
    """Numbers with thousands separators and sensible decimals; anything else as text."""
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value >= 100:
            return f"{value:,.0f}"
        if value >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return str(value)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(sorted(values), n=100, method="inclusive")[max(0, min(98, round(q) - 1))]


def machine() -> dict[str, Any]:
    """The machine the figures come from: cores, memory, CPU model, OS, Python."""
    memory_gib = 0.0
    cpu_model = platform.processor()
    try:
        meminfo = Path("/proc/meminfo").read_text()
        memory_gib = int(meminfo.split("MemTotal:")[1].split()[0]) / 1024 / 1024
        cpuinfo = Path("/proc/cpuinfo").read_text()
        cpu_model = next(
            (line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")),
            cpu_model,
        )
    except (OSError, IndexError):
        pass
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(memory_gib, 1),
        "cpu": cpu_model,
        "os": platform.platform(),
        "python": sys.version.split()[0],
    }


def write_results(
    size: str, tables: list[Table], errors: dict[str, str], directory: Path = RESULTS_DIR
) -> Path:
    """Store one run as `<directory>/<date>.json` (a second run the same day gets a time suffix)."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC)
    path = directory / f"{now:%Y-%m-%d}.json"
    if path.exists():
        path = directory / f"{now:%Y-%m-%d-%H%M%S}.json"
    document = {
        "date": now.isoformat(timespec="seconds"),
        "size": size,
        "machine": machine(),
        "tables": [asdict(table) for table in tables],
        "errors": errors,
    }
    path.write_text(json.dumps(document, indent=2, default=str) + "\n")
    return path
