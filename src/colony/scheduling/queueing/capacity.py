"""Free GPUs of the colonies' nodes and gang placement: n nodes x g GPUs, on distinct nodes of ONE colony,
all of ONE GPU type.

Layout, for speed with thousands of nodes and requests:
* a slot = the nodes of one GPU type in one colony, kept sorted by free GPUs, with `cnt[g]` = how many
  of them have at least g free (so "does a gang fit in this slot" is one lookup);
* a pool = the slots the placement policy ranks together (ordered: one colony each, in `order`;
  cheapest: the colonies of one price; binpack/spread: every colony of the type), with `maxcount[g]`
  = the largest `cnt[g]` among its slots, kept exact under allocations by a histogram;
* a cursor per (type, g, n) over a type's pools: free GPUs only shrink during a pass, so a pool where
  no slot has n nodes with g free stays that way and is skipped for good. Rejecting a gang that fits
  nowhere costs O(1) amortized.

Within a pool, binpack (also used by cheapest and ordered) takes the gang whose largest free count
is the smallest (the nodes with the least free GPUs that still fit), spread the one whose smallest
free count is the largest; ties go to the colony name, then the node names.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Sequence

from colony.scheduling.queueing.model import (
    ColonyInfo,
    GpuNode,
    NodeAllocation,
    Placement,
    PlacementStrategy,
    RunningRequest,
)

NodeId = tuple[str, str]
"""(colony, node name): node names are only unique within a colony."""
PlaceKey = tuple[float | int | str | bool, ...]
"""How the placement policy ranks a candidate placement (lower is better), comparable across types."""


def _pairwise_max(a: list[int], b: list[int]) -> list[int]:
    """[max(x, y) for x, y in zip(a, b)], without a call per element."""
    return [x if x >= y else y for x, y in zip(a, b, strict=True)]


class Slot:
    """The nodes of one GPU type in one colony."""

    __slots__ = ("cap_cnt", "cnt", "colony", "gpu_type", "nodes", "pool")

    def __init__(self, colony: str, gpu_type: str) -> None:
        self.colony = colony
        self.gpu_type = gpu_type
        self.nodes: list[tuple[int, str]] = []
        """(sign x free, name), sorted: the best node for the policy first among those that fit."""
        self.cnt: list[int] = []
        self.cap_cnt: list[int] = []
        self.pool: Pool

    def choose(self, n: int, g: int, sign: int) -> list[tuple[int, str]]:
        """The n nodes the policy takes for a gang of n x g here (cnt[g] >= n must hold)."""
        if sign > 0:
            i = bisect_left(self.nodes, (g,))
            return self.nodes[i : i + n]
        return self.nodes[:n]


class Pool:
    """Slots of one GPU type that the placement policy ranks together."""

    __slots__ = ("entries", "hist", "maxcount", "multi", "rank", "slots")

    def __init__(self, rank: PlaceKey, slots: list[Slot], width: int) -> None:
        self.rank = rank
        self.slots = {s.colony: s for s in slots}
        self.multi = len(slots) > 1
        self.entries: list[tuple[int, str, str]] = []
        """(sign x free, colony, node) of every node with a free GPU, sorted (multi-slot pools only)."""
        most = max(len(s.nodes) for s in slots)
        self.hist = [[0] * (most + 1) for _ in range(width)]
        self.maxcount = [0] * width
        for s in slots:
            s.pool = self
            for g, k in enumerate(s.cnt):
                self.hist[g][k] += 1
            self.maxcount = _pairwise_max(self.maxcount, s.cnt)
            if self.multi:
                self.entries.extend((sf, s.colony, name) for sf, name in s.nodes if sf != 0)
        self.entries.sort()

    def best(self, n: int, g: int, sign: int) -> Slot:
        """The slot whose gang the policy prefers (maxcount[g] >= n must hold)."""
        if not self.multi:
            return next(iter(self.slots.values()))
        entries = self.entries
        counts: dict[str, int] = {}
        start = bisect_left(entries, (g,)) if sign > 0 else 0
        for i in range(start, len(entries)):
            sf, colony, _ = entries[i]
            if sign < 0 and -sf < g:
                break
            k = counts.get(colony, 0) + 1
            if k >= n:
                return self.slots[colony]
            counts[colony] = k
        raise AssertionError("maxcount promised a fitting slot")  # pragma: no cover


class CapacityIndex:
    """Free GPUs per node, as the running requests leave them, updated by allocations in a pass."""

    def __init__(
        self,
        nodes: Sequence[GpuNode],
        colonies: Sequence[ColonyInfo],
        running: Iterable[RunningRequest],
        policy: PlacementStrategy,
    ) -> None:
        self.policy = policy
        self.sign = -1 if policy == "spread" else 1
        info = {c.name: c for c in colonies}
        self.capacity: dict[NodeId, int] = {}
        self.node_type: dict[NodeId, str] = {}
        for node in nodes:
            nid = (node.colony, node.name)
            if nid not in self.capacity:  # a duplicate node entry is ignored (first one wins)
                self.capacity[nid] = max(0, node.capacity)
                self.node_type[nid] = node.gpu_type
        used: dict[NodeId, int] = {}
        for r in running:
            for a in r.placement.nodes:
                nid = (r.placement.colony, a.node)
                used[nid] = used.get(nid, 0) + a.gpus
        self.free = {nid: max(0, cap - used.get(nid, 0)) for nid, cap in self.capacity.items()}
        self.width = max(self.capacity.values(), default=0) + 2
        self.types = tuple(sorted(set(self.node_type.values())))
        self.total_free = dict.fromkeys(self.types, 0)
        self.max_cap = dict.fromkeys(self.types, 0)

        sign, free, capacity = self.sign, self.free, self.capacity
        self.slots: dict[tuple[str, str], Slot] = {}
        for nid, t in self.node_type.items():
            slot = self.slots.get((nid[0], t))
            if slot is None:
                slot = self.slots[(nid[0], t)] = Slot(nid[0], t)
            slot.nodes.append((sign * free[nid], nid[1]))
        self.static_max: dict[str, list[int]] = {t: [0] * self.width for t in self.types}
        by_type: dict[str, list[Slot]] = {t: [] for t in self.types}
        for (colony, t), slot in sorted(self.slots.items()):
            slot.nodes.sort()
            caps = [capacity[(colony, name)] for _, name in slot.nodes]
            frees = [abs(sf) for sf, _ in slot.nodes]
            slot.cnt = self._at_least(frees)
            slot.cap_cnt = self._at_least(caps)
            self.total_free[t] += sum(frees)
            self.max_cap[t] = max(self.max_cap[t], *caps)
            self.static_max[t] = _pairwise_max(self.static_max[t], slot.cap_cnt)
            by_type[t].append(slot)
        self.pools: dict[str, list[Pool]] = {t: self._pools(by_type[t], info) for t in self.types}
        self._cursor: dict[tuple[str, int, int], int] = {}

    def _at_least(self, values: list[int]) -> list[int]:
        """[how many values are >= g for g in range(width)]."""
        counts = [0] * self.width
        for v in values:
            counts[v] += 1
        running = 0
        for g in range(self.width - 1, -1, -1):
            running += counts[g]
            counts[g] = running
        return counts

    def _pools(self, slots: list[Slot], info: dict[str, ColonyInfo]) -> list[Pool]:
        if self.policy == "ordered":
            ranked = sorted(slots, key=lambda s: (info.get(s.colony, ColonyInfo(s.colony)).order, s.colony))
            return [
                Pool((info.get(s.colony, ColonyInfo(s.colony)).order, s.colony), [s], self.width)
                for s in ranked
            ]
        if self.policy == "cheapest":
            groups: dict[tuple[bool, float], list[Slot]] = {}
            for s in slots:
                price = info.get(s.colony, ColonyInfo(s.colony)).price_per_gpu_hour
                groups.setdefault((price is None, price or 0.0), []).append(s)
            return [Pool(rank, groups[rank], self.width) for rank in sorted(groups)]
        return [Pool((), slots, self.width)] if slots else []

    def _first_pool(self, t: str, g: int, n: int) -> int:
        pools = self.pools[t]
        key = (t, g, n)
        i = self._cursor.get(key, 0)
        while i < len(pools) and pools[i].maxcount[g] < n:
            i += 1
        self._cursor[key] = i
        return i

    def fits_somewhere(self, t: str, n: int, g: int) -> bool:
        """Whether some colony has n nodes of type t with g free GPUs now (O(1) amortized)."""
        return g <= self.max_cap.get(t, 0) and self._first_pool(t, g, n) < len(self.pools[t])

    def fits_ever(self, types: Iterable[str], n: int, g: int, colonies: frozenset[str] | None) -> bool:
        """Whether the gang fits some colony of these types when all its nodes are empty."""
        for t in types:
            if g > self.max_cap.get(t, 0):
                continue
            if colonies is None:
                if self.static_max[t][g] >= n:
                    return True
            elif any((s := self.slots.get((c, t))) is not None and s.cap_cnt[g] >= n for c in colonies):
                return True
        return False

    def place(
        self,
        types: Iterable[str],
        n: int,
        g: int,
        colonies: frozenset[str] | None,
        order: tuple[str, ...] = (),
    ) -> tuple[PlaceKey, Placement] | None:
        """The placement the policy prefers among the given types, or None when the gang fits nowhere.
        With `order` (the request's fill-and-spill order) the first listed colony with room wins."""
        if order:
            return self._place_in_order(types, n, g, colonies, order)
        best: tuple[PlaceKey, Slot, list[tuple[int, str]]] | None = None
        sign = self.sign
        for t in types:
            if g > self.max_cap.get(t, 0):
                continue
            pools = self.pools[t]
            i = self._first_pool(t, g, n)
            if i == len(pools):
                continue
            if colonies is None:
                fitting: Iterable[Slot] = (pools[i].best(n, g, sign),)
            else:
                fitting = [s for c in colonies if (s := self.slots.get((c, t))) is not None and s.cnt[g] >= n]
            for slot in fitting:
                chosen = slot.choose(n, g, sign)
                key = (*slot.pool.rank, chosen[-1][0], slot.colony, t)
                if best is None or key < best[0]:
                    best = (key, slot, chosen)
        if best is None:
            return None
        key, slot, chosen = best
        return key, self.placement(slot, chosen, g)

    def _place_in_order(
        self,
        types: Iterable[str],
        n: int,
        g: int,
        colonies: frozenset[str] | None,
        order: tuple[str, ...],
    ) -> tuple[PlaceKey, Placement] | None:
        """`place` for a request with its own colony order: listed colonies first, in that order,
        then the others it may use by the policy's rank."""
        rank = {c: i for i, c in enumerate(order)}
        allowed = colonies if colonies is not None else frozenset(order)
        best: tuple[PlaceKey, Slot, list[tuple[int, str]]] | None = None
        sign = self.sign
        for t in types:
            if g > self.max_cap.get(t, 0):
                continue
            for c in allowed:
                slot = self.slots.get((c, t))
                if slot is None or slot.cnt[g] < n:
                    continue
                chosen = slot.choose(n, g, sign)
                key = (rank.get(c, len(order)), *slot.pool.rank, chosen[-1][0], slot.colony, t)
                if best is None or key < best[0]:
                    best = (key, slot, chosen)
        if best is None:
            return None
        key, slot, chosen = best
        return key, self.placement(slot, chosen, g)

    def key(self, slot: Slot, chosen: Sequence[tuple[int, str]]) -> PlaceKey:
        """The policy's rank of taking `chosen` nodes in `slot` (see the module docstring)."""
        return (*slot.pool.rank, chosen[-1][0], slot.colony, slot.gpu_type)

    @staticmethod
    def placement(slot: Slot, chosen: Sequence[tuple[int, str]], g: int) -> Placement:
        """A Placement of g GPUs on each chosen node of the slot, nodes by name."""
        return Placement(
            slot.colony,
            slot.gpu_type,
            tuple(NodeAllocation(name, g) for name in sorted(n for _, n in chosen)),
        )

    def allocate(self, colony: str, node: str, gpus: int) -> None:
        """Take `gpus` free GPUs of a node (at most its free GPUs)."""
        nid = (colony, node)
        f = self.free[nid]
        nf = f - gpus
        if gpus <= 0 or nf < 0:
            raise ValueError(f"cannot take {gpus} GPUs of {colony}/{node}, which has {f} free")
        self.free[nid] = nf
        t = self.node_type[nid]
        slot = self.slots[(colony, t)]
        sign = self.sign
        nodes = slot.nodes
        del nodes[bisect_left(nodes, (sign * f, node))]
        insort(nodes, (sign * nf, node))
        pool = slot.pool
        cnt, hist, maxcount = slot.cnt, pool.hist, pool.maxcount
        for g in range(nf + 1, f + 1):
            k = cnt[g]
            cnt[g] = k - 1
            h = hist[g]
            h[k] -= 1
            h[k - 1] += 1
            if maxcount[g] == k and h[k] == 0:
                maxcount[g] = k - 1
        if pool.multi:
            entries = pool.entries
            del entries[bisect_left(entries, (sign * f, colony, node))]
            if nf > 0:
                insort(entries, (sign * nf, colony, node))
        self.total_free[t] -= gpus

    def apply(self, placement: Placement) -> None:
        """Allocate every node of a placement."""
        for a in placement.nodes:
            self.allocate(placement.colony, a.node, a.gpus)
