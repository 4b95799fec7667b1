"""The benchmark suite: `python -m bench [--size tiny|quick|full] [--only NAME ...]`.

Runs each benchmark module's `run(size)`, prints one markdown table per benchmark with the machine
it ran on, and stores everything in bench/results/<date>.json. `make bench` runs the full size,
`make bench-quick` the quick one; the tests run the tiny one so no benchmark can rot. Exits 1 when
a benchmark failed (its error is in the JSON and on stderr; the others still run).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback
from pathlib import Path

from bench.report import RESULTS_DIR, SIZES, Table, machine, write_results

# benchmark name -> module; in the order they run (the control-plane benchmarks last).
BENCHMARKS = {
    "scheduler": "bench.scheduler_scale",
    "quality": "bench.scheduling_quality",
    "teardown": "bench.teardown_latency",
    "launch": "bench.launch_throughput",
    "admission": "bench.kueue_admission",
    "memory": "bench.operator_memory",
    "storm": "bench.storm",
    "soak": "bench.soak",
}
ON_DEMAND = ("soak",)
"""Run only when named with --only (the soak runs for half an hour at full size)."""


def run_suite(size: str, names: list[str], results_dir: Path = RESULTS_DIR) -> tuple[Path, dict[str, str]]:
    """Run the named benchmarks at `size`, print their tables, store the results; (file, errors)."""
    tables: list[Table] = []
    errors: dict[str, str] = {}
    for name in names:
        started = time.monotonic()
        print(f"## {name} ({size})", flush=True)
        try:
            produced = importlib.import_module(BENCHMARKS[name]).run(size)
        except Exception as error:  # one broken benchmark must not hide the others
            traceback.print_exc()
            errors[name] = f"{type(error).__name__}: {error}"
            continue
        for table in produced:
            print(table.markdown(), flush=True)
        print(f"({name}: {time.monotonic() - started:.0f} s)\n", flush=True)
        tables += produced
    return write_results(size, tables, errors, results_dir), errors


def main() -> int:
    """Parse the arguments, run the suite, report where the results went."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="quick")
    parser.add_argument("--only", choices=list(BENCHMARKS), action="append", help="repeatable")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args()
    info = machine()
    print(f"machine: {info['cores']} cores, {info['memory_gib']} GiB, {info['cpu']}, Python {info['python']}")
    names = args.only or [name for name in BENCHMARKS if name not in ON_DEMAND]
    path, errors = run_suite(args.size, names, args.results_dir)
    print(f"results: {path}")
    for name, error in errors.items():
        print(f"FAILED {name}: {error}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
