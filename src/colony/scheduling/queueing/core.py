"""One scheduling pass: `schedule(snapshot) -> Decisions`, pure and deterministic.

All pending requests are decided in one batch pass (Kueue admits one head per queue per cycle; users
measured 64-minute waits). The rules:

1. Free capacity = node capacity - the allocations of running requests. Quota usage per queue and
   quota key comes from running requests (charged to their placement's GPU type; quota.py says which
   keys a type is charged to: the type, ANY_GPU_TYPE "*", or the type with nominal 0 when the queue
   has neither). A request with queue "" has no quota; one whose queue does not exist waits, naming it.
2. Order (snapshot.order). "fifo": submitted_s, then key. "priority": priority desc, submitted_s, key.
   In both the first request that cannot start blocks all behind it, whatever their queue (no
   backfill, no preemption). "default": priority desc; at equal priority the queue with the lowest
   weighted dominant share goes first (max over its quota keys of usage / nominal, divided by its
   weight; counting its head request as Kueue does, so an owner within its nominal goes before a
   borrower; recomputed as the pass admits, from a heap refreshed lazily), FIFO within a queue, and
   between queues of equal share the earlier-submitted head; backfill and preemption as below.
   Aging: at each priority, the requests that have waited snapshot.aging_s or longer go first, across
   queues, oldest first (ordering.urgency), so fair sharing never postpones a request for good.
   Aging across priorities ("default", "shortest" and "sjf"): "priority" above means the effective priority
   (ordering.effective_priority): the declared one raised one level per snapshot.aging_s waited, the
   levels being the distinct priorities of the pass's pending and running requests, up to the
   highest; so a stream of higher-priority requests never postpones a request for good either.
   "shortest": aged requests first, oldest first, then the highest response ratio (waited + declared
   duration) / declared duration (unknown last), across queues (one order, no fair-share interleave;
   quotas still apply); a QueueQuota.strategy ("fifo" or "shortest") sets the within-queue order of
   its queue under "default" and "shortest" (ordering.serve_order; with a "fifo" queue under
   "shortest", queues interleave by fair share as under "default"). Rules 5 and 6 apply to both.
   "sjf" (sjf.py): aged requests first, oldest first, then the least declared GPU time
   (gpus x duration_s, unknown last), one order across queues (strategies not consulted); rules 5
   and 6 apply, except that nothing is backfilled within a priority: on a GPU type where a request of
   its priority holds the head reservation, nothing ranked below it at that priority starts (lower
   priorities backfill around a higher priority's head as under "default").
3. Quota: a request fits its queue if, for each of its keys, usage + gpus <= nominal, or beyond
   nominal when the cohort's unused nominal (net of what other queues already borrow) covers it and
   the excess stays within borrowing_limit (missing: unlimited). Never beyond these limits: a queue
   whose lent quota is in use gets it back by preemption (reclaim). An admit that borrows has
   borrowed=True.
4. Gang placement: all `nodes` members at once, on distinct nodes of one colony, one acceptable GPU
   type, each node with >= gpus_per_node free, within request.colonies. The colony and type follow
   snapshot.placement_policy, or first the request's own colony_order (fill-and-spill: the first listed
   colony with room); nodes within a colony: binpack (cheapest and ordered too) the least free
   that fit, spread the most; ties by names (capacity.py).
5. EASY backfill ("default", "shortest"; "sjf" only as said above): at each effective priority, the
   first request blocked by capacity on a GPU type (the head) is placed in an event simulation per
   GPU type (timeline.py) at its estimated start, and holds those GPUs there (a reservation;
   Decisions.reserved); the other blocked requests hold none. A lower-ranked request may start now
   only if it fits now and holding its GPUs until its declared end (forever without one) leaves
   every reservation on that type its room at its start: it ends before, or the GPUs it takes are
   not needed then. A head whose start is unknown
   (no known releases) closes its GPU types to everything ranked below it. Admits on a type with a
   reservation have backfilled=True. So a backfilled request never delays a reserved head's
   estimated start. The head also reserves at node level (timeline.NodeReservation: the colony where
   `nodes` nodes have `gpus_per_node` free the earliest, from the nodes' declared releases): a
   backfilled placement must leave it enough such nodes at that time, or end before it. A request
   blocked only because its cohort has no quota left to lend (QuotaBook.lending_short) counts as
   blocked by capacity here, from the time the declared ends of its cohort's requests lend it the
   quota (unknown: it reserves nothing); one blocked by its own nominal or borrowing limit reserves
   nothing.
6. Preemption ("default"): for a request blocked by capacity or quota, on GPU types no higher-ranked
   request waits for, victims are evictable running requests of lower (declared) priority, or of
   borrowing queues of its cohort while its own queue stays within nominal (reclaim), except those
   that have aged (their effective priority, counted from submission, above their declared one) to
   the preemptor's effective priority or higher: back in the queue they would go first, undoing the
   eviction; lowest effective priority, then most recently started, fewest victims (preemption.py);
   only when it then fits (placement and quota). Victims keep their GPUs and quota in this pass; the
   preemptor reserves the rest of its placement and is charged its quota, so nothing lower takes
   them; it is admitted in a later pass. One Preempt per victim per pass.
7. Auto-provisioning: a request with auto_provision that cannot start now for capacity (or never fits
   the existing colonies), gets no preemption, and whose quota allows it, gets a Provision of the
   cheapest offer (offers.solver) over its GPU types (all offered types if it accepts any) that its
   quota allows, and is charged its quota now. No feasible offer: it waits with the solver's message.
8. Estimates for every pending request not admitted: position = 1-based rank among the still-waiting
   requests of its queue in the order the pass serves them; start_s from the simulation for capacity
   waits (aggregate GPUs per type, see timeline.py; after the pass, the requests without a
   reservation are placed in pass order after the reservations), from the declared ends of running requests of
   its queue and cohort for quota waits (capacity not considered), now for a preemptor (once its
   victims are gone), None when provisioned or unknown. Only the first ESTIMATE_LIMIT waiting
   requests in pass order are estimated; the rest get None and, in "default", close their GPU types
   to the requests behind them.
9. snapshot.estimates=False skips the estimates of rule 8 (Decisions.estimates is empty); the
   admissions, preemptions and provisions are the same. Such a pass also stops once nothing more
   can start (no node has room for the smallest gang member left, or every free GPU is held for
   reservations that the least and shortest request left would delay) and skips, without work, the
   requests that every reservation holds back once each GPU type has one at their priority.
10. Deterministic: no clock, no hash- or dict-order dependence; shuffled inputs give equal Decisions.

Interpretations: requests that can never start here (invalid shape, missing queue, a gang larger
than any colony or than its quota can ever give) wait with that reason and block nobody, in every
order; neither does a provisioned request (it gets a colony of its own). Pending keys should be
unique; of duplicates, the first in serve order is kept.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Sequence
from functools import partial
from operator import attrgetter, is_not

from colony.scheduling.queueing.capacity import CapacityIndex
from colony.scheduling.queueing.model import (
    RESERVATION_ORDERS,
    Admit,
    Decisions,
    Estimate,
    GpuRequest,
    Placement,
    Preempt,
    Provision,
    Snapshot,
)
from colony.scheduling.queueing.ordering import (
    Level,
    Urgency,
    effective_priority,
    fair_order,
    priority_ladder,
    serve_order,
    urgency,
)
from colony.scheduling.queueing.preemption import Plan, Preemptor
from colony.scheduling.queueing.provisioning import Provisioner
from colony.scheduling.queueing.quota import QuotaBook, QuotaForecast
from colony.scheduling.queueing.timeline import NodeReservation, Timeline, gang_start, node_reservation

_PER_NODE = attrgetter("gpus_per_node")
_NODES = attrgetter("nodes")
_AUTO_PROVISION = attrgetter("auto_provision")
_DURATION = attrgetter("duration_s")
_KEY = attrgetter("key")
_DECLARED = partial(is_not, None)


ESTIMATE_LIMIT = 2000
"""Waiting requests whose start a pass estimates (in pass order); the rest get start_s=None."""


def schedule(snapshot: Snapshot) -> Decisions:
    """Decide one scheduling pass over `snapshot` (see the module docstring for the rules)."""
    # a pass allocates many short-lived objects next to a large snapshot: the cyclic collector would
    # rescan the snapshot repeatedly (about a fifth of the pass); nothing here makes cycles
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        return _Pass(snapshot).run()
    finally:
        if paused:
            gc.enable()


def _types_label(r: GpuRequest) -> str:
    return "/".join(r.gpu_types) if r.gpu_types else "any"


def _shape(r: GpuRequest) -> str:
    return f"{r.nodes} node{'s' if r.nodes != 1 else ''} x {r.gpus_per_node} {_types_label(r)} GPUs"


class _Pass:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.now = snapshot.now_s
        self.order = snapshot.order
        self.strategies = strategies = {q.name: q.strategy for q in snapshot.queues if q.strategy}
        fair = self.order in RESERVATION_ORDERS
        ladder = (
            priority_ladder(
                [r.priority for r in snapshot.pending] + [v.request.priority for v in snapshot.running]
            )
            if fair
            else ()
        )
        self.level: Level | None = effective_priority(ladder, self.now, snapshot.aging_s)
        """Effective priority of a pending request ("default", "shortest", "sjf"; None: the declared one)."""
        ranked = serve_order(snapshot.pending, self.order, self.now, snapshot.aging_s, strategies, self.level)
        keys = set(map(_KEY, ranked))
        if len(keys) < len(ranked):  # keys should be unique; keep the first of each in serve order
            first: dict[str, GpuRequest] = {}
            for r in ranked:
                first.setdefault(r.key, r)
            ranked = [r for r in ranked if first[r.key] is r]
        self.ranked = ranked
        self.cap = CapacityIndex(
            snapshot.nodes, snapshot.colonies, snapshot.running, snapshot.placement_policy
        )
        self.book = QuotaBook(snapshot.queues, snapshot.running)
        self.preemptor = Preemptor(snapshot.running, self.cap, self.book, self.level)
        self.provisioner = Provisioner(snapshot.offers)
        releases: dict[str, list[tuple[float, str, int]]] = {t: [] for t in self.cap.types}
        for run in snapshot.running:
            if run.request.duration_s is None:
                continue
            end = run.started_s + run.request.duration_s
            for a in run.placement.nodes:
                t = self.cap.node_type.get((run.placement.colony, a.node))
                if t is not None:
                    releases[t].append((end, run.request.key, a.gpus))
        self.timelines = {t: Timeline(self.now, self.cap.total_free[t], releases[t]) for t in self.cap.types}
        self.urgent: Urgency | None = urgency(snapshot.aging_s) if self.order in RESERVATION_ORDERS else None
        self.strict = self.order == "sjf"
        """No backfill within a priority: nothing starts on a GPU type where the head of its priority
        holds its reservation (sjf.py)."""
        self.reserved: set[str] = set()
        """GPU types on which a request of priority `level` holds the head reservation."""
        self.reservations: list[str] = []
        """Keys of the requests holding a head reservation, in pass order."""
        self.deferred: list[tuple[GpuRequest, Sequence[str], bool]] = []
        """Waiting requests to estimate after the pass ("default"): (request, GPU types, quota wait)."""
        self.changes = 0
        self.node_res: dict[str, list[NodeReservation]] = {}
        """Per GPU type, the reservations' needs at node level (whole gangs on nodes, not GPU counts)."""
        self.admitted_ends: list[tuple[tuple[str, str], float, int]] = []
        """(node, declared end, GPUs) of every allocation admitted in this pass with a declared end."""
        self._node_releases: dict[tuple[str, str], list[tuple[float, int]]] | None = None
        """Per node, (declared end, GPUs) of the running requests and of admitted_ends[:_merged]."""
        self._merged = 0
        self._nodes_by_type: dict[str, list[tuple[str, str]]] = {}
        """Admissions and reservations so far (the stop check reruns when this changes)."""
        self.budget = ESTIMATE_LIMIT
        self.admitted: list[Admit] = []
        self.provisions: list[Provision] = []
        self.preemptions: list[Preempt] = []
        self.reasons: dict[str, str] = {}
        self.starts: dict[str, float | None] = {}
        self.quota_waits: list[tuple[GpuRequest, Sequence[str]]] = []
        self._frozen = False
        """Whether some GPU type is closed (Timeline.frozen_by) by now."""
        self.holds: list[tuple[float, str, str, int]] = []
        """(end, queue, GPU type, GPUs) charged in this pass with a declared end, for quota forecasts."""
        self._forecast_cache: tuple[int, QuotaForecast] | None = None
        """The quota forecast of _quota_start, with the number of holds it was built from."""
        self._types_memo: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._static: dict[tuple[object, ...], tuple[tuple[str, ...], str]] = {}
        self._messages: dict[str | None, str] = {}

    # -- the pass ---------------------------------------------------------------------------------

    def run(self) -> Decisions:
        if self.order in RESERVATION_ORDERS:
            # without estimates, stop once no node has room for the smallest gang member left to
            # serve, if nothing can preempt or provision: every later request would only wait
            stop = (
                not self.snapshot.estimates
                and not self.preemptor.any_candidates()
                and not any(map(_AUTO_PROVISION, self.ranked))
            )
            if stop:
                # lower bounds over every request left (C-level scans: a pass may serve few of them)
                ranked = self.ranked
                smallest = min(map(_PER_NODE, ranked), default=0)
                least = smallest * min(map(_NODES, ranked), default=0)
                shortest = min(filter(_DECLARED, map(_DURATION, ranked)), default=math.inf)
            checked = -1
            level: int | None = None
            # "shortest": one order across queues (serve_order: aged, then the least GPU time);
            # "default" (or a FIFO queue among them): fair sharing between queues
            # "sjf": one order across queues (aged, then the least GPU time), strict behind heads
            served = (
                iter(self.ranked)
                if self.strict or (self.order == "shortest" and "fifo" not in self.strategies.values())
                else fair_order(
                    self.ranked,
                    self.book,
                    self.cap.types,
                    self.now,
                    self.urgent,
                    urgent_sorted=self.order == "default" and "shortest" not in self.strategies.values(),
                    effective=self.level,
                )
            )
            closed: list[Timeline] | None = None
            """In a stop-allowed pass, once every GPU type is reserved at this priority or frozen: the
            timelines of the reserved ones (a request they all hold back only waits: skipped)."""
            timelines = self.timelines
            effective = self.level
            for r in served:
                p = r.priority if effective is None else effective(r)
                if p != level:
                    level = p
                    self.reserved = set()
                    closed = None
                if stop and checked != self.changes:
                    checked = self.changes
                    if self._nothing_can_start(smallest, least, shortest):
                        break
                    closed = None
                    if all(t in self.reserved or timelines[t].frozen_by is not None for t in self.cap.types):
                        closed = [timelines[t] for t in self.cap.types if timelines[t].frozen_by is None]
                if closed is not None and self.strict:
                    continue  # every type holds this priority's head reservation: "sjf" passes none
                if closed is not None:
                    end = None if r.duration_s is None else self.now + r.duration_s
                    gpus = r.nodes * r.gpus_per_node
                    for tl in closed:
                        if not tl.delays(gpus, end):
                            break
                    else:
                        continue  # it would only wait (no reservation, preemption or provision left)
                self._serve_default(r)
            if self.snapshot.estimates:
                self._estimate_deferred()
                self._forecast_quota()
        else:
            self._serve_strict()
        if not self.snapshot.estimates:
            return Decisions(
                tuple(self.admitted),
                tuple(self.provisions),
                tuple(self.preemptions),
                reserved=tuple(self.reservations),
            )
        admitted = {a.key for a in self.admitted}
        estimates: dict[str, Estimate] = {}
        position: dict[str, int] = {}  # per queue, in the order the pass served them
        starts, reasons = self.starts, self.reasons
        for r in self.ranked:
            key = r.key
            if key not in admitted:
                position[r.queue] = n = position.get(r.queue, 0) + 1
                estimates[key] = Estimate(n, starts.get(key), reasons.get(key, "waiting"))
        return Decisions(
            tuple(self.admitted),
            tuple(self.provisions),
            tuple(self.preemptions),
            estimates,
            reserved=tuple(self.reservations),
        )

    def _wait(self, r: GpuRequest, reason: str, start: float | None = None) -> None:
        self.reasons[r.key] = reason
        self.starts[r.key] = start

    def _types(self, r: GpuRequest) -> tuple[str, ...]:
        """The acceptable GPU types that some node has, sorted."""
        found = self._types_memo.get(r.gpu_types)
        if found is None:
            found = tuple(sorted(set(r.gpu_types) & set(self.cap.types))) if r.gpu_types else self.cap.types
            self._types_memo[r.gpu_types] = found
        return found

    def _admissible(self, r: GpuRequest, may_provision: bool) -> tuple[str, ...] | None:
        """The GPU types r could ever run on here; None after recording why it never can (it then
        blocks nobody; with auto_provision it is provisioned instead when `may_provision`, else the
        empty tuple says it waits to be)."""
        shape = (r.queue, r.gpu_types, r.colonies, r.nodes, r.gpus_per_node)
        found = self._static.get(shape)
        if found is None:
            found = self._static[shape] = self._classify(r)
        types, why = found
        if types:
            return types
        if why or not r.auto_provision:
            self._wait(r, why or f"capacity: no colony can ever hold {_shape(r)}{self._where(r)}")
            return None
        if may_provision:
            self._provision(r, "")
            return None
        return ()

    def _classify(self, r: GpuRequest) -> tuple[tuple[str, ...], str]:
        """(the GPU types r could ever run on, "") or ((), why never); ((), "") = no colony ever fits."""
        if r.nodes < 1 or r.gpus_per_node < 1:
            return (
                (),
                f"invalid request: nodes ({r.nodes}) and gpus_per_node ({r.gpus_per_node}) must be >= 1",
            )
        if r.queue and not self.book.known(r.queue):
            return (), f"queue {r.queue!r} does not exist"
        types = [t for t in self._types(r) if self.cap.fits_ever((t,), r.nodes, r.gpus_per_node, r.colonies)]
        if not types:
            return (), ""
        never = ""
        fitting = []
        for t in types:
            why = self.book.never_fits(r.queue, t, r.gpus) if r.queue else None
            if why is None:
                fitting.append(t)
            else:
                never = never or why
        return tuple(fitting), never

    @staticmethod
    def _where(r: GpuRequest) -> str:
        return " on its colonies" if r.colonies is not None else ""

    def _admit(self, r: GpuRequest, placement: Placement, borrowed: bool, backfilled: bool) -> None:
        t = placement.gpu_type
        self.cap.apply(placement)
        self.book.charge(r.queue, t, r.gpus)
        end = None if r.duration_s is None else self.now + r.duration_s
        self.timelines[t].hold(r.key, r.gpus, end)
        if end is not None:
            self.holds.append((end, r.queue, t, r.gpus))
            for a in placement.nodes:
                self.admitted_ends.append(((placement.colony, a.node), end, a.gpus))
        reserved = self.node_res.get(t)
        if reserved:
            allocations = [(a.node, a.gpus) for a in placement.nodes]
            for nr in reserved:
                nr.take(placement.colony, allocations, end)
        self.admitted.append(Admit(r.key, placement, borrowed=borrowed, backfilled=backfilled))
        self.changes += 1

    def _provision(self, r: GpuRequest, waiting_reason: str) -> bool:
        """Provision the cheapest offer for r if its quota allows one; else record why not."""
        types = r.gpu_types or self.provisioner.types
        allowed = [t for t in types if self.book.check(r.queue, t, r.gpus).ok]
        if not allowed:
            fit = self.book.check(r.queue, types[0], r.gpus) if types else None
            self._wait(r, fit.reason if fit is not None else "no offer: the catalog has no GPU offers")
            return False
        found = self.provisioner.cheapest(allowed, r.gpus_per_node, r.nodes, r.max_price_per_hour)
        if isinstance(found, str):
            self._wait(r, found if not waiting_reason else f"{waiting_reason}; {found}")
            return False
        self.book.charge(r.queue, found.offer.accelerator, r.gpus)
        if r.duration_s is not None:
            self.holds.append((self.now + r.duration_s, r.queue, found.offer.accelerator, r.gpus))
        self.provisions.append(Provision(r.key, found))
        o = found.offer
        self._wait(
            r,
            f"provisioning a colony: {found.nodes} x {o.instance_type} ({o.cloud} {o.region}), "
            f"${found.price_per_hour:.2f}/h",
        )
        return True

    # -- fifo and priority ------------------------------------------------------------------------

    def _serve_strict(self) -> None:
        head: tuple[GpuRequest, list[str], bool] | None = None
        behind: list[tuple[GpuRequest, list[str]]] = []
        for r in self.ranked:
            if head is not None:
                if not self.snapshot.estimates:
                    break  # nothing behind a blocked head is decided
                types = self._admissible(r, may_provision=False)
                if types is not None:
                    self._wait(
                        r,
                        f"waiting behind {head[0].key} ({self.order} order: the first request that cannot "
                        "start blocks the ones behind it)",
                    )
                    if types:
                        behind.append((r, list(types)))
                continue
            types = self._admissible(r, may_provision=True)
            if types is None:
                continue
            ok: list[tuple[str, bool]] = []
            reason = ""
            for t in types:
                fit = self.book.check(r.queue, t, r.gpus)
                if fit.ok:
                    ok.append((t, fit.borrowed))
                else:
                    reason = reason or fit.reason
            if ok:
                fitting = [t for t, _ in ok]
                found = self.cap.place(fitting, r.nodes, r.gpus_per_node, r.colonies, r.colony_order)
                if found is not None:
                    self._admit(r, found[1], dict(ok)[found[1].gpu_type], backfilled=False)
                    continue
                reason = self._capacity_reason(r)
                if not r.auto_provision:
                    self._wait(r, reason)
                elif self._provision(r, reason):
                    continue
            else:
                self._wait(r, reason)
            head = (r, [t for t, _ in ok] or list(types), not ok)
        if head is not None and self.snapshot.estimates:
            self._estimate_strict(head, behind)

    def _estimate_strict(
        self, head: tuple[GpuRequest, list[str], bool], behind: list[tuple[GpuRequest, list[str]]]
    ) -> None:
        r0, types0, quota_blocked = head
        floor: float | None = self.now
        if quota_blocked:
            forecast = self._forecast()
            times = [
                w for t in types0 if (w := forecast.earliest(r0.queue, t, r0.gpus, self.now)) is not None
            ]
            floor = min(times) if times else None
        for i, (r, types) in enumerate([(r0, types0), *behind]):
            if floor is None:
                self.starts[r.key] = None
                continue
            if self.budget <= 0:
                self._capped(r)
                continue
            self.budget -= 1
            placed = self._simulate(r, types, floor)
            if placed is None:
                floor = None
            else:
                start, t = placed
                floor = (
                    start if start > self.now or i > 0 or quota_blocked else self.timelines[t].first_release()
                )
            self.starts[r.key] = floor

    # -- default ----------------------------------------------------------------------------------

    def _serve_default(self, r: GpuRequest) -> None:
        types = self._admissible(r, may_provision=True)
        if types is None:
            return
        timelines = self.timelines
        if self._frozen and not r.auto_provision:
            # every type closed by a higher-ranked request of unknown start: nothing else can help
            # (no start, no preemption there); the common case late in a pass over a long queue
            frozen = [timelines[t].frozen_by for t in types]
            if all(frozen):
                self._wait(r, self._behind_unknown(frozen[0]))
                return
        ok: list[str] = []
        borrowing: set[str] = set()
        quota_reason = ""
        for t in types:
            fit = self.book.check(r.queue, t, r.gpus)
            if fit.ok:
                ok.append(t)
                if fit.borrowed:
                    borrowing.add(t)
            else:
                quota_reason = quota_reason or fit.reason
        if not ok:
            self._blocked_by_quota(r, types, quota_reason)
            return
        end = None if r.duration_s is None else self.now + r.duration_s
        open_types: list[str] = []
        held_back = ""
        for t in ok:
            timeline = timelines[t]
            if timeline.frozen_by is not None:
                if self.cap.fits_somewhere(t, r.nodes, r.gpus_per_node):
                    held_back = held_back or self._behind_unknown(timeline.frozen_by)
                continue
            # "sjf": behind the head of its own priority, nothing starts (strict); behind a
            # higher priority's head, EASY backfill as under "default"
            strict = self.strict and t in self.reserved
            blocker = timeline.keys[0] if strict else timeline.blocker(r.gpus, end)
            if blocker is not None:
                if self.cap.fits_somewhere(t, r.nodes, r.gpus_per_node):
                    held_back = held_back or f"waiting: starting now would delay higher-ranked {blocker}"
                continue
            open_types.append(t)
        found = (
            self.cap.place(open_types, r.nodes, r.gpus_per_node, r.colonies, r.colony_order)
            if open_types
            else None
        )
        if found is not None and self.node_res:
            placement = found[1]
            allocations = [(a.node, a.gpus) for a in placement.nodes]
            for nr in self.node_res.get(placement.gpu_type, ()):
                if not nr.allows(placement.colony, allocations, end):
                    held_back = held_back or f"waiting: starting now would delay higher-ranked {nr.key}"
                    found = None
                    break
        if found is not None:
            placement = found[1]
            t = placement.gpu_type
            self._admit(r, placement, t in borrowing, backfilled=bool(timelines[t].starts))
            return
        reason = held_back or self._capacity_reason(r)
        quiet = [t for t in ok if not timelines[t].starts and timelines[t].frozen_by is None]
        if quiet and self.preemptor.any_candidates():
            plan = self.preemptor.plan(r, quiet, set(ok))
            if plan is not None:
                self._preempt(r, plan)
                return
        if r.auto_provision and self._provision(r, reason):
            return
        self._wait_for_capacity(r, ok, self.reasons[r.key] if r.auto_provision else reason)

    def _behind_unknown(self, key: str | None) -> str:
        """Why a request waits behind `key` (one string per key: thousands of requests may share it)."""
        found = self._messages.get(key)
        if found is None:
            found = self._messages[key] = f"waiting behind higher-ranked {key} (its start is unknown)"
        return found

    def _capacity_reason(self, r: GpuRequest) -> str:
        where = " among its colonies" if r.colonies is not None else ""
        return f"capacity: no colony{where} has room for {_shape(r)} now"

    def _blocked_by_quota(self, r: GpuRequest, types: Sequence[str], reason: str) -> None:
        quiet = [t for t in types if not self.timelines[t].starts and self.timelines[t].frozen_by is None]
        if quiet and self.preemptor.any_candidates():
            plan = self.preemptor.plan(r, quiet, set())
            if plan is not None:
                self._preempt(r, plan)
                return
        self._wait(r, reason)
        # blocked only because its cohort has nothing left to lend (in a cohort that lends all its
        # quota, "no capacity" shows up so): it waits for running requests to end, as for capacity,
        # so the head of its priority takes the reservation (EASY backfill)
        heads = [
            t
            for t in types
            if t not in self.reserved
            and self.timelines[t].frozen_by is None
            and self.book.lending_short(r.queue, t, r.gpus)
        ]
        lendable_from = self._quota_start(r, heads) if heads else None
        if lendable_from is not None:
            # from the time the cohort's declared ends give the quota back: capacity free before
            # then (possibly in colonies it cannot even use) is no reason to hold anything now
            placed = self._simulate(r, heads, lendable_from)
            if placed is not None:
                self.reserved.add(placed[1])
                self.reservations.append(r.key)
                self.changes += 1
                self._reserve_nodes(r, placed[1])
        if self.snapshot.estimates:
            self.deferred.append((r, types, True))

    def _preempt(self, r: GpuRequest, plan: Plan) -> None:
        self.preemptor.commit(plan)
        for v in plan.victims:
            if self.preemptor.outranks(r, v):
                why = f"preempted for {r.key} (priority {r.priority} > {v.request.priority})"
            else:
                why = (
                    f"reclaim: queue {v.request.queue!r} borrows quota that queue {r.queue!r} of its cohort "
                    f"needs back for {r.key}"
                )
            self.preemptions.append(Preempt(v.request.key, r.key, why))
        p = plan.placement
        t = p.gpu_type
        taken = 0
        for node, gpus in plan.take():
            self.cap.allocate(p.colony, node, gpus)
            taken += gpus
        self.book.charge(r.queue, t, r.gpus)
        timeline = self.timelines[t]
        for v in plan.victims:
            if v.placement.gpu_type == t and v.request.duration_s is not None:
                timeline.cancel(v.request.key, v.started_s + v.request.duration_s)
        timeline.hold(r.key, taken, None)
        if r.duration_s is not None:
            timeline.add_release(self.now + r.duration_s, r.key, r.gpus)
            self.holds.append((self.now + r.duration_s, r.queue, t, r.gpus))
        names = ", ".join(v.request.key for v in plan.victims)
        self._wait(r, f"waiting for preempted requests to stop: {names}", self.now)

    def _wait_for_capacity(self, r: GpuRequest, types: Sequence[str], reason: str) -> None:
        """EASY backfill: the first capacity-blocked request of its priority on a GPU type (the head)
        gets a reservation in the simulation, which nothing ranked below it may delay; an unknown start
        closes its types. The others only wait (estimated after the pass)."""
        self._wait(r, reason)
        open_types = [t for t in types if self.timelines[t].frozen_by is None and t not in self.reserved]
        if not open_types:
            if self.snapshot.estimates:
                self.deferred.append((r, types, False))
            return
        placed = self._simulate(r, open_types, self.now)
        if placed is None:
            self._freeze(open_types, r.key)
            self.changes += 1
            return
        start, t = placed
        self.reserved.add(t)
        self.reservations.append(r.key)
        self.changes += 1
        start = max(start, self._reserve_nodes(r, t))
        self.starts[r.key] = start if start > self.now else self.timelines[t].first_release()

    def _reserve_nodes(self, r: GpuRequest, t: str) -> float:
        """Reserve r's gang at node level on type t: the colony where `r.nodes` nodes have
        `r.gpus_per_node` free the earliest (from declared ends); that time (now if none is known)."""
        if self._node_releases is None:
            # built once per pass, on the first reservation; admissions are merged in as they come
            self._node_releases = {}
            for run in self.snapshot.running:
                if run.request.duration_s is not None:
                    end = run.started_s + run.request.duration_s
                    for a in run.placement.nodes:
                        self._node_releases.setdefault((run.placement.colony, a.node), []).append(
                            (end, a.gpus)
                        )
            self._nodes_by_type = {}
            for nid, nt in self.cap.node_type.items():
                self._nodes_by_type.setdefault(nt, []).append(nid)
        releases = self._node_releases
        for nid, end, gpus in self.admitted_ends[self._merged :]:
            releases.setdefault(nid, []).append((end, gpus))
        self._merged = len(self.admitted_ends)
        free: dict[str, dict[tuple[str, str], int]] = {}
        cap_free = self.cap.free
        for nid in self._nodes_by_type.get(t, ()):
            if r.colonies is None or nid[0] in r.colonies:
                free.setdefault(nid[0], {})[nid] = cap_free[nid]
        best: tuple[float, str] | None = None
        for colony in sorted(free):
            start = gang_start(r.nodes, r.gpus_per_node, self.now, free[colony], releases)
            if start is not None and (best is None or start < best[0]):
                best = (start, colony)
        if best is None:
            return self.now
        start, colony = best
        found = node_reservation(r.key, r.nodes, r.gpus_per_node, start, free[colony], releases)
        self.node_res.setdefault(t, []).append(found)
        return start

    def _nothing_can_start(self, smallest: int, least: int, shortest: float) -> bool:
        """Whether no request left in this pass could start on any GPU type: no node has room for
        `smallest` GPUs, the type is closed, or its free GPUs are held for reservations that a request
        of `least` GPUs running `shortest` seconds (the least of any request) would delay."""
        for t in self.cap.types:
            if not self.cap.fits_somewhere(t, 1, smallest):
                continue
            timeline = self.timelines[t]
            if timeline.frozen_by is not None:
                continue
            if timeline.blocker(least, self.now + shortest) is not None:
                continue
            return False
        return True

    def _estimate_deferred(self) -> None:
        """Estimates of the waiting requests without a reservation, in pass order (list scheduling
        after the reservations), the first ESTIMATE_LIMIT of them."""
        for r, types, quota in self.deferred:
            if self.budget <= 0:
                self._capped(r)
                continue
            self.budget -= 1
            if quota:
                self.quota_waits.append((r, types))
                continue
            open_types = [t for t in types if self.timelines[t].frozen_by is None]
            placed = self._simulate(r, open_types, self.now)
            if placed is None:
                self._freeze(open_types, r.key)
                self.starts[r.key] = None
                continue
            start, t = placed
            self.starts[r.key] = start if start > self.now else self.timelines[t].first_release()

    def _freeze(self, types: Sequence[str], key: str) -> None:
        for t in types:
            self.timelines[t].frozen_by = key
            self._frozen = True

    def _simulate(self, r: GpuRequest, types: Sequence[str], not_before: float) -> tuple[float, str] | None:
        """Place r in the simulation at its earliest start over the types; None when none is known."""
        best: tuple[float, str] | None = None
        for t in types:
            start = self.timelines[t].peek(r.gpus, not_before)
            if start is not None and (best is None or (start, t) < best):
                best = (start, t)
        if best is not None:
            self.timelines[best[1]].commit(r.key, r.gpus, best[0], r.duration_s)
        return best

    def _capped(self, r: GpuRequest) -> None:
        self.starts[r.key] = None
        self.reasons[r.key] = (
            f"{self.reasons.get(r.key, 'waiting')}; start not estimated "
            f"(only the first {ESTIMATE_LIMIT} waiting requests are)"
        )

    def _quota_start(self, r: GpuRequest, types: Sequence[str]) -> float | None:
        """The earliest time the cohort can lend r its quota on one of the types, from the declared
        ends of running and admitted requests (None: no known end gives enough back)."""
        if self._forecast_cache is None or self._forecast_cache[0] != len(self.holds):
            self._forecast_cache = (len(self.holds), self._forecast())
        forecast = self._forecast_cache[1]
        times = [w for t in types if (w := forecast.earliest(r.queue, t, r.gpus, self.now)) is not None]
        return min(times) if times else None

    def _forecast(self) -> QuotaForecast:
        releases = [
            (
                run.started_s + run.request.duration_s,
                run.request.queue,
                run.placement.gpu_type,
                run.request.gpus,
            )
            for run in self.snapshot.running
            if run.request.duration_s is not None
        ]
        return QuotaForecast(self.book, releases + self.holds)

    def _forecast_quota(self) -> None:
        if not self.quota_waits:
            return
        forecast = self._forecast()
        memo: dict[tuple[str, tuple[str, ...], int], float | None] = {}
        for r, types in self.quota_waits:
            shape = (r.queue, tuple(types), r.gpus)
            if shape not in memo:
                times = [
                    w for t in types if (w := forecast.earliest(r.queue, t, r.gpus, self.now)) is not None
                ]
                memo[shape] = min(times) if times else None
            self.starts[r.key] = memo[shape]
