"""Replay a job trace through the scheduler core with simulated time (a pure discrete-event loop).

Events are submissions and completions. At each event time, completions are applied first, then
submissions, then the scheduler is called once on a Snapshot of that moment (`now_s` = trace time).
Admits start now and finish at now + declared duration (declarations are exact). A Preempt stops its
victim, which returns to pending with its original submission time and its full duration (restart
from scratch); as the preemptor can only start once the victim is gone, the scheduler is called
again at the same time after every pass that preempted. Jobs still pending when nothing runs and
nothing more arrives are reported as unfinished (the scheduler would never start them).

Work per event: snapshots ask for no estimates (`Snapshot.estimates=False`: the same decisions,
without the start-time simulation that is most of a pass), and under "fifo" and "priority" a pass
is skipped when nothing ended since the last one, which left a blocked head, and no arrival since
outranks that head (the pass would decide nothing: the blocked head blocks all behind it). Under
every order a pass is skipped when no node has room for the smallest pending gang member and nothing
running is evictable (nothing could start or be preempted).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter

from colony.scheduling.queueing.model import (
    DEFAULT_AGING_S,
    RESERVATION_ORDERS,
    Decisions,
    GpuRequest,
    Placement,
    PlacementStrategy,
    QueueOrder,
    RunningRequest,
    Snapshot,
)
from colony.simulate.cluster import SIM_COLONY, SimCluster, tenant_queues, to_request
from colony.simulate.trace import TraceJob

Scheduler = Callable[[Snapshot], Decisions]
_PER_NODE = attrgetter("gpus_per_node")

MAX_PASSES_PER_EVENT = 10_000
"""Scheduler passes at one time that may each preempt before the replay gives up (a livelock)."""


class SimulationError(RuntimeError):
    """The scheduler decided something impossible (unknown key, over-committed node, ...)."""


@dataclass(frozen=True)
class JobOutcome:
    """A job that ran to completion."""

    job: TraceJob
    allocated_gpus: int
    """GPUs its gang held (more than job.gpus when the gang was rounded up to whole nodes)."""
    start_s: float
    """Start of the run that completed (after any preemptions)."""
    end_s: float
    preemptions: int = 0

    @property
    def wait_s(self) -> float:
        """Time from submission to the start of the completing run (= JCT - duration)."""
        return self.start_s - self.job.submit_time_s

    @property
    def jct_s(self) -> float:
        """Job completion time: completion - submission."""
        return self.end_s - self.job.submit_time_s


@dataclass(frozen=True)
class ReplayResult:
    """What happened to every job of a replayed trace under one queue order."""

    policy: QueueOrder
    cluster: SimCluster
    completed: tuple[JobOutcome, ...]
    dropped: tuple[TraceJob, ...] = ()
    """Jobs whose gang does not fit on the empty cluster (never submitted)."""
    unfinished: tuple[TraceJob, ...] = ()
    """Jobs left pending when nothing ran any more and nothing more arrived."""
    preemptions: int = 0
    busy_gpu_s: Mapping[str, float] = field(default_factory=dict)
    """GPU-seconds held per tenant, including runs that were preempted."""
    lost_gpu_s: float = 0.0
    """GPU-seconds of runs that were preempted (work redone from scratch)."""
    scheduler_calls: int = 0


@dataclass
class _Run:
    request: RunningRequest
    job: TraceJob
    generation: int


@dataclass
class _State:
    """The loop's mutable state; only `replay` touches it."""

    jobs: dict[str, TraceJob]
    requests: dict[str, GpuRequest]
    rank: dict[str, int]
    free: dict[str, int]
    base: Snapshot
    """The parts of every snapshot that do not change: nodes, colonies, queues, policies."""
    pending: dict[str, GpuRequest] = field(default_factory=dict)
    pending_sorted: bool = True
    running: dict[str, _Run] = field(default_factory=dict)
    ends: list[tuple[float, int, str, int]] = field(default_factory=list)
    generation: int = 0
    completed: list[JobOutcome] = field(default_factory=list)
    job_preemptions: dict[str, int] = field(default_factory=dict)
    busy_gpu_s: dict[str, float] = field(default_factory=dict)
    lost_gpu_s: float = 0.0
    preemptions: int = 0
    calls: int = 0
    blocked_priority: int | None = None
    """Strict orders: the highest priority left pending by the last pass, while nothing has ended
    since (None: the next event needs a pass)."""

    def submit(self, key: str) -> None:
        self.pending[key] = self.requests[key]

    def start(self, running: RunningRequest) -> None:
        key = running.request.key
        del self.pending[key]
        for allocation in running.placement.nodes:
            self.free[allocation.node] -= allocation.gpus
        self.generation += 1
        self.running[key] = _Run(running, self.jobs[key], self.generation)
        end = running.started_s + (running.request.duration_s or 0.0)
        heapq.heappush(self.ends, (end, self.rank[key], key, self.generation))

    def stop(self, key: str, now_s: float) -> _Run:
        self.blocked_priority = None
        run = self.running.pop(key)
        for allocation in run.request.placement.nodes:
            self.free[allocation.node] += allocation.gpus
        held = (now_s - run.request.started_s) * run.request.request.gpus
        self.busy_gpu_s[run.job.tenant] = self.busy_gpu_s.get(run.job.tenant, 0.0) + held
        return run

    def could_start(self) -> bool:
        """Whether a pass could decide anything: some node has room for the smallest pending gang
        member, or something running is evictable (replays never auto-provision)."""
        room = max(self.free.values(), default=0)
        if self.pending and min(map(_PER_NODE, self.pending.values())) <= room:
            return True
        return any(run.job.evictable for run in self.running.values())

    def next_end(self) -> float | None:
        while self.ends:
            end, _, key, generation = self.ends[0]
            run = self.running.get(key)
            if run is not None and run.generation == generation:
                return end
            heapq.heappop(self.ends)
        return None

    def complete_until(self, now_s: float) -> None:
        while (end := self.next_end()) is not None and end <= now_s:
            _, _, key, _ = heapq.heappop(self.ends)
            run = self.stop(key, end)
            self.completed.append(
                JobOutcome(
                    job=run.job,
                    allocated_gpus=run.request.request.gpus,
                    start_s=run.request.started_s,
                    end_s=end,
                    preemptions=self.job_preemptions.get(key, 0),
                )
            )

    def snapshot(self, now_s: float) -> Snapshot:
        if not self.pending_sorted:
            self.pending = dict(sorted(self.pending.items(), key=lambda item: self.rank[item[0]]))
            self.pending_sorted = True
        return replace(
            self.base,
            now_s=now_s,
            pending=tuple(self.pending.values()),
            running=tuple(run.request for run in self.running.values()),
        )

    def apply(self, decisions: Decisions, now_s: float) -> None:
        for preempt in decisions.preemptions:
            if preempt.victim not in self.running:
                raise SimulationError(f"t={now_s}: preempt of {preempt.victim!r}, which is not running")
            run = self.stop(preempt.victim, now_s)
            self.lost_gpu_s += (now_s - run.request.started_s) * run.request.request.gpus
            self.preemptions += 1
            self.job_preemptions[preempt.victim] = self.job_preemptions.get(preempt.victim, 0) + 1
            self.submit(preempt.victim)
            self.pending_sorted = False
        for admit in decisions.admitted:
            request = self.pending.get(admit.key)
            if request is None:
                raise SimulationError(f"t={now_s}: admit of {admit.key!r}, which is not pending")
            self._check_placement(request, admit.placement, now_s)
            self.start(RunningRequest(request=request, placement=admit.placement, started_s=now_s))

    def _check_placement(self, request: GpuRequest, placement: Placement, now_s: float) -> None:
        where = f"t={now_s}: {request.key!r}"
        if placement.colony != SIM_COLONY:
            raise SimulationError(f"{where} placed on unknown colony {placement.colony!r}")
        if sum(a.gpus for a in placement.nodes) != request.gpus:
            raise SimulationError(f"{where} placed on {placement.nodes}, not on {request.gpus} GPUs")
        for allocation in placement.nodes:
            free = self.free.get(allocation.node)
            if free is None or free < allocation.gpus:
                raise SimulationError(
                    f"{where} over-commits node {allocation.node!r} ({allocation.gpus} GPUs, {free} free)"
                )


