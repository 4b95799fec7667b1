"""The "sjf" queue order: strict shortest declared GPU time first, with aging.

For teams that declare durations (`exitDuration`). At each priority, across all queues (quotas still
apply; no fair-share interleave):

1. the requests that have waited `aging_s` or longer (aged), oldest first, then
2. the others by declared GPU time, `gpus x duration_s`, smallest first (unknown duration last), then
   (submitted_s, key).

Strict within a priority: on a GPU type where the first capacity-blocked request of a priority holds
its reservation (the head, as under "default"), no other request of that priority starts, even one
that EASY backfill would let through. Backfill lets a long, thin request start next to a blocked
head (it delays nobody now), but it then holds its GPUs while the short requests that arrive next
queue behind it: on the shipped traces that costs more wait than the idle GPUs it fills
(tiresias-60: 536 s average with EASY backfill against 375 s strict; philly-5vc: 5.7 d against
3.6 d). Requests of lower priorities backfill around a higher priority's head as under "default":
strict across priorities, one waiting high-priority gang idles the GPUs for every lower priority
(alibaba-openb, first 1,000 jobs: 0.44x FIFO's average wait instead of 2.9x). Requests blocked only
by their own queue's quota hold no reservation and block nobody, as under "default"; preemption of
evictable lower-priority requests and reclaim of lent quota work as under "default" on GPU types
without a reservation.

The aging bound: once a request has aged, only aged requests submitted before it (at its priority)
are served before it, and the head blocks everything behind it, so with exact declared durations it
starts at the latest after `aging_s + the longest running duration + the sum of the durations of the
requests submitted no later than it` (docs/gprs-and-queues.md; property-tested).

Pure functions only (mypyc-compiled with the rest of the core).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from colony.scheduling.queueing.model import GpuRequest

SJF_ORDER = "sjf"
"""The QueueOrder value of this policy."""


def gpu_time(r: GpuRequest) -> float:
    """Declared GPU time, gpus x duration_s (GPU-seconds); infinite without a declared duration."""
    if r.duration_s is None:
        return math.inf
    return r.nodes * r.gpus_per_node * max(r.duration_s, 0.0)


def sjf_rank(now_s: float, aging_s: float) -> Callable[[GpuRequest], tuple[int, float]]:
    """The sort key of the "sjf" order within a priority (stable sort after (submitted_s, key)):
    aged requests (waited `aging_s` or more at `now_s`) first by submission, then the others by
    declared GPU time, smallest first."""
    aged_before = now_s - aging_s

    def rank(r: GpuRequest) -> tuple[int, float]:
        if r.submitted_s <= aged_before:
            return (0, r.submitted_s)
        return (1, gpu_time(r))

    return rank
