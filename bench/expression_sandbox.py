"""Benchmark: what bounding user jq expressions costs placement's hot path.

N PyTorchJobs (the vendored imagenet example, each its own uid) are read through the built-in
definition three ways, side by side in one run:

- in process: `compute_demand` + `pod_template_paths` per object (what placement did before the
  expressions were bounded; unbounded, on the event loop);
- sandbox, cold: `ExpressionSandbox.read_objects` on all N in one batch (worker already started):
  a pass in which every object is new or changed;
- sandbox, warm: the same call again (every object unchanged): a steady-state pass.

    .venv/bin/python -m bench.expression_sandbox [--size tiny|quick|full]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import Any

import yaml

from bench.report import Table
from colony.workloads.definition import WorkloadDefinition, load_builtin_definitions
from colony.workloads.demand import compute_demand
from colony.workloads.pinning import pod_template_paths, strip_for_copy
from colony.workloads.sandbox import ExpressionSandbox

SIZES = {"tiny": 20, "quick": 500, "full": 5000}
EXAMPLE = Path(__file__).resolve().parents[1] / "tests/data/upstream-examples/pytorchjob/imagenet.yaml"


def _objects(count: int) -> list[dict[str, Any]]:
    documents = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    (job,) = [d for d in documents if d.get("kind") == "PyTorchJob"]
    found = []
    for i in range(count):
        obj = yaml.safe_load(yaml.safe_dump(job))
        obj["metadata"].update(name=f"job-{i}", namespace="team", uid=f"uid-{i}-{count}", resourceVersion="1")
        found.append(obj)
    return found


def _definition() -> WorkloadDefinition:
    return next(d for d in load_builtin_definitions() if d.kind == "PyTorchJob")


async def _measure(count: int) -> dict[str, float]:
    definition, objects = _definition(), _objects(count)
    started = time.perf_counter()
    for obj in objects:
        compute_demand(definition, obj)
        pod_template_paths(definition, strip_for_copy(obj))
    in_process = time.perf_counter() - started
    sandbox = ExpressionSandbox()
    try:
        await sandbox.read_objects([(definition, _objects(1)[0])])  # the worker starts (not timed)
        pairs = [(definition, obj) for obj in objects]
        started = time.perf_counter()
        await sandbox.read_objects(pairs)
        cold = time.perf_counter() - started
        started = time.perf_counter()
        await sandbox.read_objects(pairs)
        warm = time.perf_counter() - started
    finally:
        await sandbox.close()
    return {"in_process": in_process, "cold": cold, "warm": warm}


def run(size: str) -> list[Table]:
    """One table: per-object cost of each way, and the ratios to the in-process baseline."""
    count = SIZES[size]
    found = asyncio.run(_measure(count))
    rows = [
        {
            "way": way,
            "objects": count,
            "total ms": found[key] * 1000,
            "µs per object": found[key] / count * 1e6,
            "x in process": found[key] / found["in_process"],
        }
        for way, key in (
            ("in process (unbounded, on the event loop)", "in_process"),
            ("sandbox, every object new (one batch)", "cold"),
            ("sandbox, every object unchanged (cache)", "warm"),
        )
    ]
    notes = [
        "cold: pickling to the worker, evaluating there, one answer frame per object; the event loop "
        "only waits meanwhile (the evaluation itself runs in the other process)",
        "warm: a dictionary lookup per object by (definition digest, uid, resourceVersion)",
    ]
    columns = ["way", "objects", "total ms", "µs per object", "x in process"]
    title = "Bounded jq expressions: placement's reading of objects"
    return [Table("expressions", title, columns, rows, notes)]


def main() -> None:
    """Print the table for --size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=list(SIZES), default="quick")
    args = parser.parse_args()
    for table in run(args.size):
        print(table.markdown())


if __name__ == "__main__":
    main()