def replay(
    jobs: Sequence[TraceJob],
    cluster: SimCluster,
    policy: QueueOrder,
    scheduler: Scheduler | None = None,
    placement_policy: PlacementStrategy = "binpack",
    aging_s: float = DEFAULT_AGING_S,
    progress: Callable[[float], None] | None = None,
    queues: bool = True,
) -> ReplayResult:
    """Replay `jobs` on `cluster` under queue order `policy`; `scheduler` defaults to the core's.

    `aging_s` is the snapshots' aging ("default", "shortest" and "sjf"); `progress`, if given, is called with
    the simulated time after each event; `queues=False` replays "default", "shortest" and "sjf" without
    tenant queues (no quota: one queue of all jobs)."""
    if scheduler is None:
        from colony.scheduling.queueing.core import schedule

        scheduler = schedule
    fair = policy in RESERVATION_ORDERS
    quota = fair and queues
    ordered = sorted(jobs, key=lambda job: job.submit_time_s)
    dropped = tuple(job for job in ordered if not cluster.fits(job.gpus))
    kept = [job for job in ordered if cluster.fits(job.gpus)]
    nodes = cluster.nodes()
    state = _State(
        jobs={job.job_id: job for job in kept},
        requests={job.job_id: to_request(job, cluster, policy if quota else "fifo") for job in kept},
        rank={job.job_id: i for i, job in enumerate(kept)},
        free={node.name: node.capacity for node in nodes},
        base=Snapshot(
            now_s=0.0,
            pending=(),
            nodes=nodes,
            colonies=cluster.colonies(),
            queues=tenant_queues((job.tenant for job in kept), cluster.gpus) if quota else (),
            placement_policy=placement_policy,
            order=policy,
            aging_s=aging_s,
            estimates=False,
        ),
    )
    if len(state.jobs) != len(kept):
        raise ValueError("job ids must be unique")
    arrivals = 0
    while True:
        next_arrival = kept[arrivals].submit_time_s if arrivals < len(kept) else None
        next_end = state.next_end()
        if next_arrival is None and next_end is None:
            break
        now_s = min(t for t in (next_arrival, next_end) if t is not None)
        state.complete_until(now_s)
        while arrivals < len(kept) and kept[arrivals].submit_time_s <= now_s:
            job = kept[arrivals]
            state.submit(job.job_id)
            if (
                policy == "priority"
                and state.blocked_priority is not None
                and (job.priority > state.blocked_priority)
            ):
                state.blocked_priority = None
            arrivals += 1
        if fair or state.blocked_priority is None:
            _schedule_at(state, scheduler, now_s)
            if not fair and state.pending:
                state.blocked_priority = max(r.priority for r in state.pending.values())
        if progress is not None:
            progress(now_s)
    return ReplayResult(
        policy=policy,
        cluster=cluster,
        completed=tuple(state.completed),
        dropped=dropped,
        unfinished=tuple(state.jobs[key] for key in state.pending),
        preemptions=state.preemptions,
        busy_gpu_s=dict(sorted(state.busy_gpu_s.items())),
        lost_gpu_s=state.lost_gpu_s,
        scheduler_calls=state.calls,
    )


def _schedule_at(state: _State, scheduler: Scheduler, now_s: float) -> None:
    """Call the scheduler at `now_s` until a pass preempts nothing."""
    for _ in range(MAX_PASSES_PER_EVENT):
        if not state.pending or not state.could_start():
            return
        decisions = scheduler(state.snapshot(now_s))
        state.calls += 1
        state.apply(decisions, now_s)
        if not decisions.preemptions:
            return
    raise SimulationError(f"t={now_s}: still preempting after {MAX_PASSES_PER_EVENT} scheduler passes")
