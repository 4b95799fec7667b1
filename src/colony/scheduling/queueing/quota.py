"""Queue quotas: usage per queue and quota key, borrowing within a cohort, dominant shares.

Which keys a request of GPU type t in queue q is charged to and checked against ("its keys"): t if
q's nominal has t, ANY_GPU_TYPE if it has ANY_GPU_TYPE; if neither, t with a nominal of 0 (so every
GPU of t is borrowed). For each of its keys k a request of x GPUs fits when
* the cohort has x unused GPUs of k: cohort nominal - cohort usage >= x, where the cohort nominal
  sums the queues' nominal[k] and the cohort usage sums the usage of the queues whose keys include k
  (this is "the unused nominal of the cohort's queues, net of what is already borrowed from it"), and
* what q uses beyond its nominal stays within its borrowing_limit[k] (missing: unlimited).
A queue without a cohort is a cohort of its own, so it fits exactly when usage + x <= nominal.
Going beyond nominal on any key is borrowing. Quota is never exceeded beyond these limits: a queue
whose lent quota is in use gets it back by preemption (reclaim), not by overcommitting.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from itertools import accumulate

from colony.scheduling.queueing.model import ANY_GPU_TYPE, QueueQuota, RunningRequest, Value


class QuotaFit(Value):
    """The outcome of a quota check: ok (borrowing or not), or why not."""

    FIELDS = ("ok", "borrowed", "reason")

    def __init__(self, ok: bool, borrowed: bool = False, reason: str = "") -> None:
        self.ok = ok
        self.borrowed = borrowed
        self.reason = reason


FITS = QuotaFit(True)
BORROWS = QuotaFit(True, borrowed=True)


def key_label(key: str) -> str:
    """A quota key for messages."""
    return "GPUs (any type)" if key == ANY_GPU_TYPE else f"{key} GPUs"


class QuotaBook:
    """Usage of every queue and cohort, from the running requests, charged further as a pass admits."""

    def __init__(self, queues: Sequence[QueueQuota], running: Iterable[RunningRequest]) -> None:
        self.queues: dict[str, QueueQuota] = {}
        for q in queues:
            if q.name and q.name not in self.queues:  # a duplicate queue entry is ignored
                self.queues[q.name] = q
        self.cohort = {n: (q.cohort if q.cohort is not None else "\0" + n) for n, q in self.queues.items()}
        self.members: dict[str, list[str]] = {}
        for n in sorted(self.queues):
            self.members.setdefault(self.cohort[n], []).append(n)
        self.usage: dict[str, dict[str, int]] = {n: {} for n in self.queues}
        self.version = dict.fromkeys(self.queues, 0)
        self.cohort_nominal: dict[str, dict[str, int]] = {c: {} for c in self.members}
        for n, q in self.queues.items():
            nominal = self.cohort_nominal[self.cohort[n]]
            for k, v in q.nominal.items():
                nominal[k] = nominal.get(k, 0) + v
        self.cohort_usage: dict[str, dict[str, int]] = {c: {} for c in self.members}
        self.cohort_version = dict.fromkeys(self.members, 0)
        self._checked: dict[tuple[str, str, int], tuple[int, QuotaFit]] = {}
        self._shares: dict[str, tuple[int, float]] = {}
        self._keys: dict[tuple[str, str], tuple[str, ...]] = {}
        for r in running:
            if r.request.queue in self.queues:
                self.charge(r.request.queue, r.placement.gpu_type, r.request.gpus)

    def known(self, queue: str) -> bool:
        """Whether quota rules apply to the queue ("" never has quota)."""
        return queue in self.queues

    def keys(self, queue: str, gpu_type: str) -> tuple[str, ...]:
        """The quota keys a GPU of this type is charged to in this queue (see the module docstring)."""
        cached = self._keys.get((queue, gpu_type))
        if cached is not None:
            return cached
        nominal = self.queues[queue].nominal
        keys = tuple(k for k in (gpu_type, ANY_GPU_TYPE) if k in nominal) or (gpu_type,)
        self._keys[(queue, gpu_type)] = keys
        return keys

    def charge(self, queue: str, gpu_type: str, gpus: int) -> None:
        """Add usage (a running, admitted, provisioned or reserved request)."""
        if queue not in self.queues:
            return
        usage = self.usage[queue]
        cohort_usage = self.cohort_usage[self.cohort[queue]]
        for k in self.keys(queue, gpu_type):
            usage[k] = usage.get(k, 0) + gpus
            cohort_usage[k] = cohort_usage.get(k, 0) + gpus
        self.version[queue] += 1
        self.cohort_version[self.cohort[queue]] += 1

    def check(self, queue: str, gpu_type: str, gpus: int) -> QuotaFit:
        """Whether `gpus` more GPUs of the type fit the queue's quota now, and whether they borrow."""
        cohort = self.cohort.get(queue)
        if cohort is None:
            return FITS
        # many pending requests share a shape; usage of a queue only changes with its cohort's
        version = self.cohort_version[cohort]
        seen = self._checked.get((queue, gpu_type, gpus))
        if seen is not None and seen[0] == version:
            return seen[1]
        fit = self._check(queue, gpu_type, gpus, {}, {})
        self._checked[(queue, gpu_type, gpus)] = (version, fit)
        return fit

    def check_with(
        self, queue: str, gpu_type: str, gpus: int, own: dict[str, int], shared: dict[str, int]
    ) -> QuotaFit:
        """`check` as if `own` GPUs per key were no longer charged to the queue and `shared` ones to its
        cohort (what evicting some running requests would give back)."""
        if queue not in self.queues:
            return FITS
        return self._check(queue, gpu_type, gpus, own, shared)

    def _check(
        self, queue: str, gpu_type: str, gpus: int, own: dict[str, int], shared: dict[str, int]
    ) -> QuotaFit:
        q = self.queues[queue]
        usage = self.usage[queue]
        cohort = self.cohort[queue]
        cohort_nominal = self.cohort_nominal[cohort]
        cohort_usage = self.cohort_usage[cohort]
        borrowed = False
        for k in self.keys(queue, gpu_type):
            nominal = q.nominal.get(k, 0)
            used = usage.get(k, 0) - own.get(k, 0)
            unused = cohort_nominal.get(k, 0) - cohort_usage.get(k, 0) + shared.get(k, 0)
            if used + gpus > nominal:
                if q.cohort is None:
                    return QuotaFit(
                        False,
                        reason=f"quota: queue {queue!r} uses {used} of its {nominal} {key_label(k)}, "
                        f"{gpus} more do not fit",
                    )
                limit = q.borrowing_limit.get(k)
                if limit is not None and used + gpus - nominal > limit:
                    return QuotaFit(
                        False,
                        reason=f"quota: queue {queue!r} would borrow {used + gpus - nominal} {key_label(k)} "
                        f"beyond its nominal {nominal}, over its borrowing limit {limit}",
                    )
                borrowed = True
            if unused < gpus:
                if used + gpus <= nominal:
                    why = (
                        f"its {key_label(k)} are lent to other queues of cohort {q.cohort!r} (reclaim needed)"
                    )
                else:
                    why = f"cohort {q.cohort!r} has {max(0, unused)} {key_label(k)} to lend, needs {gpus}"
                return QuotaFit(False, reason=f"quota: queue {queue!r} uses {used} of {nominal}; {why}")
        return BORROWS if borrowed else FITS

    def lending_short(self, queue: str, gpu_type: str, gpus: int) -> bool:
        """Whether `gpus` more GPUs of the type stay within the queue's own limits (nominal, or its
        borrowing limit in a cohort): then only the cohort's unused quota is short, and it grows back
        as the cohort's running requests end."""
        q = self.queues.get(queue)
        if q is None:
            return False
        usage = self.usage[queue]
        for k in self.keys(queue, gpu_type):
            nominal = q.nominal.get(k, 0)
            used = usage.get(k, 0)
            if used + gpus > nominal:
                if q.cohort is None:
                    return False
                limit = q.borrowing_limit.get(k)
                if limit is not None and used + gpus - nominal > limit:
                    return False
        return True

    def never_fits(self, queue: str, gpu_type: str, gpus: int) -> str | None:
        """Why `gpus` GPUs of the type can never fit the queue's quota, even with nothing running."""
        if queue not in self.queues:
            return None
        q = self.queues[queue]
        cohort_nominal = self.cohort_nominal[self.cohort[queue]]
        for k in self.keys(queue, gpu_type):
            most = cohort_nominal.get(k, 0)
            limit = q.borrowing_limit.get(k)
            if limit is not None:
                most = min(most, q.nominal.get(k, 0) + limit)
            if gpus > most:
                return f"quota: queue {queue!r} can never get {gpus} {key_label(k)} (at most {most})"
        return None

    def within_nominal(self, queue: str, gpu_type: str, gpus: int) -> bool:
        """Whether the queue stays within its nominal quota with `gpus` more GPUs of the type."""
        if queue not in self.queues:
            return False
        q = self.queues[queue]
        usage = self.usage[queue]
        return all(usage.get(k, 0) + gpus <= q.nominal.get(k, 0) for k in self.keys(queue, gpu_type))

    def borrowing(self, queue: str) -> bool:
        """Whether the queue uses more than its nominal quota of some key."""
        if queue not in self.queues:
            return False
        nominal = self.queues[queue].nominal
        return any(u > nominal.get(k, 0) for k, u in self.usage[queue].items())

    def same_cohort(self, a: str, b: str) -> bool:
        """Whether two known queues share a cohort (a queue without one shares none)."""
        return a in self.queues and b in self.queues and self.cohort[a] == self.cohort[b]

    def share(self, queue: str, gpu_types: Sequence[str] = (), gpus: int = 0) -> float:
        """Weighted dominant share: max over the queue's keys of usage / nominal, divided by its weight;
        with `gpus` more GPUs of the best of `gpu_types` when given (the share it would have with them).

        A key with usage but no nominal counts as an infinite share; "" and unknown queues have 0.
        """
        q = self.queues.get(queue)
        if q is None:
            return 0.0
        usage = self.usage[queue]
        base = self._shares.get(queue)
        if base is None or base[0] != self.version[queue]:
            top = 0.0
            for k, used in usage.items():
                if used > 0:
                    nominal = q.nominal.get(k, 0)
                    top = max(top, used / nominal if nominal > 0 else math.inf)
            base = self._shares[queue] = (self.version[queue], top)
        top = base[1]
        if gpus > 0 and gpu_types:
            best = math.inf
            for t in gpu_types:
                with_them = top
                for k in self.keys(queue, t):
                    nominal = q.nominal.get(k, 0)
                    if nominal <= 0:
                        with_them = math.inf
                        break
                    with_them = max(with_them, (usage.get(k, 0) + gpus) / nominal)
                best = min(best, with_them)
            top = best
        if top == 0.0:
            return 0.0
        return top / q.weight if q.weight > 0 else math.inf


