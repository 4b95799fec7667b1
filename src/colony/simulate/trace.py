"""Load GPU job traces in the canonical CSV format.

Columns (header required, any order, extra columns ignored):
`job_id,tenant,submit_time_s,gpus,gpu_type,duration_s,priority,evictable`; times in seconds,
`gpus` is a gang (all at once), `gpu_type` empty = any, `priority` higher is more important,
`evictable` 1/0 (true/false also accepted).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

COLUMNS = ("job_id", "tenant", "submit_time_s", "gpus", "gpu_type", "duration_s", "priority", "evictable")

_TRUE = frozenset({"1", "true", "yes"})
_FALSE = frozenset({"0", "false", "no", ""})


class TraceError(ValueError):
    """A trace file that cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class TraceJob:
    """One job of a trace."""

    job_id: str
    tenant: str
    submit_time_s: float
    gpus: int
    gpu_type: str
    """GPU type the duration refers to; "" = any."""
    duration_s: float
    priority: int = 0
    evictable: bool = False


def load_trace(path: Path, limit: int | None = None) -> tuple[TraceJob, ...]:
    """The jobs of the CSV trace at `path` in submission order (stable), the first `limit` if given."""
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            return parse_trace(handle, source=str(path), limit=limit)
    except OSError as error:
        raise TraceError(f"{path}: cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise TraceError(f"{path}: not UTF-8 text: {error.reason}") from None


def parse_trace(
    lines: Iterable[str], source: str = "<trace>", limit: int | None = None
) -> tuple[TraceJob, ...]:
    """Parse canonical trace CSV text; raise TraceError naming `source` and the line of a bad row."""
    if limit is not None and limit < 0:
        raise ValueError("limit must be >= 0")
    reader = csv.DictReader(lines)
    header = reader.fieldnames
    if header is None:
        raise TraceError(f"{source}: empty file, expected the header {','.join(COLUMNS)}")
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise TraceError(f"{source}:1: header lacks column(s) {', '.join(missing)}")
    jobs: list[TraceJob] = []
    seen: dict[str, int] = {}
    for row in reader:
        line = reader.line_num
        if None in row or any(row.get(c) is None for c in COLUMNS):
            raise TraceError(f"{source}:{line}: expected {len(header)} fields")
        job = _job(row, f"{source}:{line}")
        if job.job_id in seen:
            first = seen[job.job_id]
            raise TraceError(f"{source}:{line}: duplicate job_id {job.job_id!r} (first on line {first})")
        seen[job.job_id] = line
        jobs.append(job)
    jobs.sort(key=lambda j: j.submit_time_s)
    return tuple(jobs if limit is None else jobs[:limit])


def _job(row: dict[str, str], where: str) -> TraceJob:
    job_id = row["job_id"].strip()
    tenant = row["tenant"].strip()
    if not job_id:
        raise TraceError(f"{where}: empty job_id")
    if not tenant:
        raise TraceError(f"{where}: empty tenant")
    gpus = _int(row, "gpus", where)
    if gpus < 1:
        raise TraceError(f"{where}: gpus must be >= 1, got {gpus}")
    submit = _seconds(row, "submit_time_s", where)
    duration = _seconds(row, "duration_s", where)
    evictable = row["evictable"].strip().lower()
    if evictable not in _TRUE | _FALSE:
        raise TraceError(f"{where}: evictable must be 0 or 1, got {row['evictable']!r}")
    return TraceJob(
        job_id=job_id,
        tenant=tenant,
        submit_time_s=submit,
        gpus=gpus,
        gpu_type=row["gpu_type"].strip(),
        duration_s=duration,
        priority=_int(row, "priority", where) if row["priority"].strip() else 0,
        evictable=evictable in _TRUE,
    )


def _int(row: dict[str, str], column: str, where: str) -> int:
    try:
        return int(row[column].strip())
    except ValueError:
        raise TraceError(f"{where}: {column} must be an integer, got {row[column]!r}") from None


def _seconds(row: dict[str, str], column: str, where: str) -> float:
    try:
        value = float(row[column].strip())
    except ValueError:
        raise TraceError(f"{where}: {column} must be a number of seconds, got {row[column]!r}") from None
    if not math.isfinite(value) or value < 0:
        raise TraceError(f"{where}: {column} must be finite and >= 0, got {row[column]!r}")
    return value


def tile(jobs: Sequence[TraceJob], total: int, gap_s: float = 86400.0) -> tuple[TraceJob, ...]:
    """`total` jobs made of back-to-back copies of `jobs` (deterministic): copy k is the trace shifted
    by k x (its submission span + `gap_s`), its job ids suffixed `#k` (copy 0 keeps them), tenants
    and everything else unchanged; the last copy is cut at `total`. Same load, a longer history:
    e.g. philly-5vc (3,492 jobs) tiled to 10,000 is a 10k-job Philly-style trace."""
    if total < 0:
        raise ValueError("total must be >= 0")
    ordered = sorted(jobs, key=lambda j: j.submit_time_s)
    if not ordered:
        return ()
    first = ordered[0].submit_time_s
    period = ordered[-1].submit_time_s - first + gap_s
    out: list[TraceJob] = []
    k = 0
    while len(out) < total:
        for job in ordered:
            if len(out) == total:
                break
            out.append(
                replace(
                    job,
                    job_id=job.job_id if k == 0 else f"{job.job_id}#{k}",
                    submit_time_s=job.submit_time_s + k * period,
                )
            )
        k += 1
    return tuple(out)


def _number(seconds: float) -> str:
    """Seconds as written to a trace: integers without a fraction, others exactly (round trip)."""
    return str(int(seconds)) if seconds.is_integer() else repr(seconds)


def write_trace(jobs: Iterable[TraceJob], handle: TextIO) -> None:
    """Write jobs as canonical trace CSV (the COLUMNS, a header first)."""
    writer = csv.writer(handle, lineterminator="\n")
    writer.writerow(COLUMNS)
    for j in jobs:
        writer.writerow(
            [
                j.job_id,
                j.tenant,
                _number(j.submit_time_s),
                j.gpus,
                j.gpu_type,
                _number(j.duration_s),
                j.priority,
                int(j.evictable),
            ]
        )
