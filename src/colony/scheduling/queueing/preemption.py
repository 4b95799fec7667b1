"""Choosing running requests to evict so that a blocked request fits (capacity and quota).

Candidates are evictable running requests not already chosen in this pass, either of lower priority
than the preemptor, or (reclaim) in another queue of its cohort that borrows while the preemptor's
queue stays within its nominal quota. Per GPU type, they are taken lowest priority first, then most
recently started, as few as possible: the shortest such prefix that makes the preemptor fit (gang
placement and quota), then without any victim it can do without (Kueue's approach). Among types, the
plan whose highest victim priority is lowest wins, then the one with fewer victims.

Aging ("default", "shortest"; ordering.effective_priority): who may preempt is still decided by
declared priorities, but a running request that has aged (its effective priority, counted from its
submission as for a request back in the queue, is above its declared one) to the preemptor's
effective priority or higher is evicted neither for priority nor for reclaim: back in the queue it
would be served before the preemptor and take its GPUs again (aging undone, or evictions in a loop).
Victims are ranked by effective priority.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, islice
from typing import TypeVar

from colony.scheduling.queueing.capacity import CapacityIndex, NodeId
from colony.scheduling.queueing.model import GpuRequest, Placement, RunningRequest
from colony.scheduling.queueing.ordering import Level
from colony.scheduling.queueing.quota import QuotaBook

K = TypeVar("K")

MAX_CANDIDATES = 256
"""Victims considered per preemptor and GPU type (the lowest-ranked ones), to bound a pass's work."""


@dataclass(frozen=True)
class Plan:
    """Victims to evict and where the preemptor will run once they are gone."""

    victims: tuple[RunningRequest, ...]
    placement: Placement
    freed: dict[NodeId, int]
    """GPUs the victims free on each node of the preemptor's GPU type."""

    def take(self) -> list[tuple[str, int]]:
        """GPUs of each placement node that are free now (not the victims'): the preemptor reserves them."""
        colony = self.placement.colony
        out = []
        for a in self.placement.nodes:
            rest = a.gpus - self.freed.get((colony, a.node), 0)
            if rest > 0:
                out.append((a.node, rest))
        return out


def _declared(r: GpuRequest) -> int:
    return r.priority


class _Below:
    """GPUs of some evictable running requests by priority: how many are below a priority (an upper
    bound on what evicting for a request of that priority can free), and how many borrowers hold."""

    def __init__(self, items: list[tuple[int, int]], borrowed: int) -> None:
        items.sort()
        self._priorities = [p for p, _ in items]
        self._total = list(accumulate(g for _, g in items))
        self.borrowed = borrowed

    def below(self, priority: int) -> int:
        i = bisect_left(self._priorities, priority)
        return self._total[i - 1] if i else 0


