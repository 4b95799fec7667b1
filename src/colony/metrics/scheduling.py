"""Queues and GPUs, as the GPR scheduling loop sees them on each pass."""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from prometheus_client import Gauge

QUEUE_PENDING = Gauge(
    "colony_queue_pending_requests",
    "GPRs waiting in a queue: a GPUQueue, or `namespace:<ns>` for a namespace no GPUQueue lists.",
    ["queue"],
)
QUEUE_ADMITTED = Gauge("colony_queue_admitted_requests", "GPRs holding GPUs, by queue.", ["queue"])
QUEUE_WAIT_MEDIAN = Gauge(
    "colony_queue_estimated_wait_median_seconds",
    "Median estimated wait of a queue's pending GPRs that have an estimate (0 when none).",
    ["queue"],
)
QUEUE_WAIT_MAX = Gauge(
    "colony_queue_estimated_wait_max_seconds",
    "Longest estimated wait of a queue's pending GPRs that have an estimate (0 when none).",
    ["queue"],
)
GPUS_ALLOCATED = Gauge(
    "colony_gpus_allocated",
    "GPUs on Ready schedulable nodes of a colony that are in use: reserved by GPRs or held by pods.",
    ["namespace", "colony", "gpu_type"],
)
GPUS_FREE = Gauge(
    "colony_gpus_free",
    "GPUs on Ready schedulable nodes of a colony that a GPR could get now.",
    ["namespace", "colony", "gpu_type"],
)


@dataclass(frozen=True)
class QueueStats:
    """One queue on one pass."""

    pending: int = 0
    admitted: int = 0
    waits: Sequence[float] = ()
    """Estimated wait (seconds) of each pending request that has an estimate."""


_queues: set[str] = set()
_colonies: set[tuple[str, str, str]] = set()


def record_queues(stats: Mapping[str, QueueStats]) -> None:
    """Export each queue's depth and estimated waits; drop the series of queues gone since."""
    for queue, stat in stats.items():
        QUEUE_PENDING.labels(queue).set(stat.pending)
        QUEUE_ADMITTED.labels(queue).set(stat.admitted)
        QUEUE_WAIT_MEDIAN.labels(queue).set(statistics.median(stat.waits) if stat.waits else 0.0)
        QUEUE_WAIT_MAX.labels(queue).set(max(stat.waits) if stat.waits else 0.0)
    for queue in _queues - set(stats):
        for gauge in (QUEUE_PENDING, QUEUE_ADMITTED, QUEUE_WAIT_MEDIAN, QUEUE_WAIT_MAX):
            with contextlib.suppress(KeyError):
                gauge.remove(queue)
    _queues.clear()
    _queues.update(stats)


def record_gpus(inventory: Mapping[tuple[str, str, str], tuple[int, int]]) -> None:
    """Export (allocated, free) GPUs by (namespace, colony, GPU type) of the colonies the pass read;
    drop the series of colonies it did not read."""
    for labels, (allocated, free) in inventory.items():
        GPUS_ALLOCATED.labels(*labels).set(allocated)
        GPUS_FREE.labels(*labels).set(free)
    _forget_gpus(_colonies - set(inventory))
    _colonies.clear()
    _colonies.update(inventory)


def forget_colony_gpus(namespace: str, colony: str) -> None:
    """Drop a deleted colony's GPU series."""
    gone = {labels for labels in _colonies if labels[:2] == (namespace, colony)}
    _forget_gpus(gone)
    _colonies.difference_update(gone)


def _forget_gpus(labels: set[tuple[str, str, str]]) -> None:
    for key in labels:
        for gauge in (GPUS_ALLOCATED, GPUS_FREE):
            with contextlib.suppress(KeyError):
                gauge.remove(*key)
