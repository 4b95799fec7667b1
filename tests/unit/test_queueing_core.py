"""The scheduler core, rule by rule, on small hand-made snapshots."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

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
    PlacementStrategy,
    QueueOrder,
    QueueQuota,
    RunningRequest,
    Snapshot,
)
from colony.scheduling.queueing.ordering import aged_priority

NOW = 1000.0


def req(key: str, gpus: int = 1, nodes: int = 1, **fields: Any) -> GpuRequest:
    """A pending request of `nodes` x `gpus` A100s, submitted in key order unless told otherwise."""
    fields.setdefault("queue", "")
    fields.setdefault("priority", 0)
    fields.setdefault("submitted_s", 0.0)
    fields.setdefault("gpu_types", ("A100",))
    return GpuRequest(key=key, nodes=nodes, gpus_per_node=gpus, **fields)


def run(request: GpuRequest, colony: str, nodes: Sequence[str], started_s: float = 0.0) -> RunningRequest:
    """`request` running on the given nodes of a colony (type: its first acceptable one)."""
    allocations = tuple(NodeAllocation(n, request.gpus_per_node) for n in nodes)
    return RunningRequest(request, Placement(colony, request.gpu_types[0], allocations), started_s)


def nodes(colony: str, *capacities: int, gpu: str = "A100", prefix: str = "n") -> tuple[GpuNode, ...]:
    """Nodes n0, n1, ... of a colony with the given GPU capacities."""
    return tuple(GpuNode(colony, f"{prefix}{i}", gpu, c) for i, c in enumerate(capacities))


def snap(
    pending: Sequence[GpuRequest],
    *,
    running: Sequence[RunningRequest] = (),
    gpu_nodes: Sequence[GpuNode] = (),
    colonies: Sequence[ColonyInfo] = (),
    queues: Sequence[QueueQuota] = (),
    offers: Sequence[Offer] = (),
    policy: PlacementStrategy = "cheapest",
    order: QueueOrder = "default",
) -> Snapshot:
    return Snapshot(
        now_s=NOW,
        pending=tuple(pending),
        running=tuple(running),
        nodes=tuple(gpu_nodes),
        colonies=tuple(colonies),
        queues=tuple(queues),
        offers=tuple(offers),
        placement_policy=policy,
        order=order,
    )


def admitted(d: Decisions) -> list[str]:
    return [a.key for a in d.admitted]


def admit_of(d: Decisions, key: str) -> Any:
    return next(a for a in d.admitted if a.key == key)


def used_nodes(d: Decisions, key: str) -> list[str]:
    return [a.node for a in admit_of(d, key).placement.nodes]


# -- order ----------------------------------------------------------------------------------------


def test_fifo_admits_in_submission_order_until_the_head_blocks_then_nothing_passes_it() -> None:
    pending = [
        req("a", 4, submitted_s=1),
        req("b", 4, submitted_s=2),
        req("big", 8, submitted_s=3, duration_s=10),
        req("small", 1, submitted_s=4, duration_s=1),
    ]
    d = schedule(snap(pending, gpu_nodes=nodes("c", 8, 4), order="fifo"))
    assert admitted(d) == ["a", "b"]
    assert "big" in d.estimates and "capacity" in d.estimates["big"].reason
    assert "waiting behind big" in d.estimates["small"].reason
    assert not d.preemptions


def test_fifo_ignores_priority_and_priority_order_ignores_submission_time() -> None:
    pending = [req("early", 8, submitted_s=1, priority=0), req("urgent", 8, submitted_s=2, priority=9)]
    fifo = schedule(snap(pending, gpu_nodes=nodes("c", 8), order="fifo"))
    assert admitted(fifo) == ["early"]
    by_priority = schedule(snap(pending, gpu_nodes=nodes("c", 8), order="priority"))
    assert admitted(by_priority) == ["urgent"]
    assert "waiting behind urgent" not in by_priority.estimates["early"].reason  # blocked itself: capacity
    assert "capacity" in by_priority.estimates["early"].reason


def test_priority_order_head_blocks_lower_priorities_even_when_they_fit() -> None:
    pending = [req("head", 8, priority=5, duration_s=10), req("low", 1, priority=1, duration_s=1)]
    running = [run(req("r", 4, duration_s=50), "c", ["n0"])]
    d = schedule(snap(pending, running=running, gpu_nodes=nodes("c", 8), order="priority"))
    assert admitted(d) == []
    assert "waiting behind head" in d.estimates["low"].reason


def test_default_order_serves_priority_first() -> None:
    pending = [req("low", 8, priority=1, submitted_s=0), req("high", 8, priority=2, submitted_s=5)]
    d = schedule(snap(pending, gpu_nodes=nodes("c", 8)))
    assert admitted(d) == ["high"]


def test_weighted_drf_gives_a_weight_2_queue_twice_the_gpus_of_a_weight_1_queue() -> None:
    queues = [QueueQuota("q1", {"A100": 9}, weight=1.0), QueueQuota("q2", {"A100": 9}, weight=2.0)]
    pending = [req(f"{q}-{i}", queue=q, submitted_s=i) for q in ("q1", "q2") for i in range(9)]
    d = schedule(snap(pending, gpu_nodes=nodes("c", *[1] * 9), queues=queues))
    assert Counter(k.split("-")[0] for k in admitted(d)) == {"q1": 3, "q2": 6}
    # lowest share with the head counted first: q2 (1/9/2 < 1/9), then q1-0 (tie, earlier head), ...
    assert admitted(d)[:4] == ["q2-0", "q1-0", "q2-1", "q2-2"]


def test_after_a_reclaim_the_owner_goes_before_the_borrower_it_evicted() -> None:
    # the pass after "x1" was preempted for "y1": both pending, x1 submitted first, both queues idle
    queues = [QueueQuota("x", {"A100": 4}, cohort="c"), QueueQuota("y", {"A100": 4}, cohort="c")]
    pending = [
        req("x1", 4, nodes=2, queue="x", submitted_s=0, evictable=True),
        req("y1", 4, queue="y", submitted_s=10),
    ]
    d = schedule(snap(pending, gpu_nodes=nodes("c", 4, 4), queues=queues))
    assert admitted(d) == ["y1"]
    assert "quota" in d.estimates["x1"].reason


def test_drf_at_equal_priority_does_not_override_priority() -> None:
    queues = [QueueQuota("busy", {"A100": 8}), QueueQuota("idle", {"A100": 8})]
    running = [run(req("r", 4, queue="busy"), "c", ["n0"])]
    pending = [req("busy-high", 4, queue="busy", priority=3), req("idle-low", 4, queue="idle", priority=1)]
    d = schedule(snap(pending, running=running, gpu_nodes=nodes("c", 8), queues=queues))
    assert admitted(d) == ["busy-high"]


# -- quota ----------------------------------------------------------------------------------------


def test_quota_admits_up_to_nominal_exactly() -> None:
    queues = [QueueQuota("q", {"A100": 4})]
    pending = [
        req("a", 2, queue="q", submitted_s=1),
        req("b", 2, queue="q", submitted_s=2),
        req("c", 1, queue="q", submitted_s=3),
    ]
    d = schedule(snap(pending, gpu_nodes=nodes("c", 8), queues=queues))
    assert admitted(d) == ["a", "b"]
    assert not any(a.borrowed for a in d.admitted)
    assert "quota" in d.estimates["c"].reason and "'q'" in d.estimates["c"].reason


def test_any_type_quota_counts_every_gpu_type_and_running_usage() -> None:
    queues = [QueueQuota("q", {ANY_GPU_TYPE: 6})]
    running = [run(req("r", 2, queue="q", gpu_types=("H100",)), "h", ["n0"])]
    pending = [
        req("a", 4, queue="q", submitted_s=1),
        req("b", 1, queue="q", gpu_types=("H100",), submitted_s=2),
    ]
    d = schedule(
        snap(pending, running=running, gpu_nodes=nodes("c", 8) + nodes("h", 8, gpu="H100"), queues=queues)
    )
    assert admitted(d) == ["a"]
    assert "quota" in d.estimates["b"].reason


def test_missing_queue_waits_naming_it_and_blocks_nobody() -> None:
    pending = [req("lost", 1, queue="nope", submitted_s=1), req("ok", 1, submitted_s=2)]
    d = schedule(snap(pending, gpu_nodes=nodes("c", 8), order="fifo"))
    assert admitted(d) == ["ok"]
    assert "'nope'" in d.estimates["lost"].reason and "does not exist" in d.estimates["lost"].reason


def test_borrowing_within_the_cohort_up_to_the_borrowing_limit() -> None:
    queues = [
        QueueQuota("qa", {"A100": 4}, cohort="c", borrowing_limit={"A100": 2}),
        QueueQuota("qb", {"A100": 4}, cohort="c"),
    ]
    pending = [
        req("own", 4, queue="qa", submitted_s=1),
        req("borrow", 2, queue="qa", submitted_s=2),
        req("over-limit", 1, queue="qa", submitted_s=3),
    ]
    d = schedule(snap(pending, gpu_nodes=nodes("c", 8, 8), queues=queues))
    assert admitted(d) == ["own", "borrow"]
    assert not admit_of(d, "own").borrowed and admit_of(d, "borrow").borrowed
    assert "borrowing limit 2" in d.estimates["over-limit"].reason


def test_borrowing_is_limited_to_the_cohorts_unused_nominal_net_of_other_borrowers() -> None:
    queues = [
        QueueQuota("qa", {"A100": 2}, cohort="c"),
        QueueQuota("qb", {"A100": 2}, cohort="c"),
        QueueQuota("lender", {"A100": 4}, cohort="c"),
    ]
    running = [run(req("lender-run", 1, queue="lender"), "c", ["n0"])]
    pending = [req("a", 4, queue="qa", submitted_s=1), req("b", 4, queue="qb", submitted_s=2)]
    d = schedule(snap(pending, running=running, gpu_nodes=nodes("c", 8, 8), queues=queues))
    # the lender has 3 unused: qa borrows 2 of them, qb only finds 1 left for its 2 over nominal
    assert admitted(d) == ["a"]
    assert admit_of(d, "a").borrowed
    assert "cohort 'c'" in d.estimates["b"].reason


def test_a_queue_without_cohort_never_borrows() -> None:
    queues = [QueueQuota("solo", {"A100": 2}, borrowing_limit={"A100": 8}), QueueQuota("other", {"A100": 8})]
    d = schedule(snap([req("a", 3, queue="solo")], gpu_nodes=nodes("c", 8), queues=queues))
    assert admitted(d) == []
    assert "quota" in d.estimates["a"].reason


def test_a_request_larger_than_its_quota_can_ever_be_blocks_nobody() -> None:
    queues = [QueueQuota("q", {"A100": 2})]
    pending = [req("huge", 4, queue="q", submitted_s=1), req("next", 1, queue="q", submitted_s=2)]
    d = schedule(snap(pending, gpu_nodes=nodes("c", 8), queues=queues, order="fifo"))
    assert admitted(d) == ["next"]
    assert "can never" in d.estimates["huge"].reason


# -- preemption -----------------------------------------------------------------------------------


def test_reclaim_preempts_a_borrower_of_the_cohort_for_a_queue_within_its_nominal() -> None:
    queues = [QueueQuota("qa", {"A100": 4}, cohort="c"), QueueQuota("qb", {"A100": 4}, cohort="c")]
    borrower = run(req("qb-run", 8, queue="qb", priority=5, evictable=True), "c", ["n0"])
    d = schedule(
        snap(
            [req("qa-want", 4, queue="qa", priority=1)],
            running=[borrower],
            gpu_nodes=nodes("c", 8),
            queues=queues,
        )
    )
    assert admitted(d) == []
    assert [(p.victim, p.for_key) for p in d.preemptions] == [("qb-run", "qa-want")]
    assert "reclaim" in d.preemptions[0].reason
    estimate = d.estimates["qa-want"]
    assert estimate.start_s == NOW and "qb-run" in estimate.reason


def test_no_reclaim_when_the_preemptor_would_itself_borrow() -> None:
    queues = [QueueQuota("qa", {"A100": 2}, cohort="c"), QueueQuota("qb", {"A100": 6}, cohort="c")]
    borrower = run(req("qb-run", 8, queue="qb", priority=5, evictable=True), "c", ["n0"])
    d = schedule(
        snap(
            [req("qa-want", 4, queue="qa", priority=1)],
            running=[borrower],
            gpu_nodes=nodes("c", 8),
            queues=queues,
        )
    )
    assert d.preemptions == ()


def test_priority_preemption_takes_lowest_priority_then_most_recent_victims() -> None:
    running = [
        run(req("p1", 4, priority=1, evictable=True), "c", ["n0"], started_s=10),
        run(req("p0-old", 2, priority=0, evictable=True), "c", ["n0"], started_s=5),
        run(req("p0-new", 2, priority=0, evictable=True), "c", ["n0"], started_s=20),
    ]
    d = schedule(snap([req("want", 4, priority=5)], running=running, gpu_nodes=nodes("c", 8)))
    assert sorted(p.victim for p in d.preemptions) == ["p0-new", "p0-old"]
    assert all(p.for_key == "want" and "priority 5 > 0" in p.reason for p in d.preemptions)


def test_priority_preemption_takes_as_few_victims_as_possible() -> None:
    running = [
        run(req("small-new", 2, priority=0, evictable=True), "c", ["n0"], started_s=20),
        run(req("big-old", 4, priority=0, evictable=True), "c", ["n0"], started_s=5),
        run(req("rest", 2, priority=0), "c", ["n0"], started_s=1),
    ]
    d = schedule(snap([req("want", 4, priority=5)], running=running, gpu_nodes=nodes("c", 8)))
    assert [p.victim for p in d.preemptions] == ["big-old"]


def test_non_evictable_requests_are_never_preempted() -> None:
    running = [run(req("pinned", 8, priority=0), "c", ["n0"])]
    d = schedule(snap([req("want", 8, priority=9)], running=running, gpu_nodes=nodes("c", 8)))
    assert d.preemptions == ()
    assert "capacity" in d.estimates["want"].reason


def test_no_preemption_for_a_request_that_would_still_not_fit() -> None:
    running = [
        run(req("evictable", 8, priority=0, evictable=True), "c", ["n0"]),
        run(req("pinned", 8, priority=0), "c", ["n1"]),
    ]
    d = schedule(snap([req("gang", 8, nodes=2, priority=9)], running=running, gpu_nodes=nodes("c", 8, 8)))
    assert d.preemptions == ()


def test_no_preemption_of_equal_or_higher_priority_without_reclaim() -> None:
    running = [run(req("same", 8, priority=5, evictable=True), "c", ["n0"])]
    d = schedule(snap([req("want", 8, priority=5)], running=running, gpu_nodes=nodes("c", 8)))
    assert d.preemptions == ()


def test_an_aged_request_is_not_preempted_by_a_request_whose_priority_it_has_reached() -> None:
    """Priorities 0, 1 and 2 in use (the levels are the priorities of the pass's requests), aging 100 s:
    "aged" was submitted 150 s ago (effective priority 1: back in the queue it would go before a fresh
    priority-1 request), "young" 50 s ago (0). A fresh priority-1 request may evict "young" but not
    "aged", neither for priority nor to reclaim quota (evicting it would undo its aging); a priority-2
    one, or a priority-1 one that has itself aged to 2, may evict both."""
    running = [
        run(
            req("aged", 8, priority=0, evictable=True, submitted_s=NOW - 150, queue="b"),
            "c",
            ["n0"],
            NOW - 10,
        ),
        run(
            req("young", 8, priority=0, evictable=True, submitted_s=NOW - 50, queue="b"),
            "c",
            ["n1"],
            NOW - 10,
        ),
        run(req("one", 8, priority=1, queue="b"), "c", ["n2"], NOW - 10),
        run(req("two", 8, priority=2, queue="b"), "c", ["n3"], NOW - 10),
    ]
    gpu_nodes = nodes("c", 8, 8, 8, 8)

    def preempted(
        priority: int, gang: int, waited: float = 0.0, queues: Sequence[QueueQuota] = ()
    ) -> list[str]:
        queue = "a" if queues else ""
        want = req("want", 8, nodes=gang, priority=priority, submitted_s=NOW - waited, queue=queue)
        d = schedule(
            replace(snap([want], running=running, gpu_nodes=gpu_nodes, queues=queues), aging_s=100.0)
        )
        return sorted(p.victim for p in d.preemptions)

    assert preempted(1, 1) == ["young"]
    assert preempted(1, 2) == []  # "aged" is out of its reach: the gang would not fit
    assert preempted(2, 2) == ["aged", "young"]
    assert preempted(1, 2, waited=100.0) == ["aged", "young"]  # aged to 2 itself
    # reclaim: queue b borrows all of a's nominal (16 GPUs): "aged" is not taken back for "want"
    cohort = [
        QueueQuota("a", {"A100": 16}, cohort="x"),
        QueueQuota("b", {"A100": 16}, cohort="x"),
    ]
    assert preempted(0, 2, queues=cohort) == []
    assert preempted(0, 1, queues=cohort) == ["young"]
    # without aging across levels (one aging period is a long time), both are fair game
    d = schedule(
        snap([req("want", 8, nodes=2, priority=1, submitted_s=NOW)], running=running, gpu_nodes=gpu_nodes)
    )
    assert sorted(p.victim for p in d.preemptions) == ["aged", "young"]


def test_aging_raises_a_request_one_priority_level_per_aging_period() -> None:
    """Priorities 0, 5 and 9 in use, aging 100 s, one GPU: a priority-0 request that waited 150 s
    competes at 5 (aged: before a fresh 5, after a fresh 9); after 250 s, at 9 (before a fresh 9)."""
    fresh5 = req("fresh5", priority=5, submitted_s=NOW)
    fresh9 = req("fresh9", priority=9, submitted_s=NOW)

    def first(waited: float, *others: GpuRequest) -> list[str]:
        low = req("low", priority=0, submitted_s=NOW - waited)
        d = schedule(replace(snap([low, *others], gpu_nodes=nodes("c", 1)), aging_s=100.0))
        return admitted(d)

    assert first(50.0, fresh5) == ["fresh5"]
    assert first(150.0, fresh5) == ["low"]
    assert first(150.0, fresh5, fresh9) == ["fresh9"]
    assert first(250.0, fresh5, fresh9) == ["low"]
    # strict priority and FIFO do not age
    low = req("low", priority=0, submitted_s=NOW - 250.0)
    assert admitted(
        schedule(replace(snap([low, fresh9], gpu_nodes=nodes("c", 1), order="priority"), aging_s=100.0))
    ) == ["fresh9"]


@pytest.mark.parametrize(
    ("priority", "waited", "expected"),
    [(0, 99.0, 0), (0, 100.0, 5), (0, 250.0, 9), (0, 1e9, 9), (5, 100.0, 9), (9, 1e9, 9), (3, 100.0, 5)],
)
def test_aged_priority_climbs_the_ladder_of_priorities_in_use(
    priority: int, waited: float, expected: int
) -> None:
    assert aged_priority(priority, waited, (0, 5, 9), 100.0) == expected
    assert aged_priority(priority, waited, (0, 5, 9), 0.0) == 9  # no aging time: at the top at once
    assert aged_priority(priority, waited, (priority,), 100.0) == priority


def test_a_preemptor_reserves_the_rest_of_its_placement_and_each_victim_is_taken_once() -> None:
    running = [run(req("victim", 8, priority=0, evictable=True), "c", ["n0"])]
    pending = [
        req("first", 4, nodes=2, priority=9, submitted_s=1),
        req("second", 4, nodes=2, priority=9, submitted_s=2),
        req("low", 4, priority=1, submitted_s=3),
    ]
    d = schedule(snap(pending, running=running, gpu_nodes=nodes("c", 8, 4)))
    assert [(p.victim, p.for_key) for p in d.preemptions] == [("victim", "first")]
    # n1's 4 free GPUs are reserved for "first": nothing lower takes them now
    assert admitted(d) == []


# -- gang placement and policies ------------------------------------------------------------------


def test_a_gang_is_placed_whole_on_distinct_nodes_of_one_colony_or_not_at_all() -> None:
    gpu_nodes = nodes("c1", 4, 4) + nodes("c2", 8, prefix="m") + nodes("c3", 8, prefix="k")
    d = schedule(snap([req("2x8", 8, nodes=2), req("2x4", 4, nodes=2)], gpu_nodes=gpu_nodes))
    assert admitted(d) == ["2x4"]
    placement = admit_of(d, "2x4").placement
    assert placement.colony == "c1" and sorted(used_nodes(d, "2x4")) == ["n0", "n1"]
    assert "capacity" in d.estimates["2x8"].reason


def test_a_gang_never_spans_gpu_types() -> None:
    gpu_nodes = (GpuNode("c", "a", "A100", 8), GpuNode("c", "h", "H100", 8))
    d = schedule(snap([req("mixed", 8, nodes=2, gpu_types=("A100", "H100"))], gpu_nodes=gpu_nodes))
    assert admitted(d) == []


def test_a_gang_larger_than_any_colony_blocks_nobody() -> None:
    pending = [req("too-big", 8, nodes=3, submitted_s=1), req("fits", 8, submitted_s=2)]
    d = schedule(snap(pending, gpu_nodes=nodes("c", 8, 8), order="fifo"))
    assert admitted(d) == ["fits"]
    assert "can ever hold" in d.estimates["too-big"].reason


def test_requests_stay_on_their_colonies() -> None:
    gpu_nodes = nodes("c1", 8) + nodes("c2", 8, prefix="m")
    colonies = [ColonyInfo("c1", 1.0), ColonyInfo("c2", 2.0)]
    d = schedule(snap([req("pinned", 8, colonies=frozenset({"c2"}))], gpu_nodes=gpu_nodes, colonies=colonies))
    assert admit_of(d, "pinned").placement.colony == "c2"


@pytest.mark.parametrize("policy", ["cheapest", "binpack", "spread", "ordered"])
def test_a_requests_own_colony_order_fills_the_first_listed_colony_then_spills(
    policy: PlacementStrategy,
) -> None:
    """colony_order (fill-and-spill per request) wins over the policy: the dear first colony fills
    up before the cheap second one is used; a colony not in `colonies` is never used."""
    gpu_nodes = nodes("dear", 8) + nodes("cheap", 8, 8, prefix="m") + nodes("other", 8, prefix="o")
    colonies = [ColonyInfo("dear", 9.0, order=2), ColonyInfo("cheap", 1.0, order=1), ColonyInfo("other", 0.5)]
    allowed = frozenset({"dear", "cheap"})
    pending = [
        req(f"r{i}", 8, submitted_s=i, colonies=allowed, colony_order=("dear", "cheap")) for i in range(4)
    ]
    d = schedule(snap(pending, gpu_nodes=gpu_nodes, colonies=colonies, policy=policy))
    assert {a.key: a.placement.colony for a in d.admitted} == {"r0": "dear", "r1": "cheap", "r2": "cheap"}
    assert "among its colonies" in d.estimates["r3"].reason
    running = [run(req("held", 8), "dear", ["n0"])]
    d = schedule(snap(pending[:1], running=running, gpu_nodes=gpu_nodes, colonies=colonies, policy=policy))
    assert admit_of(d, "r0").placement.colony == "cheap"


@pytest.mark.parametrize(("policy", "node"), [("binpack", "n1"), ("spread", "n2"), ("cheapest", "n1")])
def test_binpack_takes_the_least_free_node_that_fits_and_spread_the_most(
    policy: PlacementStrategy, node: str
) -> None:
    running = [run(req("r0", 7), "c", ["n0"]), run(req("r1", 5), "c", ["n1"]), run(req("r2", 1), "c", ["n2"])]
    d = schedule(snap([req("want", 2)], running=running, gpu_nodes=nodes("c", 8, 8, 8), policy=policy))
    assert used_nodes(d, "want") == [node]


def test_binpack_and_spread_compare_colonies_by_the_nodes_they_would_use() -> None:
    running = [run(req("r", 6), "b", ["n0"])]
    gpu_nodes = nodes("a", 8) + nodes("b", 8)
    binpack = schedule(snap([req("want", 2)], running=running, gpu_nodes=gpu_nodes, policy="binpack"))
    spread = schedule(snap([req("want", 2)], running=running, gpu_nodes=gpu_nodes, policy="spread"))
    assert admit_of(binpack, "want").placement.colony == "b"
    assert admit_of(spread, "want").placement.colony == "a"


def test_cheapest_takes_the_lowest_priced_colony_unknown_prices_last() -> None:
    gpu_nodes = nodes("dear", 8) + nodes("cheap", 8) + nodes("unpriced", 8)
    colonies = [ColonyInfo("dear", 3.0), ColonyInfo("cheap", 1.5), ColonyInfo("unpriced", None)]
    d = schedule(
        snap(
            [req("a", 8, submitted_s=1), req("b", 8, submitted_s=2), req("c", 8, submitted_s=3)],
            gpu_nodes=gpu_nodes,
            colonies=colonies,
        )
    )
    assert [admit_of(d, k).placement.colony for k in "abc"] == ["cheap", "dear", "unpriced"]


def test_cheapest_binpacks_among_colonies_of_the_same_price() -> None:
    running = [run(req("r", 4), "y", ["n0"])]
    gpu_nodes = nodes("x", 8) + nodes("y", 8)
    colonies = [ColonyInfo("x", 2.0), ColonyInfo("y", 2.0)]
    d = schedule(snap([req("want", 4)], running=running, gpu_nodes=gpu_nodes, colonies=colonies))
    assert admit_of(d, "want").placement.colony == "y"


def test_ordered_fills_colonies_in_their_order_then_spills() -> None:
    gpu_nodes = nodes("cloud", 8) + nodes("onprem", 8)
    colonies = [ColonyInfo("cloud", 1.0, order=2), ColonyInfo("onprem", 9.0, order=1)]
    pending = [req("a", 8, submitted_s=1), req("b", 8, submitted_s=2)]
    d = schedule(snap(pending, gpu_nodes=gpu_nodes, colonies=colonies, policy="ordered"))
    assert [admit_of(d, k).placement.colony for k in "ab"] == ["onprem", "cloud"]


# -- backfill -------------------------------------------------------------------------------------


def _backfill(*pending: GpuRequest, ends: float | None = NOW + 100) -> Decisions:
    """One 8-GPU node, 6 GPUs held until `ends`; a high-priority 1x8 request waits for them."""
    duration = None if ends is None else ends
    running = [run(req("holder", 6, duration_s=duration), "c", ["n0"], started_s=0.0)]
    head = req("head", 8, priority=9, duration_s=50)
    return schedule(snap([head, *pending], running=running, gpu_nodes=nodes("c", 8)))


def test_backfill_admits_a_short_request_that_ends_before_the_blocked_one_starts() -> None:
    d = _backfill(req("short", 2, duration_s=60))
    assert admitted(d) == ["short"]
    assert admit_of(d, "short").backfilled
    assert d.estimates["head"].start_s == NOW + 100


def test_backfill_refuses_requests_that_would_delay_the_blocked_one() -> None:
    d = _backfill(req("long", 2, duration_s=500, submitted_s=1), req("endless", 2, submitted_s=2))
    assert admitted(d) == []
    assert "would delay higher-ranked head" in d.estimates["long"].reason
    assert "would delay higher-ranked head" in d.estimates["endless"].reason
    assert d.estimates["head"].start_s == NOW + 100
    # they start after the head (and the first of them in the head's shadow)
    assert d.estimates["long"].start_s == NOW + 150


def test_backfill_admits_what_the_blocked_request_will_not_need() -> None:
    running = [run(req("holder", 6, duration_s=100), "c", ["n0"], started_s=NOW)]
    head = req("head", 6, priority=9, duration_s=50)
    d = schedule(snap([head, req("endless", 2)], running=running, gpu_nodes=nodes("c", 8)))
    assert admitted(d) == ["endless"]
    assert admit_of(d, "endless").backfilled
    assert d.estimates["head"].start_s == NOW + 100


def test_nothing_passes_a_blocked_request_whose_start_is_unknown() -> None:
    d = _backfill(req("short", 2, duration_s=1), ends=None)
    assert admitted(d) == []
    assert d.estimates["head"].start_s is None
    assert "its start is unknown" in d.estimates["short"].reason


def test_requests_on_other_gpu_types_are_not_held_back() -> None:
    running = [run(req("holder", 8), "c", ["n0"])]
    pending = [req("head", 8, priority=9), req("other", 8, gpu_types=("H100",))]
    d = schedule(snap(pending, running=running, gpu_nodes=nodes("c", 8) + nodes("h", 8, gpu="H100")))
    assert admitted(d) == ["other"]
    assert not admit_of(d, "other").backfilled


def test_fifo_never_backfills() -> None:
    running = [run(req("holder", 6, duration_s=100), "c", ["n0"])]
    pending = [req("head", 8, submitted_s=1, duration_s=50), req("short", 2, submitted_s=2, duration_s=1)]
    d = schedule(snap(pending, running=running, gpu_nodes=nodes("c", 8), order="fifo"))
    assert admitted(d) == []


# -- provisioning ---------------------------------------------------------------------------------

OFFERS = (
    Offer("aws", "us-east-1", None, "p4d.24xlarge", "A100", 8, 96, 1152, 32.0, 10.0),
    Offer("aws", "eu-west-1", None, "p4d.24xlarge", "A100", 8, 96, 1152, 30.0, None),
    Offer("aws", "us-east-1", None, "p5.48xlarge", "H100", 8, 192, 2048, 98.0, None),
    Offer("lambda", "us-west-1", None, "gpu_1x_a100", "A100", 1, 30, 200, 1.3, None),
)


def test_auto_provisioning_picks_the_cheapest_offer_and_charges_quota() -> None:
    queues = [QueueQuota("q", {"A100": 16})]
    pending = [
        req("grow", 8, nodes=2, queue="q", auto_provision=True, submitted_s=1),
        req("also", 8, nodes=2, queue="q", auto_provision=True, submitted_s=2),
    ]
    d = schedule(snap(pending, gpu_nodes=nodes("c", 8), queues=queues, offers=OFFERS))
    assert [p.key for p in d.provisions] == ["grow"]
    offer = d.provisions[0].offer
    assert (offer.offer.region, offer.offer.instance_type, offer.nodes) == ("eu-west-1", "p4d.24xlarge", 2)
    assert "provisioning" in d.estimates["grow"].reason and d.estimates["grow"].start_s is None
    assert "quota" in d.estimates["also"].reason  # "grow" took the queue's 16 A100s


def test_auto_provisioning_over_any_type_and_within_the_max_price() -> None:
    pending = [req("any", 1, gpu_types=(), auto_provision=True, max_price_per_hour=2.0)]
    d = schedule(snap(pending, offers=OFFERS))
    assert [(p.key, p.offer.offer.instance_type) for p in d.provisions] == [("any", "gpu_1x_a100")]


def test_no_feasible_offer_waits_with_the_solvers_message() -> None:
    pending = [
        req("b200", 8, gpu_types=("B200",), auto_provision=True, submitted_s=1),
        req("cheapskate", 8, auto_provision=True, max_price_per_hour=1.0, submitted_s=2),
    ]
    d = schedule(snap(pending, gpu_nodes=nodes("c", 8, 8), offers=OFFERS, order="fifo"))
    assert d.provisions == ()
    assert "no offer of GPU type 'B200'" in d.estimates["b200"].reason
    assert admitted(d) == ["cheapskate"]  # the B200 request blocks nobody, even in fifo
    running = [run(req("r", 8), "c", ["n0"])]
    d = schedule(
        snap(
            [req("cheapskate", 8, nodes=2, auto_provision=True, max_price_per_hour=1.0)],
            running=running,
            gpu_nodes=nodes("c", 8, 8),
            offers=OFFERS,
        )
    )
    assert "above max price $1.00/h" in d.estimates["cheapskate"].reason


def test_no_provisioning_when_a_colony_has_room() -> None:
    d = schedule(snap([req("fits", 8, auto_provision=True)], gpu_nodes=nodes("c", 8), offers=OFFERS))
    assert admitted(d) == ["fits"] and d.provisions == ()


# -- estimates ------------------------------------------------------------------------------------


def test_estimates_give_positions_per_queue_and_starts_from_declared_durations() -> None:
    queues = [QueueQuota("qa", {"A100": 64}), QueueQuota("qb", {"A100": 64})]
    running = [run(req("r", 8, duration_s=100), "c", ["n0"], started_s=NOW - 40)]
    pending = [
        req("a1", 8, queue="qa", submitted_s=1, duration_s=50),
        req("b1", 8, queue="qb", submitted_s=2, duration_s=30),
        req("a2", 8, queue="qa", submitted_s=3),
        req("a3", 8, queue="qa", submitted_s=4, duration_s=5),
    ]
    d = schedule(snap(pending, running=running, gpu_nodes=nodes("c", 8), queues=queues))
    assert admitted(d) == []
    e = d.estimates
    assert [(e[k].position, e[k].start_s) for k in ("a1", "b1", "a2", "a3")] == [
        (1, NOW + 60),
        (1, NOW + 110),
        (2, NOW + 140),
        (3, None),  # behind a2, which never ends
    ]


def test_quota_waits_are_estimated_from_the_queues_running_requests() -> None:
    queues = [QueueQuota("q", {"A100": 4})]
    running = [run(req("r", 4, queue="q", duration_s=300), "c", ["n0"], started_s=NOW)]
    d = schedule(
        snap([req("next", 4, queue="q")], running=running, gpu_nodes=nodes("c", 8, 8), queues=queues)
    )
    assert d.estimates["next"].start_s == NOW + 300
    assert d.estimates["next"].position == 1


def test_every_pending_request_is_admitted_or_estimated() -> None:
    pending = [req(f"r{i}", 4, submitted_s=i) for i in range(5)]
    d = schedule(snap(pending, gpu_nodes=nodes("c", 8)))
    assert sorted(admitted(d) + list(d.estimates)) == [f"r{i}" for i in range(5)]
    assert not set(admitted(d)) & set(d.estimates)


def test_invalid_requests_wait_with_a_reason() -> None:
    d = schedule(snap([req("zero", 0)], gpu_nodes=nodes("c", 8)))
    assert "invalid request" in d.estimates["zero"].reason


def test_same_snapshot_same_decisions() -> None:
    pending = [req(f"r{i}", 1 + i % 4, nodes=1 + i % 2, submitted_s=i % 3, priority=i % 2) for i in range(12)]
    s = snap(pending, gpu_nodes=nodes("c", 8, 8, 4) + nodes("d", 8, 8, prefix="m"))
    assert schedule(s) == schedule(s)
    assert schedule(s) == schedule(snap(list(reversed(pending)), gpu_nodes=s.nodes))


def test_a_request_waiting_for_its_cohort_to_lend_holds_nothing_while_no_lender_end_is_known() -> None:
    # The reclaim scenario after the eviction: team b runs its nominal with no declared end, so the
    # evicted borrower "a-big" cannot start before an unknown time. Free A100s elsewhere (another
    # colony, not one of a-big's) must not give it a reservation "now" that holds "a-more" back.
    queues = [QueueQuota("a", {"A100": 8}, cohort="c"), QueueQuota("b", {"A100": 8}, cohort="c")]
    running = [run(req("b-own", 8, queue="b"), "pool", ["n0"])]
    mine = frozenset({"pool"})
    pending = [
        req("a-big", 8, nodes=2, queue="a", submitted_s=1, evictable=True, colonies=mine),
        req("a-more", 8, queue="a", submitted_s=2, colonies=mine),
    ]
    gpu_nodes = nodes("pool", 8, 8) + nodes("other", 8)
    d = schedule(snap(pending, running=running, gpu_nodes=gpu_nodes, queues=queues))
    assert admitted(d) == ["a-more"]
    assert d.estimates["a-big"].start_s is None and "cohort" in d.estimates["a-big"].reason


def test_a_request_waiting_for_its_cohort_to_lend_reserves_from_the_lenders_declared_end() -> None:
    # Team b's request ends at NOW + 100: a-big reserves from then, and a-more (holding its GPUs for
    # good) would delay it, so it waits; a short one that ends before may start.
    queues = [QueueQuota("a", {"A100": 8}, cohort="c"), QueueQuota("b", {"A100": 8}, cohort="c")]
    running = [run(req("b-own", 8, queue="b", duration_s=100.0), "pool", ["n0"], started_s=NOW)]
    mine = frozenset({"pool"})
    pending = [
        req("a-big", 8, nodes=2, queue="a", submitted_s=1, evictable=True, colonies=mine),
        req("a-more", 8, queue="a", submitted_s=2, colonies=mine),
    ]
    d = schedule(snap(pending, running=running, gpu_nodes=nodes("pool", 8, 8), queues=queues))
    assert admitted(d) == []
    assert d.estimates["a-big"].start_s == NOW + 100
    assert "a-big" in d.estimates["a-more"].reason
