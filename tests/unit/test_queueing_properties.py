"""Properties of the scheduler core on random snapshots (hypothesis)."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import replace
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from colony.scheduling.offers.model import Offer
from colony.scheduling.queueing.core import schedule
from colony.scheduling.queueing.model import (
    ANY_GPU_TYPE,
    ColonyInfo,
    Decisions,
    GpuNode,
    GpuRequest,
    NodeAllocation,
    Placement,
    QueueQuota,
    RunningRequest,
    Snapshot,
)
from colony.scheduling.queueing.ordering import response_ratio, serve_order
from colony.scheduling.queueing.timeline import Timeline

NOW = 10_000.0
TYPES = ("A100", "H100")
ORDERS = ("fifo", "priority", "default", "shortest", "sjf")
POLICIES = ("cheapest", "binpack", "spread", "ordered")
OFFERS = (
    Offer("aws", "us-east-1", None, "a100.8x", "A100", 8, 96, 1152, 32.0, None),
    Offer("aws", "us-east-1", None, "a100.1x", "A100", 1, 12, 100, 4.5, None),
    Offer("aws", "us-east-1", None, "h100.8x", "H100", 8, 192, 2048, 98.0, None),
)
SETTINGS = settings(max_examples=200, deadline=None)


@st.composite
def snapshots(
    draw: st.DrawFn,
    *,
    with_queues: bool = True,
    evictable: bool = True,
    provision: bool = True,
    orders: tuple[str, ...] = ORDERS,
    cohort: bool = False,
) -> Snapshot:
    """A few colonies of a few nodes, queues with cohorts, running requests that fit, pending ones.
    With `cohort`, every request is in one of 2-3 queues of one cohort (borrowing, reclaim)."""
    colonies = []
    gpu_nodes: list[GpuNode] = []
    for c in range(draw(st.integers(1, 3))):
        name = f"c{c}"
        colonies.append(
            ColonyInfo(name, draw(st.sampled_from([None, 1.0, 2.0])), order=draw(st.integers(0, 2)))
        )
        gpu = draw(st.sampled_from(TYPES))
        for j in range(draw(st.integers(1, 4))):
            gpu_nodes.append(GpuNode(name, f"n{j}", gpu, draw(st.sampled_from([1, 2, 4, 8]))))

    queues: list[QueueQuota] = []
    if cohort:
        for q in range(draw(st.integers(2, 3))):
            key = draw(st.sampled_from([*TYPES, ANY_GPU_TYPE, ANY_GPU_TYPE]))
            limit = draw(st.sampled_from([None, 0, 2, 8]))
            queues.append(
                QueueQuota(
                    f"q{q}",
                    {key: draw(st.sampled_from([0, 4, 8, 8, 16]))},
                    cohort="x",
                    borrowing_limit={} if limit is None else {key: limit},
                    weight=draw(st.sampled_from([1.0, 2.0])),
                    strategy=draw(st.sampled_from(["", "", "fifo", "shortest"])),
                )
            )
    elif with_queues:
        for q in range(draw(st.integers(0, 3))):
            keys = draw(st.lists(st.sampled_from([*TYPES, ANY_GPU_TYPE]), max_size=2, unique=True))
            queues.append(
                QueueQuota(
                    f"q{q}",
                    {k: draw(st.sampled_from([0, 2, 4, 8, 16])) for k in keys},
                    cohort=draw(st.sampled_from([None, "x", "x"])),
                    borrowing_limit={k: draw(st.integers(0, 8)) for k in keys if draw(st.booleans())},
                    weight=draw(st.sampled_from([1.0, 2.0])),
                    strategy=draw(st.sampled_from(["", "", "fifo", "shortest"])),
                )
            )
    queue_names = [] if cohort else [""]
    queue_names += [q.name for q in queues]
    if with_queues and not cohort and draw(st.booleans()):
        queue_names.append("ghost")

    # running requests fill most nodes: one per node, or a two-node gang of equal shares
    running: list[RunningRequest] = []
    run_queues = [q.name for q in queues] if cohort else ["", *(q.name for q in queues)]
    i = 0
    while i < len(gpu_nodes):
        node = gpu_nodes[i]
        share = draw(st.sampled_from([0, 1, 2, 4, 8, 8]))
        share = min(share, node.capacity)
        mate = gpu_nodes[i + 1] if i + 1 < len(gpu_nodes) else None
        pair = (
            mate is not None
            and (mate.colony, mate.gpu_type) == (node.colony, node.gpu_type)
            and mate.capacity >= share
            and draw(st.integers(0, 3)) == 0
        )
        i += 2 if pair else 1
        if share == 0:
            continue
        held = [node, mate] if pair and mate is not None else [node]
        request = GpuRequest(
            f"run{i}",
            draw(st.sampled_from(run_queues)),
            draw(st.integers(0, 2)),
            0.0,
            (node.gpu_type,),
            len(held),
            share,
            duration_s=draw(st.sampled_from([None, 50.0, 200.0, 1000.0])),
            evictable=evictable and draw(st.integers(0, 3)) > 0,
        )
        started = NOW - draw(st.sampled_from([0.0, 100.0, 500.0]))
        placement = Placement(node.colony, node.gpu_type, tuple(NodeAllocation(n.name, share) for n in held))
        running.append(RunningRequest(request, placement, started))

    pending = [
        GpuRequest(
            f"p{i}",
            draw(st.sampled_from(queue_names)),
            draw(st.integers(0, 1 if cohort else 3)),
            float(draw(st.integers(0, 5))),
            tuple(draw(st.lists(st.sampled_from(TYPES), max_size=2, unique=True))),
            draw(st.integers(1, 3)),
            draw(st.sampled_from([1, 2, 4, 8])),
            duration_s=draw(st.sampled_from([None, 30.0, 100.0, 100.0, 400.0])),
            evictable=draw(st.booleans()),
            auto_provision=provision and draw(st.integers(0, 4)) == 0,
            colonies=draw(st.sampled_from([None, None, frozenset({"c0"}), frozenset({"c1", "c2"})])),
        )
        for i in range(draw(st.integers(1, 8)))
    ]
    return Snapshot(
        now_s=NOW,
        pending=tuple(pending),
        running=tuple(running),
        nodes=tuple(gpu_nodes),
        colonies=tuple(colonies),
        queues=tuple(queues),
        offers=OFFERS if provision else (),
        placement_policy=draw(st.sampled_from(POLICIES)),
        order=draw(st.sampled_from(orders)),
        aging_s=draw(st.sampled_from([1.0, 9_997.0, 21_600.0])),
    )


ANY_SNAPSHOT = st.one_of(snapshots(), snapshots(cohort=True))


def _keys(queue: QueueQuota, gpu_type: str) -> list[str]:
    return [k for k in (gpu_type, ANY_GPU_TYPE) if k in queue.nominal] or [gpu_type]


def _usage(
    queues: dict[str, QueueQuota], charges: Iterable[tuple[str, str, int]]
) -> dict[tuple[str, str], int]:
    usage: dict[tuple[str, str], int] = {}
    for queue, gpu_type, gpus in charges:
        if queue in queues:
            for k in _keys(queues[queue], gpu_type):
                usage[(queue, k)] = usage.get((queue, k), 0) + gpus
    return usage


@SETTINGS
@given(ANY_SNAPSHOT)
def test_every_pending_request_is_admitted_or_estimated_once(s: Snapshot) -> None:
    d = schedule(s)
    admitted = [a.key for a in d.admitted]
    assert len(admitted) == len(set(admitted))
    assert sorted(admitted + list(d.estimates)) == sorted(r.key for r in s.pending)
    waiting = set(d.estimates)
    assert {p.key for p in d.provisions} <= waiting
    assert {p.for_key for p in d.preemptions} <= waiting
    assert all(e.position >= 1 for e in d.estimates.values())


@SETTINGS
@given(ANY_SNAPSHOT)
def test_quota_is_never_exceeded_beyond_nominal_and_what_the_cohort_can_lend(s: Snapshot) -> None:
    d = schedule(s)
    queues = {q.name: q for q in s.queues}
    pending = {r.key: r for r in s.pending}
    before = _usage(queues, ((r.request.queue, r.placement.gpu_type, r.request.gpus) for r in s.running))
    added = [(pending[a.key].queue, a.placement.gpu_type, pending[a.key].gpus) for a in d.admitted]
    added += [(pending[p.key].queue, p.offer.offer.accelerator, pending[p.key].gpus) for p in d.provisions]
    after = _usage(
        queues, [(r.request.queue, r.placement.gpu_type, r.request.gpus) for r in s.running] + added
    )
    charged = {key for key in after if after[key] > before.get(key, 0)}
    for queue, key in charged:
        q = queues[queue]
        nominal = q.nominal.get(key, 0)
        limit = q.borrowing_limit.get(key) if q.cohort is not None else 0
        assert after[(queue, key)] <= nominal + (math.inf if limit is None else limit)
        members = [m for m in queues.values() if m.cohort is not None and m.cohort == q.cohort] or [q]
        cohort_nominal = sum(m.nominal.get(key, 0) for m in members)
        cohort_usage = sum(after.get((m.name, key), 0) for m in members)
        assert cohort_usage <= cohort_nominal
    for a in d.admitted:
        r = pending[a.key]
        assert not r.queue or r.queue in queues


@SETTINGS
@given(ANY_SNAPSHOT)
def test_gangs_are_placed_whole_on_distinct_nodes_of_one_colony_with_room(s: Snapshot) -> None:
    d = schedule(s)
    pending = {r.key: r for r in s.pending}
    by_node = {(n.colony, n.name): n for n in s.nodes}
    held: dict[tuple[str, str], int] = {}
    for running in s.running:
        for a in running.placement.nodes:
            nid = (running.placement.colony, a.node)
            held[nid] = held.get(nid, 0) + a.gpus
    for admit in d.admitted:
        r, p = pending[admit.key], admit.placement
        assert len(p.nodes) == r.nodes
        assert len({a.node for a in p.nodes}) == r.nodes
        assert all(a.gpus == r.gpus_per_node for a in p.nodes)
        assert not r.gpu_types or p.gpu_type in r.gpu_types
        assert r.colonies is None or p.colony in r.colonies
        for a in p.nodes:
            node = by_node[(p.colony, a.node)]
            assert node.gpu_type == p.gpu_type
            held[(p.colony, a.node)] = held.get((p.colony, a.node), 0) + a.gpus
    for nid, gpus in held.items():
        if nid in by_node:
            before = sum(
                a.gpus for r in s.running for a in r.placement.nodes if (r.placement.colony, a.node) == nid
            )
            assert gpus <= max(by_node[nid].capacity, before)


@SETTINGS
@given(st.one_of(snapshots(orders=("default",)), snapshots(orders=("default",), cohort=True)))
def test_preemption_only_evicts_evictable_lower_priority_requests_or_borrowers(s: Snapshot) -> None:
    d = schedule(s)
    running = {r.request.key: r for r in s.running}
    pending = {r.key: r for r in s.pending}
    queues = {q.name: q for q in s.queues}
    usage = _usage(queues, ((r.request.queue, r.placement.gpu_type, r.request.gpus) for r in s.running))
    borrowing = {q for (q, k), u in usage.items() if u > queues[q].nominal.get(k, 0)}
    victims = [p.victim for p in d.preemptions]
    assert len(victims) == len(set(victims))
    admitted = {a.key for a in d.admitted}
    for p in d.preemptions:
        victim, preemptor = running[p.victim], pending[p.for_key]
        assert victim.request.evictable
        assert p.for_key not in admitted
        if victim.request.priority >= preemptor.priority:
            vq = victim.request.queue
            assert vq in borrowing and vq != preemptor.queue
            assert queues[vq].cohort is not None and queues[vq].cohort == queues[preemptor.queue].cohort
        assert d.estimates[p.for_key].start_s == s.now_s


@SETTINGS
@given(snapshots(orders=("fifo", "priority")))
def test_strict_orders_never_preempt_or_backfill(s: Snapshot) -> None:
    d = schedule(s)
    assert d.preemptions == ()
    assert not any(a.backfilled for a in d.admitted)


def _started(s: Snapshot, d: Decisions, leave_out: str | None) -> Snapshot:
    """The snapshot once the admits of d run (all but `leave_out`, which stays pending)."""
    pending = {r.key: r for r in s.pending}
    starting = [
        RunningRequest(pending[a.key], a.placement, s.now_s) for a in d.admitted if a.key != leave_out
    ]
    started = {r.request.key for r in starting}
    return Snapshot(
        now_s=s.now_s,
        pending=tuple(r for r in s.pending if r.key not in started),
        running=s.running + tuple(starting),
        nodes=s.nodes,
        colonies=s.colonies,
        queues=s.queues,
        offers=s.offers,
        placement_policy=s.placement_policy,
        order=s.order,
        aging_s=s.aging_s,
    )


def _start(d: Decisions, key: str, now: float) -> float:
    if any(a.key == key for a in d.admitted):
        return now
    start = d.estimates[key].start_s
    return math.inf if start is None else start


@SETTINGS
@given(snapshots(with_queues=False, evictable=False, provision=False, orders=("default", "shortest")))
def test_a_backfilled_request_never_delays_the_estimated_start_of_a_reserved_head(s: Snapshot) -> None:
    """EASY backfill: the requests holding a head reservation (Decisions.reserved) start no later
    with any one backfilled admission than without it."""
    d = schedule(s)
    assert set(d.reserved) <= set(d.estimates)
    for admit in d.admitted:
        if not admit.backfilled:
            continue
        with_it = schedule(_started(s, d, None))
        without = schedule(_started(s, d, admit.key))
        for key in d.reserved:
            assert _start(with_it, key, s.now_s) <= _start(without, key, s.now_s), (admit.key, key)


@SETTINGS
@given(ANY_SNAPSHOT, st.randoms(use_true_random=False))
def test_decisions_are_deterministic_whatever_the_input_order(s: Snapshot, rng: random.Random) -> None:
    d = schedule(s)
    assert schedule(s) == d

    def shuffled(items: tuple[object, ...]) -> list[object]:
        out = list(items)
        rng.shuffle(out)
        return out

    again = replace(
        s,
        pending=tuple(shuffled(s.pending)),
        running=tuple(shuffled(s.running)),
        nodes=tuple(shuffled(s.nodes)),
        colonies=tuple(shuffled(s.colonies)),
        queues=tuple(shuffled(s.queues)),
    )
    assert schedule(again) == d


@SETTINGS
@given(
    st.integers(0, 16),
    st.lists(st.tuples(st.sampled_from([0.0, 10.0, 20.0, 50.0, 100.0]), st.integers(1, 8)), max_size=6),
    st.lists(
        st.one_of(
            st.tuples(st.just("wait"), st.integers(1, 10), st.sampled_from([None, 5.0, 30.0, 200.0])),
            st.tuples(st.just("admit"), st.integers(1, 6), st.sampled_from([None, 5.0, 15.0, 60.0, 500.0])),
        ),
        max_size=12,
    ),
)
def test_timeline_holds_that_pass_the_blocker_check_change_no_placement(
    free: int, releases: list[tuple[float, int]], steps: list[tuple[str, int, float | None]]
) -> None:
    """The simulation behind backfill: requests admitted now that `blocker` lets through, replayed as
    if they had been running from the start, leave every waiting request's start where it was."""
    ends = [(NOW + at, f"r{i}", gpus) for i, (at, gpus) in enumerate(releases)]
    timeline = Timeline(NOW, free, list(ends))
    placed: list[tuple[str, int, float, float | None]] = []
    held: list[tuple[str, int, float | None]] = []
    for i, (kind, gpus, duration) in enumerate(steps):
        if kind == "wait":
            start = timeline.peek(gpus, NOW)
            if start is not None:
                timeline.commit(f"w{i}", gpus, start, duration)
                placed.append((f"w{i}", gpus, start, duration))
        else:
            end = None if duration is None else NOW + duration
            if timeline.blocker(gpus, end) is None:
                timeline.hold(f"a{i}", gpus, end)
                held.append((f"a{i}", gpus, end))
    replay = Timeline(
        NOW,
        free - sum(g for _, g, _ in held),
        ends + [(end, key, g) for key, g, end in held if end is not None],
    )
    for key, gpus, start, duration in placed:
        assert replay.peek(gpus, NOW) == start
        replay.commit(key, gpus, start, duration)


@SETTINGS
@given(ANY_SNAPSHOT)
def test_a_pass_without_estimates_decides_the_same(s: Snapshot) -> None:
    full = schedule(s)
    quick = schedule(replace(s, estimates=False))
    assert quick.admitted == full.admitted
    assert quick.preemptions == full.preemptions
    assert quick.provisions == full.provisions
    assert quick.estimates == {}


@SETTINGS
@given(snapshots(orders=("shortest",)))
def test_shortest_first_serves_aged_requests_first_then_the_highest_response_ratio(s: Snapshot) -> None:
    ranked = serve_order(s.pending, "shortest", s.now_s, s.aging_s)
    for a, b in pairwise(ranked):
        if a.priority != b.priority:
            assert a.priority > b.priority
            continue
        aged_a, aged_b = (s.now_s - r.submitted_s >= s.aging_s for r in (a, b))
        assert aged_a or not aged_b, "an aged request goes before every younger one"
        if aged_a and aged_b:
            assert (a.submitted_s, a.key) <= (b.submitted_s, b.key)
        elif not aged_a:
            assert response_ratio(a, s.now_s) >= response_ratio(b, s.now_s)
