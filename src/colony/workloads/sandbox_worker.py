"""The worker process that evaluates WorkloadDefinition expressions for the operator.

jq runs in C and holds the GIL for as long as an evaluation runs, so a user's `def f: f; f` in the
operator's own process would freeze its event loop (every controller, the liveness probe) for good:
a thread cannot be stopped either. The operator therefore evaluates every user expression here, in a
child process it kills when an answer is late (`colony.workloads.sandbox`). This process limits its
own address space (`COLONY_EXPRESSION_MEMORY_MB`), and each evaluation its output (jqexpr bounds).

Started as `python -c "from colony.workloads.sandbox_worker import main; main()"`.
Protocol (stdin/stdout, frames of a 4-byte big-endian length and a pickle, both ends this package):
the parent sends a batch `{"define": {key: WorkloadDefinition}, "items": [(op, key, payload)]}`;
the worker answers `"ack"`, then one `(ok, value)` per item in order, so the parent always knows
which item it is waiting for. Ops: `check` (one expression of a definition being admitted), `read`
(demand and pod template paths of an object), `phase` (standard phase of a copy).
"""

from __future__ import annotations

import os
import pickle
import resource
import struct
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

from colony.workloads import jqexpr
from colony.workloads.definition import (
    EvaluationError,
    WorkloadDefinition,
    expression_problem,
)
from colony.workloads.demand import DemandError, WorkloadDemand, compute_demand
from colony.workloads.pinning import pod_template_paths, strip_for_copy
from colony.workloads.status import workload_phase

HEADER = struct.Struct(">I")
"""Frame header: the length of the pickle that follows."""
MEMORY_ENV = "COLONY_EXPRESSION_MEMORY_MB"
DEFAULT_MEMORY_MB = 256
"""Address space of the worker (it needs about 60 MiB itself); jq fails or the worker dies past it."""

Request = tuple[str, str | None, Any]
"""(op, definition key or None, payload)."""
Answer = tuple[bool, Any]
"""(True, value) or (False, message)."""


@dataclass(frozen=True)
class ObjectReading:
    """What placement needs from an object through its definition; an error instead of each part
    that could not be computed."""

    demand: WorkloadDemand | None = None
    demand_error: str | None = None
    template_paths: tuple[tuple[jqexpr.PathKey, ...], ...] | None = None
    paths_error: str | None = None

    @classmethod
    def failed(cls, message: str) -> ObjectReading:
        """A reading where both parts failed for the same reason."""
        return cls(demand_error=message, paths_error=message)


@dataclass(frozen=True)
class PhaseReading:
    """The standard phase of an object (a copy in a colony), or why it could not be told."""

    phase: str | None = None
    error: str | None = None


def probe_inputs(definition: WorkloadDefinition) -> list[Any]:
    """Inputs every expression of a definition is tried on before it is accepted: null, an empty
    object, and an object of the described kind with an empty spec and status."""
    sample = {
        "apiVersion": definition.api_version,
        "kind": definition.kind,
        "metadata": {"name": "probe", "namespace": "probe", "uid": "probe", "generation": 1},
        "spec": {},
        "status": {},
    }
    return [None, {}, sample]


def check_expression(field: str, expression: str, needs_path: bool, probes: Sequence[Any]) -> str | None:
    """Why an expression is unusable, or None: it must compile, be a path expression where one is
    needed, and stay within the output bounds on every probe input (runtime errors there are fine:
    they depend on the object). The caller bounds the time."""
    problem = expression_problem(field, expression, needs_path)
    if problem is not None:
        return problem
    for probe in probes:
        try:
            jqexpr.evaluate_all(expression, probe)
        except jqexpr.OutputTooLarge:
            return (
                f"{field}: jq expression {expression!r} yields more than {jqexpr.MAX_OUTPUTS} results "
                f"or {jqexpr.MAX_OUTPUT_BYTES} bytes on a probe input"
            )
        except jqexpr.JqError:
            continue
    return None


def read_object(definition: WorkloadDefinition, obj: Mapping[str, Any]) -> ObjectReading:
    """Demand of an object and the paths of the pod templates of its copy (stripped, as pinned)."""
    demand = demand_error = paths = paths_error = None
    try:
        demand = compute_demand(definition, obj)
    except DemandError as error:
        demand_error = str(error)
    try:
        paths = tuple(tuple(p) for p in pod_template_paths(definition, strip_for_copy(obj)))
    except EvaluationError as error:
        paths_error = str(error)
    return ObjectReading(demand, demand_error, paths, paths_error)


def read_phase(definition: WorkloadDefinition, obj: Mapping[str, Any]) -> PhaseReading:
    """The standard phase of an object, or the error that prevented telling it."""
    try:
        return PhaseReading(phase=str(workload_phase(definition, obj)))
    except EvaluationError as error:
        return PhaseReading(error=str(error))


class Worker:
    """The definitions received so far and the ops on them."""

    def __init__(self) -> None:
        self.definitions: dict[str, WorkloadDefinition] = {}

    def answer(self, request: Request) -> Answer:
        """One item's answer; errors are answers too (the worker keeps running)."""
        op, key, payload = request
        try:
            if op == "check":
                return True, check_expression(*payload)
            definition = self.definitions.get(key or "")
            if definition is None:
                return False, f"unknown definition {key!r}"
            if op == "read":
                return True, read_object(definition, payload)
            if op == "phase":
                return True, read_phase(definition, payload)
            return False, f"unknown op {op!r}"
        except (jqexpr.JqError, RecursionError, MemoryError, ValueError, TypeError) as error:
            return False, f"{type(error).__name__}: {error}"


def read_frame(stream: BinaryIO) -> Any:
    """The next frame's value; EOFError at the end of the stream."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        raise EOFError
    (length,) = HEADER.unpack(header)
    data = stream.read(length)
    if len(data) < length:
        raise EOFError
    return pickle.loads(data)


def frame(value: Any) -> bytes:
    """One frame holding `value`."""
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data


def limit_memory(megabytes: int) -> None:
    """Cap this process's address space (RLIMIT_AS)."""
    limit = megabytes * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def main() -> None:
    """Serve batches from stdin until it closes."""
    limit_memory(int(os.environ.get(MEMORY_ENV) or DEFAULT_MEMORY_MB))
    sys.setrecursionlimit(10_000)
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    worker = Worker()
    while True:
        try:
            batch = read_frame(source)
        except EOFError:
            return
        worker.definitions.update(batch.get("define") or {})
        sink.write(frame("ack"))
        sink.flush()
        for request in batch["items"]:
            sink.write(frame(worker.answer(request)))
            sink.flush()


if __name__ == "__main__":
    main()