class Preemptor:
    """Victim search over the running requests of a snapshot, remembering who is already evicted."""

    def __init__(
        self,
        running: Sequence[RunningRequest],
        cap: CapacityIndex,
        book: QuotaBook,
        effective: Level | None = None,
    ) -> None:
        self.cap = cap
        self.effective: Level = effective or _declared
        """Effective priority of a request (ordering.effective_priority; default: the declared one)."""
        self._ranks: dict[str, int] = {}
        """Per running key, its effective priority."""
        self.book = book
        self._running = running
        self._evictable = any(r.request.evictable for r in running)
        self._indexed = False
        self.borrowers = {q for q in book.queues if book.borrowing(q)}
        """Queues over their nominal quota in the snapshot (built before any charge of the pass)."""
        self.by_type: dict[str, list[RunningRequest]] = {}
        self.by_queue: dict[str, list[RunningRequest]] = {}
        self._queue_types: dict[str, set[str]] = {}
        self._held: dict[str, list[tuple[NodeId, int]]] = {}
        self._bounds: dict[tuple[str, ...], _Below] = {}
        self.taken: set[str] = set()
        self._failed: dict[tuple[object, ...], int] = {}
        self._quota_failed: dict[tuple[str, str, int], list[tuple[int, int]]] = {}
        """(queue, GPU type, effective priority) -> (priority, GPUs) for which no victims could free
        enough quota; a request of no higher priority that needs as many or more fails too (usage and
        evictions only grow)."""

    def rank(self, v: RunningRequest) -> int:
        """v's effective priority (counted from its submission, as if it were back in the queue)."""
        found = self._ranks.get(v.request.key)
        if found is None:
            found = self._ranks[v.request.key] = self.effective(v.request)
        return found

    def protected(self, v: RunningRequest, level: int) -> bool:
        """Whether v has aged to `level` (a preemptor's effective priority) or higher: it is not
        evicted for that preemptor, not even to reclaim quota."""
        rank = self.rank(v)
        return rank > v.request.priority and rank >= level

    def outranks(self, r: GpuRequest, v: RunningRequest) -> bool:
        """Whether r may evict v for priority: a higher declared priority, and v not protected."""
        return v.request.priority < r.priority and not self.protected(v, self.effective(r))

    def _victim_order(self, v: RunningRequest) -> tuple[int, float, str]:
        return (self.rank(v), -v.started_s, v.request.key)

    def _index(self) -> None:
        """Index the evictable running requests (on the first search: most passes preempt nothing)."""
        self._indexed = True
        for v in sorted((r for r in self._running if r.request.evictable), key=self._victim_order):
            self.by_type.setdefault(v.placement.gpu_type, []).append(v)
            self.by_queue.setdefault(v.request.queue, []).append(v)
        self._queue_types = {q: {v.placement.gpu_type for v in vs} for q, vs in self.by_queue.items()}

    def held(self, v: RunningRequest) -> list[tuple[NodeId, int]]:
        """GPUs an evictable running request holds on existing nodes of its placement's type."""
        found = self._held.get(v.request.key)
        if found is None:
            p, node_type = v.placement, self.cap.node_type
            found = [
                ((p.colony, a.node), a.gpus)
                for a in p.nodes
                if node_type.get((p.colony, a.node)) == p.gpu_type
            ]
            self._held[v.request.key] = found
        return found

    def _bound(self, scope: tuple[str, ...], priority: int, reclaim: bool) -> int:
        """Upper bound on what evicting for `priority` frees: GPUs of a type ("type", t), or quota of
        a key in a cohort ("cohort", cohort, k) or in a queue ("queue", queue, k)."""
        below = self._bounds.get(scope)
        if below is None:
            book = self.book
            if scope[0] == "type":
                victims = [(v, sum(g for _, g in self.held(v))) for v in self.by_type.get(scope[1], ())]
            else:
                queues = book.members[scope[1]] if scope[0] == "cohort" else [scope[1]]
                victims = [
                    (v, v.request.gpus)
                    for q in queues
                    for v in self.by_queue.get(q, ())
                    if scope[2] in book.keys(q, v.placement.gpu_type)
                ]
            items = [(self.rank(v), amount) for v, amount in victims]
            borrowed = sum(amount for v, amount in victims if v.request.queue in self.borrowers)
            below = self._bounds[scope] = _Below(items, borrowed)
        return below.below(priority) + (below.borrowed if reclaim else 0)

    def any_candidates(self) -> bool:
        """Whether anything is evictable at all."""
        return self._evictable

    def plan(self, r: GpuRequest, types: Sequence[str], quota_ok: set[str]) -> Plan | None:
        """The best victims for `r` among the given GPU types (quota_ok: types whose quota fits now)."""
        if not self._indexed:
            self._index()
        best: tuple[tuple[int, int, str], Plan] | None = None
        level = self.effective(r)
        for t in types:
            memo = (r.queue, t, t in quota_ok, r.colonies, r.nodes, r.gpus_per_node, level)
            if self._failed.get(memo, r.priority - 1) >= r.priority:
                continue
            found = self._plan_type(r, t, t in quota_ok, level)
            if found is None:
                self._failed[memo] = max(self._failed.get(memo, r.priority), r.priority)
                continue
            score = (max(self.rank(v) for v in found.victims), len(found.victims), t)
            if best is None or score < best[0]:
                best = (score, found)
        return None if best is None else best[1]

    def _reclaim(self, r: GpuRequest, t: str) -> bool:
        book = self.book
        return (
            book.known(r.queue)
            and book.queues[r.queue].cohort is not None
            and book.within_nominal(r.queue, t, r.gpus)
        )

    def _quota_possible(self, r: GpuRequest, t: str, reclaim: bool, level: int) -> bool:
        """False when even every eligible victim could not free enough quota (upper bound)."""
        book = self.book
        q = book.queues[r.queue]
        cohort = book.cohort[r.queue]
        usage = book.usage[r.queue]
        for k in book.keys(r.queue, t):
            unused = book.cohort_nominal[cohort].get(k, 0) - book.cohort_usage[cohort].get(k, 0)
            if r.gpus - unused > self._bound(("cohort", cohort, k), level, reclaim):
                return False
            limit = q.borrowing_limit.get(k)
            if limit is not None:
                over = usage.get(k, 0) + r.gpus - q.nominal.get(k, 0) - limit
                if over > self._bound(("queue", r.queue, k), level, False):
                    return False
        return True

    def _candidates(
        self, r: GpuRequest, t: str, capacity: bool, quota: bool, reclaim: bool, level: int
    ) -> Iterator[RunningRequest]:
        """Eligible victims that can help, lazily in victim order: with GPUs of type t on r's colonies
        when r needs capacity, in r's cohort charged to r's quota keys when it needs quota; none
        protected against r's effective priority `level`."""
        book = self.book

        def eligible(
            source: Iterable[RunningRequest], keep: Callable[[RunningRequest], bool]
        ) -> Iterator[RunningRequest]:
            # sources are in victim order, lowest effective priority first: from r's effective
            # priority on, none is of lower declared priority and unprotected, so only borrowers of
            # r's cohort qualify (reclaim), and only when r's queue stays within its nominal
            for v in source:
                if self.rank(v) >= level and not reclaim:
                    return
                if v.request.key in self.taken or not keep(v) or self.protected(v, level):
                    continue
                q = v.request.queue
                if v.request.priority < r.priority or (
                    q in self.borrowers and q != r.queue and book.same_cohort(q, r.queue)
                ):
                    yield v

        sources: list[Iterator[RunningRequest]] = []
        if capacity:
            colonies = r.colonies
            sources.append(
                eligible(
                    self.by_type.get(t, ()), lambda v: colonies is None or v.placement.colony in colonies
                )
            )
        if quota and book.known(r.queue):
            mine = set(book.keys(r.queue, t))
            for q in book.members[book.cohort[r.queue]]:
                charged = {u for u in self._queue_types.get(q, ()) if not mine.isdisjoint(book.keys(q, u))}
                if charged:

                    def relevant(v: RunningRequest, charged: set[str] = charged) -> bool:
                        return v.placement.gpu_type in charged

                    sources.append(eligible(self.by_queue.get(q, ()), relevant))
        seen: set[str] = set()
        for v in heapq.merge(*sources, key=self._victim_order):
            if v.request.key not in seen:  # on its type's list and its queue's
                seen.add(v.request.key)
                yield v

    def _plan_type(self, r: GpuRequest, t: str, quota_ok: bool, level: int) -> Plan | None:
        cap, book = self.cap, self.book
        n, g = r.nodes, r.gpus_per_node
        failed = self._quota_failed.setdefault((r.queue, t, level), [])
        if not quota_ok and any(p >= r.priority and x <= r.gpus for p, x in failed):
            return None
        reclaim = self._reclaim(r, t)
        if not quota_ok and not self._quota_possible(r, t, reclaim, level):
            failed.append((r.priority, r.gpus))
            return None
        live_placement = cap.place((t,), n, g, r.colonies)
        if quota_ok and live_placement is not None:
            return None  # nothing to gain: r is held back on this type for another reason
        if live_placement is None and cap.total_free[t] + self._bound(("type", t), level, reclaim) < r.gpus:
            return None
        # what each candidate gives back: quota of r's keys (own queue, cohort) and GPUs of type t
        mine = book.keys(r.queue, t) if not quota_ok else ()
        cohort = book.cohort.get(r.queue)
        candidates: list[RunningRequest] = []
        quota: list[tuple[dict[str, int], dict[str, int]]] = []
        gpus: list[list[tuple[NodeId, int]]] = []

        # the shortest prefix (in victim order) that fits, grown one victim at a time...
        own_sum: dict[str, int] = {}
        shared_sum: dict[str, int] = {}
        freed: dict[NodeId, int] = {}
        crossing: dict[str, int] = {}
        room = live_placement is not None
        stream = self._candidates(r, t, live_placement is None, not quota_ok, reclaim, level)
        for v in islice(stream, MAX_CANDIDATES):
            candidates.append(v)
            own: dict[str, int] = {}
            shared: dict[str, int] = {}
            q = v.request.queue
            if mine and book.cohort.get(q) == cohort:
                for k in book.keys(q, v.placement.gpu_type):
                    if k in mine:
                        shared[k] = v.request.gpus
                        shared_sum[k] = shared_sum.get(k, 0) + v.request.gpus
                        if q == r.queue:
                            own[k] = v.request.gpus
                            own_sum[k] = own_sum.get(k, 0) + v.request.gpus
            quota.append((own, shared))
            p = v.placement
            held = (
                self.held(v)
                if live_placement is None
                and p.gpu_type == t
                and (r.colonies is None or p.colony in r.colonies)
                else []
            )
            gpus.append(held)
            for nid, amount in held:
                before = cap.free[nid] + freed.get(nid, 0)
                freed[nid] = freed.get(nid, 0) + amount
                if before < g <= before + amount:
                    crossing[nid[0]] = more = crossing.get(nid[0], 0) + 1
                    room = room or cap.slots[(nid[0], t)].cnt[g] + more >= n
            if room and (quota_ok or book.check_with(r.queue, t, r.gpus, own_sum, shared_sum).ok):
                break
        else:
            if room:
                failed.append((r.priority, r.gpus))
            return None
        # ...keeping only victims that free GPUs where r will run or quota r needs...
        placement = live_placement[1] if live_placement is not None else self._hypothetical(r, t, freed)
        assert placement is not None
        target = {(placement.colony, a.node) for a in placement.nodes}
        chosen = [
            i for i in range(len(candidates)) if quota[i][1] or any(nid in target for nid, _ in gpus[i])
        ]
        own_sum = self._sum(quota[i][0] for i in chosen)
        shared_sum = self._sum(quota[i][1] for i in chosen)
        freed = self._sum(dict(gpus[i]) for i in chosen)
        # ...and without any it can do without, last ones first
        for i in reversed(chosen[:]):
            if len(chosen) == 1:
                break
            own_less = self._less(own_sum, quota[i][0])
            shared_less = self._less(shared_sum, quota[i][1])
            freed_less = self._less(freed, dict(gpus[i]))
            if not quota_ok and not book.check_with(r.queue, t, r.gpus, own_less, shared_less).ok:
                continue
            if live_placement is None and not self._room(r, t, freed_less):
                continue
            chosen.remove(i)
            own_sum, shared_sum, freed = own_less, shared_less, freed_less
        if live_placement is None:
            placement = self._hypothetical(r, t, freed)
            assert placement is not None
        return Plan(tuple(candidates[i] for i in chosen), placement, freed)

    @staticmethod
    def _sum(parts: Iterable[Mapping[K, int]]) -> dict[K, int]:
        total: dict[K, int] = {}
        for part in parts:
            for k, v in part.items():
                total[k] = total.get(k, 0) + v
        return total

    @staticmethod
    def _less(total: Mapping[K, int], part: Mapping[K, int]) -> dict[K, int]:
        out = dict(total)
        for k, v in part.items():
            out[k] -= v
        return out

    def _room(self, r: GpuRequest, t: str, freed: Mapping[NodeId, int]) -> bool:
        """Whether some colony has room for r once `freed` GPUs are back."""
        cap, g = self.cap, r.gpus_per_node
        crossing: dict[str, int] = {}
        for nid, k in freed.items():
            if cap.free[nid] < g <= cap.free[nid] + k:
                crossing[nid[0]] = crossing.get(nid[0], 0) + 1
        return any(cap.slots[(c, t)].cnt[g] + k >= r.nodes for c, k in crossing.items())

    def _hypothetical(self, r: GpuRequest, t: str, freed: Mapping[NodeId, int]) -> Placement | None:
        """The policy's placement once `freed` GPUs are back, in a colony where victims free some."""
        cap = self.cap
        n, g, sign = r.nodes, r.gpus_per_node, cap.sign
        crossing: dict[str, int] = {}
        for nid, k in freed.items():
            free = cap.free[nid]
            if free < g <= free + k:
                crossing[nid[0]] = crossing.get(nid[0], 0) + 1
        best: tuple[tuple[object, ...], Placement] | None = None
        for colony in sorted(crossing):
            slot = cap.slots[(colony, t)]
            if slot.cnt[g] + crossing[colony] < n:
                continue
            nodes = sorted(
                (sign * h, name)
                for sf, name in slot.nodes
                if (h := abs(sf) + freed.get((colony, name), 0)) >= g
            )
            chosen = nodes[:n]
            key = cap.key(slot, chosen)
            if best is None or key < best[0]:
                best = (key, cap.placement(slot, chosen, g))
        return None if best is None else best[1]

    def commit(self, plan: Plan) -> None:
        """Mark the plan's victims as evicted in this pass."""
        self.taken.update(v.request.key for v in plan.victims)
