"""Properties of replays of random small traces through the real scheduler core (hypothesis)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colony.scheduling.queueing.core import schedule
from colony.scheduling.queueing.model import (
    RESERVATION_ORDERS,
    Decisions,
    GpuRequest,
    QueueOrder,
    RunningRequest,
    Snapshot,
)
from colony.simulate import SimCluster, TraceJob, replay
from colony.simulate.cluster import tenant_queues, to_request
from colony.simulate.replay import ReplayResult

SETTINGS = settings(max_examples=120, deadline=None)


@st.composite
def traces(
    draw: st.DrawFn, gpus: int, tenants: tuple[str, ...] = ("a",), priorities: tuple[int, ...] = (0,)
) -> tuple[TraceJob, ...]:
    """Up to 12 non-evictable jobs of 1..`gpus` GPUs, of one of `priorities`, arriving within 600 s."""
    return tuple(
        TraceJob(
            job_id=f"j{i}",
            tenant=draw(st.sampled_from(tenants)),
            submit_time_s=float(draw(st.integers(0, 600))),
            gpus=draw(st.integers(1, gpus)),
            gpu_type="",
            duration_s=float(draw(st.sampled_from([10, 60, 300, 1200]))),
            priority=draw(st.sampled_from(priorities)),
        )
        for i in range(draw(st.integers(1, 12)))
    )


class HeadWatch:
    """The real scheduler with estimates on (same decisions); records, per pass, the estimated start of
    the requests holding a head reservation (Decisions.reserved: EASY backfill)."""

    def __init__(self, aged_only: bool) -> None:
        self.aged_only = aged_only
        self.promised: dict[str, float] = {}
        """Per job, the earliest start any pass promised it as the head."""

    def __call__(self, snapshot: Snapshot) -> Decisions:
        full = replace(snapshot, estimates=True)
        decisions = schedule(full)
        submitted = {r.key: r.submitted_s for r in snapshot.pending}
        for key in decisions.reserved if not decisions.preemptions else ():
            aged = snapshot.now_s - submitted[key] >= snapshot.aging_s
            start = decisions.estimates[key].start_s
            if start is not None and (aged or not self.aged_only):
                self.promised[key] = min(start, self.promised.get(key, math.inf))
        return decisions


def starts(result: ReplayResult) -> dict[str, float]:
    return {o.job.job_id: o.start_s for o in result.completed}


@SETTINGS
@given(traces(gpus=8), st.sampled_from(["default", "shortest"]))
def test_a_reserved_head_request_is_never_delayed_by_backfill(
    jobs: tuple[TraceJob, ...], policy: QueueOrder
) -> None:
    """On 1-GPU nodes (the estimate's aggregate GPUs are exact) with exact declared durations, the head
    of the queue starts no later than the start its reservation promised, whatever was backfilled.
    Under "shortest" only aged heads are checked: a shorter arrival may legitimately pass a young one.
    Without quotas: a request blocked by its queue's quota holds no reservation (a known gap: see
    docs/gprs-and-queues.md)."""
    watch = HeadWatch(aged_only=policy == "shortest")
    cluster = SimCluster(gpus=8, gpus_per_node=1)
    result = replay(jobs, cluster, policy, scheduler=watch, aging_s=300.0, queues=False)
    started = starts(result)
    assert len(started) == len(jobs)
    for key, promised in watch.promised.items():
        assert started[key] <= promised, (key, started[key], promised)


def aging_bound(jobs: Sequence[TraceJob], job: TraceJob, aging_s: float) -> float:
    """The documented bound on the wait of `job` under "default" and "shortest"
    (docs/gprs-and-queues.md): the aging time, once per priority level above its own (at least once:
    one level up per aging period, then aged at the highest), plus the longest duration (what runs
    when it is there ends by then), plus the durations of the jobs submitted no later than it (the
    only ones served before it from then on, whatever their priority)."""
    above = len({j.priority for j in jobs if j.priority > job.priority})
    earlier = math.fsum(j.duration_s for j in jobs if j.submit_time_s <= job.submit_time_s and j is not job)
    return max(above, 1) * aging_s + max(j.duration_s for j in jobs) + earlier


@SETTINGS
@given(
    traces(gpus=8, tenants=("a", "b")),
    st.sampled_from([0.0, 100.0, 600.0]),
    st.sampled_from(["default", "shortest", "sjf"]),
    st.booleans(),
)
def test_with_aging_every_request_starts_within_the_documented_bound(
    jobs: tuple[TraceJob, ...], aging_s: float, policy: QueueOrder, queues: bool
) -> None:
    """With or without tenant queues (one cohort lending all its quota, fair sharing between them):
    neither fair sharing nor shortest-first nor backfill postpones a request past the bound."""
    cluster = SimCluster(gpus=8, gpus_per_node=1)
    result = replay(jobs, cluster, policy, aging_s=aging_s, queues=queues)
    assert len(result.completed) == len(jobs)
    for outcome in result.completed:
        assert outcome.wait_s <= aging_bound(jobs, outcome.job, aging_s), outcome


@SETTINGS
@given(
    traces(gpus=8, tenants=("a", "b"), priorities=(0, 1, 5)),
    st.sampled_from([0.0, 100.0, 600.0]),
    st.sampled_from(["default", "shortest", "sjf"]),
    st.booleans(),
)
def test_with_aging_across_priorities_every_request_starts_within_the_documented_bound(
    jobs: tuple[TraceJob, ...], aging_s: float, policy: QueueOrder, queues: bool
) -> None:
    """With several priorities, a request rises one level per aging period (the effective priority):
    higher-priority arrivals cannot postpone it past the bound either."""
    cluster = SimCluster(gpus=8, gpus_per_node=1)
    result = replay(jobs, cluster, policy, aging_s=aging_s, queues=queues)
    assert len(result.completed) == len(jobs)
    for outcome in result.completed:
        assert outcome.wait_s <= aging_bound(jobs, outcome.job, aging_s), outcome


@SETTINGS
@given(
    traces(gpus=8, tenants=("a", "b"), priorities=(0, 1, 5)),
    st.lists(st.booleans(), min_size=12, max_size=12),
    st.sampled_from([0.0, 100.0, 600.0]),
    st.sampled_from(["default", "shortest", "sjf"]),
)
def test_with_aging_and_evictable_requests_every_request_completes_without_eviction_loops(
    jobs: tuple[TraceJob, ...], evictable: list[bool], aging_s: float, policy: QueueOrder
) -> None:
    """Evictable requests of several priorities in two tenant queues of one cohort (priority
    preemption and reclaim): an aged request back in the queue after an eviction would go before its
    preemptor, so aged requests are not evicted by those they have aged up to; no pass sequence
    loops (the replay raises after 10,000 passes at one time) and every job completes."""
    jobs = tuple(replace(j, evictable=e) for j, e in zip(jobs, evictable, strict=False))
    cluster = SimCluster(gpus=8, gpus_per_node=2)
    result = replay(jobs, cluster, policy, aging_s=aging_s)
    assert len(result.completed) == len(jobs)


def test_aged_evictable_requests_are_not_evicted_back_and_forth() -> None:
    """Two GPUs, tenants a and b with one GPU of nominal quota each in one cohort: b's evictable
    priority-0 jobs v1 and v2 run from t=0 (v2 borrows a's GPU); a priority-1 job of a arrives at
    t=500, when both have aged (aging 100 s) to priority 1. Evicting either would be futile: back in
    the queue it would go before the preemptor (aged, the same effective priority) and take its GPU
    again, losing its work (on alibaba-openb the preemptor then evicted the other, back and forth,
    until the replay gave up). So neither is evicted, and p starts when v1 ends."""
    jobs = (
        TraceJob("v1", "b", 0.0, 1, "", 10_000.0, priority=0, evictable=True),
        TraceJob("v2", "b", 1.0, 1, "", 10_000.0, priority=0, evictable=True),
        TraceJob("p", "a", 500.0, 1, "", 100.0, priority=1),
    )
    result = replay(jobs, SimCluster(gpus=2, gpus_per_node=1), "default", aging_s=100.0)
    assert result.preemptions == 0
    assert {o.job.job_id: o.start_s for o in result.completed} == {"v1": 0.0, "v2": 1.0, "p": 10_000.0}


@pytest.mark.parametrize("policy", ["default", "shortest"])
def test_a_steady_stream_of_higher_priority_requests_does_not_starve_a_low_priority_one(
    policy: QueueOrder,
) -> None:
    """On one GPU, high-priority jobs (priority 2 and 1) of 100 s arrive every 100 s for 10,000 s, and
    a low one (priority 0) at t=50: with aging 1,000 s it climbs to priority 1 after 1,000 s, to 2
    after 2,000 s, and then goes before every younger job; without aging across priorities it would
    wait for the whole stream (strict priority does)."""
    stream = [
        TraceJob(f"h{i:03}", "a", 100.0 * i, 1, "", 100.0, priority=2 if i % 2 else 1) for i in range(100)
    ]
    low = TraceJob("low", "a", 50.0, 1, "", 100.0, priority=0)
    jobs = (*stream, low)
    cluster = SimCluster(gpus=1, gpus_per_node=1)
    result = replay(jobs, cluster, policy, aging_s=1000.0)
    waits = {o.job.job_id: o.wait_s for o in result.completed}
    assert len(waits) == len(jobs)
    assert waits["low"] <= aging_bound(jobs, low, 1000.0) == 2 * 1000.0 + 100.0 + 100.0
    strict = {o.job.job_id: o.wait_s for o in replay(jobs, cluster, "priority").completed}
    assert strict["low"] >= 9_900.0


def operator_loop(
    jobs: tuple[TraceJob, ...], cluster: SimCluster, policy: QueueOrder
) -> list[tuple[float, str]]:
    """(time, key) of every admission of a plain loop that works like the operator: a full pass
    (estimates on) at every submission and completion, until a pass preempts nothing."""
    requests = {j.job_id: to_request(j, cluster, policy) for j in jobs}
    fair = policy in RESERVATION_ORDERS
    base = Snapshot(
        now_s=0.0,
        pending=(),
        nodes=cluster.nodes(),
        colonies=cluster.colonies(),
        queues=tenant_queues([j.tenant for j in jobs], cluster.gpus) if fair else (),
        placement_policy="binpack",
        order=policy,
    )
    pending: dict[str, GpuRequest] = {}
    running: dict[str, RunningRequest] = {}
    arrivals = sorted(jobs, key=lambda j: j.submit_time_s)
    admitted: list[tuple[float, str]] = []
    while arrivals or running:
        ends = [r.started_s + (r.request.duration_s or 0.0) for r in running.values()]
        now = min([*ends, *(j.submit_time_s for j in arrivals[:1])])
        for key in [k for k, r in running.items() if r.started_s + (r.request.duration_s or 0.0) <= now]:
            del running[key]
        while arrivals and arrivals[0].submit_time_s <= now:
            job = arrivals.pop(0)
            pending[job.job_id] = requests[job.job_id]
        while pending:
            snapshot = replace(
                base, now_s=now, pending=tuple(pending.values()), running=tuple(running.values())
            )
            decisions = schedule(snapshot)
            for p in decisions.preemptions:
                pending[p.victim] = running.pop(p.victim).request
            for a in decisions.admitted:
                running[a.key] = RunningRequest(pending.pop(a.key), a.placement, now)
                admitted.append((now, a.key))
            if not decisions.preemptions:
                break
    return admitted


@SETTINGS
@given(
    traces(gpus=8, tenants=("a", "b")), st.sampled_from(["fifo", "priority", "default", "shortest", "sjf"])
)
def test_the_fast_replay_admits_what_full_passes_admit_in_the_same_order(
    jobs: tuple[TraceJob, ...], policy: QueueOrder
) -> None:
    cluster = SimCluster(gpus=8, gpus_per_node=4)
    fast: list[tuple[float, str]] = []

    def quick(snapshot: Snapshot) -> Decisions:
        decisions = schedule(snapshot)
        fast.extend((snapshot.now_s, a.key) for a in decisions.admitted)
        return decisions

    replay(jobs, cluster, policy, scheduler=quick)
    assert fast == operator_loop(jobs, cluster, policy)


def test_a_scripted_scenario_replays_as_the_operator_decides() -> None:
    """Two tenants on 8 GPUs (2 nodes x 4): the fast replay admits what full passes admit, in the
    same order, under every order; under "default" the short job of tenant b backfills before the
    blocked gang of tenant a, which a FIFO queue does not allow."""
    jobs = (
        TraceJob("a0", "a", 0.0, 4, "", 100.0),
        TraceJob("a1", "a", 0.0, 8, "", 100.0),
        TraceJob("b0", "b", 1.0, 4, "", 50.0),
        TraceJob("b1", "b", 2.0, 4, "", 500.0),
        TraceJob("a2", "a", 3.0, 2, "", 30.0),
    )
    cluster = SimCluster(gpus=8, gpus_per_node=4)
    orders: dict[str, list[tuple[float, str]]] = {}
    for policy in ("fifo", "priority", "default", "shortest"):
        fast: list[tuple[float, str]] = []

        def quick(snapshot: Snapshot, into: list[tuple[float, str]] = fast) -> Decisions:
            decisions = schedule(snapshot)
            into.extend((snapshot.now_s, a.key) for a in decisions.admitted)
            return decisions

        replay(jobs, cluster, policy, scheduler=quick)
        assert fast == operator_loop(jobs, cluster, policy), policy
        orders[policy] = fast
    assert orders["fifo"] == [(0.0, "a0"), (100.0, "a1"), (200.0, "b0"), (200.0, "b1"), (250.0, "a2")]
    # fair sharing: at t=51 tenant b (share 1 with b1) goes before tenant a (share 3 with a1), and a1
    # is not aged yet (6 h); shortest-first serves across queues, and a1 holds the head reservation
    assert orders["default"] == [(0.0, "a0"), (1.0, "b0"), (51.0, "b1"), (100.0, "a2"), (551.0, "a1")]
    assert orders["shortest"] == [(0.0, "a0"), (1.0, "b0"), (51.0, "a2"), (100.0, "a1"), (200.0, "b1")]
    # without quotas a1 holds the head reservation (t=100): a2 backfills (ends at 81), b1 does not
    easy = replay(jobs, cluster, "default", queues=False)
    assert sorted((o.start_s, o.job.job_id) for o in easy.completed) == [
        (0.0, "a0"),
        (1.0, "b0"),
        (51.0, "a2"),
        (100.0, "a1"),
        (200.0, "b1"),
    ]
