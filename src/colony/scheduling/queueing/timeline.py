"""Start-time estimates: an event simulation of the free GPUs of one type over time.

Approximation: GPUs are aggregated per type over all colonies and nodes (a gang "fits" at a time
when the type has that many free GPUs in total), and only declared durations end anything (a request
without one holds its GPUs for good). Waiting requests are placed in the order the scheduler serves
them, each at the earliest time the type has room from then on (list scheduling: no request starts
before one placed earlier on the same type), and hold their GPUs for their declared duration.

For backfill, every placement remembers the free GPUs left right after it ("surplus"). A request
admitted now that holds x GPUs until `end` changes no placement as long as x <= the surplus of every
placement that starts before `end`: those placements still fit at their start, and none could have
started earlier. That is how the scheduler guarantees that a backfilled request never delays the
estimated start of a higher-ranked one.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate


class Timeline:
    """Free GPUs of one type now and their future releases; placements of waiting requests."""

    __slots__ = (
        "clock",
        "events",
        "free",
        "frozen_by",
        "keys",
        "next",
        "now",
        "pmin",
        "shift",
        "starts",
        "vals",
    )

    def __init__(self, now: float, free: int, releases: list[tuple[float, str, int]]) -> None:
        self.now = now
        self.clock = now
        """Time of the latest placement (placements start in order)."""
        self.events = sorted((max(now, t), key, g) for t, key, g in releases)
        """(time, request key, GPUs) released, sorted; events[:next] already happened by `clock`."""
        self.next = 0
        self.free = free
        """Free GPUs at `clock`, after the releases up to it and the placements so far."""
        self._advance(now)
        self.starts: list[float] = []
        self.vals: list[int] = []
        """Surplus of each placement + `shift`: free GPUs right after it, less what was admitted since."""
        self.pmin: list[int] = []
        """Running minimum of vals."""
        self.shift = 0
        """Admitted since, held past every placement (kept apart: the common case costs O(1))."""
        self.keys: list[str] = []
        self.frozen_by: str | None = None
        """A higher-ranked request waits for this type with an unknown start: nothing may pass it."""

    def _advance(self, until: float) -> None:
        ev = self.events
        i = self.next
        while i < len(ev) and ev[i][0] <= until:
            self.free += ev[i][2]
            i += 1
        self.next = i

    def peek(self, gpus: int, not_before: float) -> float | None:
        """The earliest time >= max(clock, not_before) with `gpus` free GPUs from then on; None if never."""
        ev = self.events
        free = self.free
        i = self.next
        t0 = max(self.clock, not_before)
        while i < len(ev) and ev[i][0] <= t0:
            free += ev[i][2]
            i += 1
        if free >= gpus:
            return t0
        while i < len(ev):
            t = ev[i][0]
            while i < len(ev) and ev[i][0] == t:
                free += ev[i][2]
                i += 1
            if free >= gpus:
                return t
        return None

    def commit(self, key: str, gpus: int, start: float, duration: float | None) -> None:
        """Place a waiting request at `start` (from `peek`) for its duration (None: for good)."""
        self._advance(start)
        self.clock = start
        self.free -= gpus
        self.starts.append(start)
        val = self.free + self.shift
        self.vals.append(val)
        self.pmin.append(min(self.pmin[-1], val) if self.pmin else val)
        self.keys.append(key)
        if duration is not None:
            self.add_release(start + duration, key, gpus)

    def add_release(self, end: float, key: str, gpus: int) -> None:
        """GPUs given back at `end`."""
        event = (max(end, self.now), key, gpus)
        i = bisect_left(self.events, event)
        self.events.insert(i, event)
        if event[0] <= self.clock:
            self.next += 1
            self.free += gpus

    def blocker(self, gpus: int, end: float | None) -> str | None:
        """The placement that holding `gpus` from now until `end` (None: for good) would delay, if any."""
        if not self.starts:
            return None
        k = len(self.starts) if end is None else bisect_left(self.starts, end)
        need = gpus + self.shift
        if k == 0 or self.pmin[k - 1] >= need:
            return None
        return next(self.keys[j] for j in range(k) if self.vals[j] < need)

    def delays(self, gpus: int, end: float | None) -> bool:
        """Whether holding `gpus` from now until `end` (None: for good) would delay some placement
        (`blocker` is not None, without naming it)."""
        starts = self.starts
        if not starts:
            return False
        k = len(starts) if end is None else bisect_left(starts, end)
        return k > 0 and self.pmin[k - 1] < gpus + self.shift

    def hold(self, key: str, gpus: int, end: float | None) -> None:
        """A request admitted now holds `gpus` until `end` (None: for good)."""
        if self.starts:
            k = len(self.starts) if end is None else bisect_left(self.starts, end)
            if k == len(self.starts):
                self.shift += gpus
            elif k:
                self.vals[:k] = [v - gpus for v in self.vals[:k]]
                self.pmin[:k] = [v - gpus for v in self.pmin[:k]]
                self.pmin[k:] = list(accumulate(self.vals[k:], min, initial=self.pmin[k - 1]))[1:]
        self.free -= gpus
        if end is not None:
            self.add_release(end, key, gpus)

    def cancel(self, key: str, end: float) -> None:
        """Forget the releases of a request at `end` (preempted: its GPUs go to the preemptor)."""
        ev = self.events
        i = bisect_left(ev, (max(end, self.now), key))
        while i < len(ev) and ev[i][1] == key:
            if i < self.next:
                self.free -= ev[i][2]
                self.next -= 1
            del ev[i]

    def first_release(self) -> float | None:
        """The earliest known release (clamped to now), if any."""
        return self.events[0][0] if self.events else None


NodeId = tuple[str, str]
"""(colony, node name)."""


class NodeReservation:
    """A head reservation at node level: its gang needs `nodes` nodes with `gpus` free each at
    `start`. The aggregate Timeline cannot see that its free GPUs may be scattered over nodes; this
    can: `avail` holds each node's free GPUs at `start`, `ok` how many have at least `gpus`."""

    __slots__ = ("avail", "gpus", "key", "nodes", "ok", "start")

    def __init__(self, key: str, start: float, gpus: int, nodes: int, avail: dict[NodeId, int]) -> None:
        self.key = key
        self.start = start
        self.gpus = gpus
        self.nodes = nodes
        self.avail = avail
        self.ok = sum(1 for v in avail.values() if v >= gpus)

    def _lost(self, colony: str, allocations: Iterable[tuple[str, int]]) -> int:
        lost = 0
        for node, gpus in allocations:
            v = self.avail.get((colony, node))
            if v is not None and v >= self.gpus > v - gpus:
                lost += 1
        return lost

    def allows(self, colony: str, allocations: Iterable[tuple[str, int]], end: float | None) -> bool:
        """Whether holding these allocations until `end` (None: for good) leaves the head its nodes."""
        if end is not None and end <= self.start:
            return True
        return self.ok - self._lost(colony, allocations) >= self.nodes

    def take(self, colony: str, allocations: Sequence[tuple[str, int]], end: float | None) -> None:
        """Account for allocations admitted now that are held until `end`."""
        if end is not None and end <= self.start:
            return
        self.ok -= self._lost(colony, allocations)
        for node, gpus in allocations:
            v = self.avail.get((colony, node))
            if v is not None:
                self.avail[(colony, node)] = v - gpus


def gang_start(
    nodes: int,
    gpus: int,
    now: float,
    free: Mapping[NodeId, int],
    releases: Mapping[NodeId, list[tuple[float, int]]],
) -> float | None:
    """The earliest time at which `nodes` of the nodes in `free` each have `gpus` free, from their
    free GPUs now and their known releases (end, GPUs); None when that time is unknown."""
    if len(free) < nodes:
        return None
    when: list[float] = []
    for nid, f in free.items():
        if f >= gpus:
            when.append(now)
            continue
        for end, g in sorted(releases.get(nid, ())):
            f += g
            if f >= gpus:
                when.append(max(end, now))
                break
    if len(when) < nodes:
        return None
    return sorted(when)[nodes - 1]


def node_reservation(
    key: str,
    nodes: int,
    gpus: int,
    start: float,
    free: Mapping[NodeId, int],
    releases: Mapping[NodeId, list[tuple[float, int]]],
) -> NodeReservation:
    """The reservation of a gang of `nodes` x `gpus` at `start` (from gang_start) on the nodes of `free`."""
    avail = {nid: f + sum(g for end, g in releases.get(nid, ()) if end <= start) for nid, f in free.items()}
    return NodeReservation(key, start, gpus, nodes, avail)
