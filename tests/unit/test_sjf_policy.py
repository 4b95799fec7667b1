"""The "sjf" queue order (strict shortest declared GPU time first, with aging): serve order, no
backfill past a reserved head, the aging bound on replays, and the operator's and CLI's choice of it."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from colony import settings
from colony.scheduling.queueing.core import schedule
from colony.scheduling.queueing.model import (
    GpuNode,
    GpuRequest,
    NodeAllocation,
    Placement,
    RunningRequest,
    Snapshot,
)
from colony.scheduling.queueing.ordering import effective_priority, priority_ladder, serve_order
from colony.scheduling.queueing.sjf import gpu_time, sjf_rank
from colony.simulate import SimCluster, TraceJob, replay
from colony.simulate.metrics import compute_metrics
from colony.simulate.trace import load_trace
from tests.unit.test_queueing_properties import snapshots
from tests.unit.test_simulate_properties import SETTINGS, aging_bound, operator_loop, traces

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"


def request(
    key: str, gpus: int, duration: float | None, submitted: float = 0.0, priority: int = 0
) -> GpuRequest:
    return GpuRequest(
        key=key,
        queue="",
        priority=priority,
        submitted_s=submitted,
        gpu_types=(),
        nodes=1,
        gpus_per_node=gpus,
        duration_s=duration,
    )


def test_gpu_time_is_gpus_times_declared_duration_and_unknown_is_infinite() -> None:
    assert gpu_time(request("a", 4, 30.0)) == 120.0
    assert gpu_time(request("b", 4, None)) == math.inf
    two_nodes = GpuRequest("c", "", 0, 0.0, (), nodes=2, gpus_per_node=8, duration_s=10.0)
    assert gpu_time(two_nodes) == 160.0


def test_sjf_serves_priority_then_aged_oldest_first_then_least_gpu_time() -> None:
    pending = [
        request("wide-short", 8, 10.0, submitted=90.0),  # 80 GPU-s
        request("thin-long", 1, 100.0, submitted=80.0),  # 100 GPU-s
        request("unknown", 1, None, submitted=70.0),
        request("aged-late", 8, 1000.0, submitted=20.0),
        request("aged-early", 8, 1000.0, submitted=10.0),
        request("urgent", 8, 1000.0, submitted=95.0, priority=1),
    ]
    ranked = serve_order(pending, "sjf", now_s=100.0, aging_s=50.0)
    assert [r.key for r in ranked] == [
        "urgent",
        "aged-early",
        "aged-late",
        "wide-short",
        "thin-long",
        "unknown",
    ]
    assert sjf_rank(100.0, 50.0)(pending[0]) == (1, 80.0)


def test_nothing_starts_behind_a_reserved_head_even_what_easy_backfill_lets_through() -> None:
    """One 8-GPU node, 6 GPUs busy until t=100. The head (4 GPUs x 10 s) waits for them; a 2-GPU
    request of 1,000 s fits now and would not delay it (6 GPUs are free at t=100): EASY backfill
    ("shortest") starts it, "sjf" keeps it waiting behind the head."""
    node = GpuNode("c", "n0", "gpu", 8)
    busy = RunningRequest(
        request("busy", 6, 100.0), Placement("c", "gpu", (NodeAllocation("n0", 6),)), started_s=0.0
    )
    snapshot = Snapshot(
        now_s=1.0,
        pending=(request("head", 4, 10.0, submitted=1.0), request("thin", 2, 1000.0, submitted=1.0)),
        running=(busy,),
        nodes=(node,),
        placement_policy="binpack",
        order="shortest",
    )
    easy = schedule(snapshot)
    assert [a.key for a in easy.admitted] == ["thin"]
    strict = schedule(replace(snapshot, order="sjf"))
    assert strict.admitted == ()
    assert strict.reserved == ("head",)
    assert strict.estimates["head"].start_s == 100.0
    assert "head" in strict.estimates["thin"].reason


@SETTINGS
@given(snapshots(orders=("sjf",)))
def test_sjf_backfills_only_around_the_heads_of_higher_priorities(s: Snapshot) -> None:
    # higher effective priorities: with aging across priorities a long-waiting request competes at
    # the level it reached (ordering.effective_priority), as the scheduler core ranks it
    d = schedule(s)
    ladder = priority_ladder([r.priority for r in s.pending] + [v.request.priority for v in s.running])
    level = effective_priority(ladder, s.now_s, s.aging_s)
    priority = {r.key: level(r) if level is not None else r.priority for r in s.pending}
    for admit in d.admitted:
        if admit.backfilled:
            assert any(priority[key] > priority[admit.key] for key in d.reserved), admit


def test_a_lower_priority_backfills_around_a_higher_heads_reservation() -> None:
    """As above, but the thin request has a lower priority than the head: EASY backfill applies."""
    node = GpuNode("c", "n0", "gpu", 8)
    busy = RunningRequest(
        request("busy", 6, 100.0), Placement("c", "gpu", (NodeAllocation("n0", 6),)), started_s=0.0
    )
    snapshot = Snapshot(
        now_s=1.0,
        pending=(request("head", 4, 10.0, 1.0, priority=1), request("thin", 2, 1000.0, 1.0)),
        running=(busy,),
        nodes=(node,),
        placement_policy="binpack",
        order="sjf",
    )
    d = schedule(snapshot)
    assert [(a.key, a.backfilled) for a in d.admitted] == [("thin", True)]


@SETTINGS
@given(
    traces(gpus=8, tenants=("a", "b")),
    st.sampled_from([0.0, 100.0, 600.0]),
    st.booleans(),
    st.sampled_from([1, 4]),
)
def test_with_aging_every_sjf_request_starts_within_the_documented_bound(
    jobs: tuple[TraceJob, ...], aging_s: float, queues: bool, per_node: int
) -> None:
    """docs/gprs-and-queues.md: aging + the longest duration + the durations of the jobs submitted no
    later than it; on 1-GPU and on 4-GPU nodes, with and without tenant queues."""
    cluster = SimCluster(gpus=8, gpus_per_node=per_node)
    result = replay(jobs, cluster, "sjf", aging_s=aging_s, queues=queues)
    assert len(result.completed) == len(jobs)
    for outcome in result.completed:
        assert outcome.wait_s <= aging_bound(jobs, outcome.job, aging_s), outcome


@SETTINGS
@given(traces(gpus=8, tenants=("a", "b")))
def test_the_fast_sjf_replay_admits_what_full_passes_admit_in_the_same_order(
    jobs: tuple[TraceJob, ...],
) -> None:
    cluster = SimCluster(gpus=8, gpus_per_node=4)
    fast: list[tuple[float, str]] = []

    def quick(snapshot: Snapshot) -> object:
        decisions = schedule(snapshot)
        fast.extend((snapshot.now_s, a.key) for a in decisions.admitted)
        return decisions

    replay(jobs, cluster, "sjf", scheduler=quick)  # type: ignore[arg-type]
    assert fast == operator_loop(jobs, cluster, "sjf")


def test_sjf_cuts_the_average_wait_on_tiresias_60() -> None:
    """The shipped trace on 8 GPUs (1 x 8), aging 1 h: FIFO waits 1,378 s on average, sjf 375 s
    (3.7x), at more than 95% of FIFO's utilization (docs/gprs-and-queues.md)."""
    jobs = load_trace(TRACES / "tiresias-60.csv")
    cluster = SimCluster.for_trace(jobs, gpus=8)
    fifo = compute_metrics(replay(jobs, cluster, "fifo"))
    sjf = compute_metrics(replay(jobs, cluster, "sjf", aging_s=3600.0))
    assert sjf.jobs == fifo.jobs == len(jobs)
    assert fifo.avg_wait_s / sjf.avg_wait_s > 3.6
    assert sjf.utilization >= 0.95 * fifo.utilization


def test_the_operator_and_the_simulator_accept_sjf(monkeypatch: pytest.MonkeyPatch) -> None:
    from colony.cli.simulate import Policy

    monkeypatch.setenv("COLONY_QUEUE_POLICY", "sjf")
    assert settings.queue_policy() == "sjf"
    assert Policy("sjf") == "sjf"


def test_waits_ranked_by_gpu_time_among_requests_submitted_together() -> None:
    """Submitted at once on an idle 1-GPU cluster, requests start in GPU-time order."""
    jobs = tuple(
        TraceJob(job_id=f"j{d}", tenant="a", submit_time_s=0.0, gpus=1, gpu_type="", duration_s=float(d))
        for d in (300, 10, 60)
    )
    result = replay(jobs, SimCluster(gpus=1, gpus_per_node=1), "sjf")
    order = [o.job.job_id for o in sorted(result.completed, key=lambda o: o.start_s)]
    assert order == ["j10", "j60", "j300"]
