"""Inputs (Snapshot) and outputs (Decisions) of the scheduler core. Times are seconds on one clock
(the snapshot's `now_s`: wall-clock epoch seconds in the operator, trace time in simulations)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from colony.scheduling.offers.model import Offer
from colony.scheduling.offers.solver import RankedOffer

PlacementStrategy = Literal["cheapest", "binpack", "spread", "ordered"]
"""Which colony and nodes a request goes to among those where it fits:
cheapest: lowest colony price per GPU-hour (unknown price last), then binpack;
binpack: the nodes with the least free GPUs that still fit (keeps big holes for big gangs);
spread: the nodes with the most free GPUs;
ordered: fill-and-spill, colonies in their `order`, the first one with room."""

QueueOrder = Literal["fifo", "priority", "default", "shortest", "sjf"]
"""fifo: submission order only, the head blocks everything behind it (no backfill, no preemption);
priority: strict priority then FIFO, the head blocks (no backfill, no preemption);
default: strict priority by effective priority (a waiting request rises one level of the priorities
in use per `Snapshot.aging_s` waited: ordering.effective_priority); at equal effective priority the
requests waiting `Snapshot.aging_s` or longer first (oldest first, across queues), then weighted DRF
between queues, FIFO within; EASY backfill by declared durations (the first capacity-blocked request
of each effective priority holds a reservation nothing may delay); preemption of evictable
lower-priority requests (declared priority of the preemptor against the one a running request had
aged to when it started) and reclaim of lent quota;
shortest: as default, but after the aged requests the highest response ratio (waited + declared
duration) / declared duration first, across queues (see ordering.serve_order);
sjf: strict shortest declared GPU time first: as shortest, but by GPU time (gpus x duration) after
the aged requests, and nothing of its priority starts behind a head's reservation (no backfill within
a priority; see sjf.py)."""
RESERVATION_ORDERS: tuple[QueueOrder, ...] = ("default", "shortest", "sjf")
"""The orders with head reservations, quotas, preemption and aging (the others block at the head)."""

QueueStrategy = Literal["", "fifo", "shortest"]
"""Order within one queue (QueueQuota.strategy) under the "default" and "shortest" orders:
"" = the snapshot's order decides (FIFO under "default", shortest-first under "shortest");
fifo = submission order; shortest = shortest declared GPU time first, with aging."""

DEFAULT_AGING_S = 6 * 3600.0
"""Snapshot.aging_s unless set: a request waiting this long stops being passed by younger ones of its
effective priority, which rises one level per such period."""

ANY_GPU_TYPE = "*"
"""A quota key that counts GPUs of every type."""


class Value:
    """Base of the small result types a pass builds by the thousand: equality, hash and repr over
    `FIELDS`; treat instances as immutable.

    Not dataclasses on purpose: mypyc (setup.py) compiles a hand-written __init__ to C, while the
    __init__ a dataclass generates stays interpreted, about 20x slower (a tenth of a 10k-request pass).
    """

    FIELDS: ClassVar[tuple[str, ...]] = ()

    def values(self) -> tuple[object, ...]:
        """The field values, in FIELDS order."""
        return tuple(getattr(self, name) for name in self.FIELDS)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self) or not isinstance(other, Value):
            return NotImplemented
        return self.values() == other.values()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.values()))

    def __repr__(self) -> str:
        args = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.FIELDS)
        return f"{type(self).__name__}({args})"


@dataclass(frozen=True)
class GpuRequest:
    """One request for a gang of `nodes` x `gpus_per_node` GPUs, all at once or not at all."""

    key: str
    """Unique id, `namespace/name` for GPRs."""
    queue: str
    """Name of the QueueQuota it is charged to; "" = no quota applies (unlimited)."""
    priority: int
    submitted_s: float
    gpu_types: tuple[str, ...]
    """Acceptable canonical GPU types (see offers.gpu_names); empty = any type."""
    nodes: int
    gpus_per_node: int
    duration_s: float | None = None
    """Declared run time (exitDuration); None = unknown (never backfilled past a blocked request)."""
    evictable: bool = False
    auto_provision: bool = False
    max_price_per_hour: float | None = None
    colonies: frozenset[str] | None = None
    """Colonies it may be placed on (colony selector resolved by the controller); None = any."""
    colony_order: tuple[str, ...] = ()
    """Its own fill-and-spill order: the first of these colonies with room is taken, whatever the
    placement policy ranks first (the policy still picks the nodes, and ranks colonies not listed,
    after the listed ones); empty = the placement policy alone decides."""

    @property
    def gpus(self) -> int:
        """Total GPUs of the gang."""
        return self.nodes * self.gpus_per_node


class NodeAllocation(Value):
    """GPUs taken on one node."""

    FIELDS = ("node", "gpus")

    def __init__(self, node: str, gpus: int) -> None:
        self.node = node
        self.gpus = gpus


class Placement(Value):
    """Where a request runs: one colony, one GPU type, one allocation per gang member."""

    FIELDS = ("colony", "gpu_type", "nodes")

    def __init__(self, colony: str, gpu_type: str, nodes: tuple[NodeAllocation, ...]) -> None:
        self.colony = colony
        self.gpu_type = gpu_type
        self.nodes = nodes


@dataclass(frozen=True)
class RunningRequest:
    """A request that holds its placement since `started_s`."""

    request: GpuRequest
    placement: Placement
    started_s: float


@dataclass(frozen=True)
class GpuNode:
    """A schedulable GPU node of a colony; free GPUs = capacity minus running allocations on it."""

    colony: str
    name: str
    gpu_type: str
    capacity: int


@dataclass(frozen=True)
class ColonyInfo:
    """What placement needs to know about a colony besides its nodes."""

    name: str
    price_per_gpu_hour: float | None = None
    order: int = 0
    """Rank for the `ordered` (fill-and-spill) policy; lower fills first."""


@dataclass(frozen=True)
class QueueQuota:
    """A queue with guaranteed GPUs (Kueue's ClusterQueue in miniature).

    `nominal[gpu_type]` GPUs are guaranteed (ANY_GPU_TYPE counts all types). Unused nominal quota of
    the queues in one `cohort` may be borrowed by the others, up to `borrowing_limit[gpu_type]`
    beyond nominal (missing key: no limit); lent quota is reclaimed by preempting borrowers when its
    owner needs it. Between queues at equal priority, the one with the lowest dominant share
    (usage / nominal, divided by `weight`) goes first.
    """

    name: str
    nominal: Mapping[str, int]
    cohort: str | None = None
    borrowing_limit: Mapping[str, int] = field(default_factory=dict)
    weight: float = 1.0
    strategy: QueueStrategy = ""
    """Order of its requests among themselves (see QueueStrategy); "" = the snapshot's order."""


@dataclass(frozen=True)
class Snapshot:
    """Everything one scheduling pass looks at; never mutated."""

    now_s: float
    pending: tuple[GpuRequest, ...]
    running: tuple[RunningRequest, ...] = ()
    nodes: tuple[GpuNode, ...] = ()
    colonies: tuple[ColonyInfo, ...] = ()
    queues: tuple[QueueQuota, ...] = ()
    offers: tuple[Offer, ...] = ()
    placement_policy: PlacementStrategy = "cheapest"
    order: QueueOrder = "default"
    aging_s: float = DEFAULT_AGING_S
    """Aging ("default" and "shortest"): per period of this long waited, a request's effective
    priority rises one level of the priorities in use (ordering.effective_priority); after this long
    waiting, it is served in FIFO order ahead of the younger requests of its effective priority, in
    every queue (bounds its wait: see docs/gprs-and-queues.md)."""
    estimates: bool = True
    """False: decide only (Decisions.estimates stays empty; admissions, preemptions and provisions
    are the same). Replays need no estimates, and computing them is most of a pass."""


class Admit(Value):
    """Start `key` now on `placement`.

    borrowed: it uses quota lent by other queues of its cohort (it may be preempted to give it back).
    backfilled: it started ahead of a blocked higher-ranked request (which it does not delay).
    """

    FIELDS = ("key", "placement", "borrowed", "backfilled")

    def __init__(
        self, key: str, placement: Placement, borrowed: bool = False, backfilled: bool = False
    ) -> None:
        self.key = key
        self.placement = placement
        self.borrowed = borrowed
        self.backfilled = backfilled


@dataclass(frozen=True)
class Provision:
    """No colony has room for `key`: create a colony for `offer` (the cheapest that fits)."""

    key: str
    offer: RankedOffer


@dataclass(frozen=True)
class Preempt:
    """Evict running `victim` so that `for_key` can start (in a later pass, once it is gone)."""

    victim: str
    for_key: str
    reason: str


class Estimate(Value):
    """Where a pending request stands.

    position: 1-based rank among the pending requests of its queue, in the order the scheduler serves
    them. start_s: estimated start time (same clock as now_s), from running requests' declared
    remaining time and the requests ahead; None when it cannot be estimated (e.g. unknown durations
    ahead). reason: why it is still waiting (quota, capacity, priority, ...).
    """

    FIELDS = ("position", "start_s", "reason")

    def __init__(self, position: int, start_s: float | None, reason: str) -> None:
        self.position = position
        self.start_s = start_s
        self.reason = reason


@dataclass(frozen=True)
class Decisions:
    """The outcome of one pass."""

    admitted: tuple[Admit, ...] = ()
    provisions: tuple[Provision, ...] = ()
    preemptions: tuple[Preempt, ...] = ()
    estimates: Mapping[str, Estimate] = field(default_factory=dict)
    """For every pending request that was not admitted."""
    reserved: tuple[str, ...] = ()
    """Requests holding a head reservation ("default" and "shortest": the first request of each
    priority blocked by capacity, or by its cohort's lending, on a GPU type): nothing admitted in this
    pass delays their estimated
    start (EASY backfill). Without estimates a pass stops once nothing more can start, so it may
    list fewer."""