class QuotaForecast:
    """When quota frees up: the usage that the declared ends of running requests give back over time."""

    def __init__(self, book: QuotaBook, releases: Iterable[tuple[float, str, str, int]]) -> None:
        self.book = book
        own: dict[tuple[str, str], list[tuple[float, int]]] = {}
        shared: dict[tuple[str, str], list[tuple[float, int]]] = {}
        for end, queue, gpu_type, gpus in releases:
            if queue not in book.queues:
                continue
            for k in book.keys(queue, gpu_type):
                own.setdefault((queue, k), []).append((end, gpus))
                shared.setdefault((book.cohort[queue], k), []).append((end, gpus))
        self._own = {key: self._cumulative(v) for key, v in own.items()}
        self._shared = {key: self._cumulative(v) for key, v in shared.items()}

    @staticmethod
    def _cumulative(events: list[tuple[float, int]]) -> tuple[list[float], list[int]]:
        events.sort()
        return [t for t, _ in events], list(accumulate(g for _, g in events))

    @staticmethod
    def _when(series: tuple[list[float], list[int]] | None, need: int, now: float) -> float | None:
        if need <= 0:
            return now
        if series is None:
            return None
        times, total = series
        i = bisect_left(total, need)
        return times[i] if i < len(times) else None

    def earliest(self, queue: str, gpu_type: str, gpus: int, now: float) -> float | None:
        """The earliest time the queue's quota takes `gpus` GPUs of the type (None: not by known ends)."""
        book = self.book
        if queue not in book.queues:
            return now
        q = book.queues[queue]
        cohort = book.cohort[queue]
        usage = book.usage[queue]
        start = now
        for k in book.keys(queue, gpu_type):
            unused = book.cohort_nominal[cohort].get(k, 0) - book.cohort_usage[cohort].get(k, 0)
            when = self._when(self._shared.get((cohort, k)), gpus - unused, now)
            if when is None:
                return None
            start = max(start, when)
            limit = q.borrowing_limit.get(k) if q.cohort is not None else 0
            if limit is not None:
                over = usage.get(k, 0) + gpus - q.nominal.get(k, 0) - limit
                when = self._when(self._own.get((queue, k)), over, now)
                if when is None:
                    return None
                start = max(start, when)
        return start
