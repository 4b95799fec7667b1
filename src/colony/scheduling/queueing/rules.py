"""Pure rules of the GPR scheduling loop, on the objects it read (no I/O).

Which queue a request is charged to, which colonies it may use, which reservation labels are not
foreign, when a running request is due for release, what its status says once Ready, and which
queue positions, wait estimates and queue usage are worth writing. The loop
(`colony.controllers.gpr`) reads the objects, asks these rules, and writes what they answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from colony.scheduling.queueing.model import Estimate, GpuRequest, QueueOrder, QueueQuota, RunningRequest
from colony.scheduling.queueing.objects import (
    listed_colonies,
    parse_duration,
    request_key,
    reservation_label,
    timestamp,
)
from colony.scheduling.visibility import Visibility, visible
from colony.timefmt import format_time

NAMESPACE_QUEUE_PREFIX = "namespace:"
"""The prefix of the queue a namespace that no GPUQueue lists gets to itself."""
UNLIMITED = 10**9
"""The quota of a namespace's own queue."""
ESTIMATE_TOLERANCE = 0.1
"""A wait estimate is rewritten when it moved by more than this fraction (or 5 s)."""
EXACT_POSITIONS = 10
ESTIMATE_REFRESH_S = 5.0
"""Positions beyond EXACT_POSITIONS and wait estimates are rewritten at most this often (is_prompt)."""
"""Queue positions up to this are always exact; further back one is rewritten when it moved by more
than ESTIMATE_TOLERANCE of itself (thousands of waiting requests each move every pass)."""


def queue_name(
    queues: Sequence[Mapping[str, Any]],
    namespace_queues: Mapping[str, str],
    namespace: str,
    requested: str | None,
    require_queue: bool,
) -> str:
    """The GPUQueue charged for a namespace's requests. A namespace no GPUQueue lists gets a queue
    of its own without quota (positions and fair sharing are then per namespace), unless
    `require_queue` (COLONY_REQUIRE_QUEUE=true), which makes its requests wait, naming the cause. A
    request naming a queue (`queueName`) gets it when that queue lists its namespace, else it
    waits, naming why. `namespace_queues` maps a namespace to the GPUQueue listing it."""
    if requested:
        queue = next((q for q in queues if q["metadata"]["name"] == requested), None)
        if queue is not None and namespace in ((queue.get("spec") or {}).get("namespaces") or []):
            return requested
        return f"({requested}: no GPUQueue of that name lists namespace {namespace})"
    listed = namespace_queues.get(namespace)
    if listed is not None:
        return listed
    return (
        f"(no GPUQueue lists namespace {namespace})" if require_queue else NAMESPACE_QUEUE_PREFIX + namespace
    )


def request_queue(
    gpr: Mapping[str, Any],
    queues: Sequence[Mapping[str, Any]],
    namespace_queues: Mapping[str, str],
    require_queue: bool,
) -> str:
    """The queue a GPR is charged to (see `queue_name`)."""
    return queue_name(
        queues,
        namespace_queues,
        gpr["metadata"]["namespace"],
        (gpr.get("spec") or {}).get("queueName"),
        require_queue,
    )


def public_queue(name: str) -> str | None:
    """The queue name shown in status (None for a namespace's own unlimited queue)."""
    return None if name.startswith(NAMESPACE_QUEUE_PREFIX) else name


def candidate_colonies(
    gpr: Mapping[str, Any],
    colonies: Mapping[str, Mapping[str, Any]],
    visibility: Visibility,
    known: dict[tuple[Any, ...], frozenset[str]],
) -> frozenset[str]:
    """The GPR's own namespace's colonies and those shared with it (ColonyShare), matching its
    colonySelector and among its `colonies` when it lists them; only its provisioned colony once it
    has one. `colonies` are the Ready colonies by key; `known` keeps the answers of one pass by what
    decides them (requests of one namespace mostly share them)."""
    namespace = gpr["metadata"]["namespace"]
    provisioned = (gpr.get("status") or {}).get("provisionedColony")
    if provisioned:
        return frozenset({f"{namespace}/{provisioned}"})
    selector = ((gpr["spec"].get("colonySelector") or {}).get("matchLabels")) or {}
    listed = listed_colonies(gpr)
    decided_by = (namespace, tuple(sorted(selector.items())), listed)
    found = known.get(decided_by)
    if found is None:
        found = known[decided_by] = matching_colonies(colonies, visibility, namespace, selector, listed)
    return found


def matching_colonies(
    colonies: Mapping[str, Mapping[str, Any]],
    visibility: Visibility,
    namespace: str,
    selector: Mapping[str, str],
    listed: tuple[str, ...] | None,
) -> frozenset[str]:
    """The colonies visible to `namespace` whose labels match `selector`, among `listed` if given."""
    chosen = set()
    for key, colony in colonies.items():
        if listed is not None and key not in listed:
            continue
        labels = colony["metadata"].get("labels") or {}
        if visible(key, namespace, visibility) and all(labels.get(k) == v for k, v in selector.items()):
            chosen.add(key)
    return frozenset(chosen)


def known_reservations(
    running: Iterable[RunningRequest], gprs: Iterable[Mapping[str, Any]]
) -> dict[str, set[str]]:
    """Reservation labels per colony that are not foreign. A reservation is "ours" only on the
    colony it was made through: the same physical cluster registered as two colonies must not sell
    its GPUs twice. A request being deleted gives its GPUs back at once, like its quota: its label,
    until its delete handler takes it off, is neither held by a running request nor foreign."""
    known: dict[str, set[str]] = {}
    for r in running:
        known.setdefault(r.placement.colony, set()).add(reservation_label(r.request.key))
    for gpr in gprs:
        colony = (gpr.get("status") or {}).get("colony")
        if gpr["metadata"].get("deletionTimestamp") and colony:
            known.setdefault(str(colony), set()).add(reservation_label(request_key(gpr)))
    return known


def placement_order(colony: Mapping[str, Any]) -> str:
    """A colony's placement-order annotation ("0" when absent or not an integer)."""
    value = (colony["metadata"].get("annotations") or {}).get("colony.exalsius.ai/placement-order", "0")
    return value if str(value).lstrip("-").isdigit() else "0"


def expired(gpr: Mapping[str, Any], now: float) -> str | None:
    """Why a running request is due for release because its exitDuration elapsed (counted from
    admittedAt), or None."""
    spec, status = gpr["spec"], gpr.get("status") or {}
    admitted = timestamp(status.get("admittedAt")) or now
    limit = parse_duration(spec.get("exitDuration"))
    if limit is not None and now - admitted >= limit:
        return f"exitDuration {spec['exitDuration']} elapsed"
    return None


def idle_limit(gpr: Mapping[str, Any]) -> float | None:
    """The seconds a Ready request's GPUs may stay unused (idleTimeOutDuration); None when it has
    none or is not Ready."""
    limit = parse_duration(gpr["spec"].get("idleTimeOutDuration"))
    if limit is None or (gpr.get("status") or {}).get("phase") != "Ready":
        return None
    return limit


def ready_message(status: Mapping[str, Any]) -> str:
    """The message of a Ready request: what it holds and the node label its workloads select."""
    nodes = status.get("nodes") or []
    return (
        f"{status.get('gpusAllocated')} {status.get('gpuType')} GPU(s) reserved on {len(nodes)} node(s) of "
        f"colony {status.get('colony')}; workloads select them by the node label "
        f"{status.get('reservationLabel')}"
    )


def position_moved(previous: int | None, position: int) -> bool:
    """Whether a queue position changed enough to be rewritten (see EXACT_POSITIONS)."""
    if previous == position:
        return False
    if previous is None or min(previous, position) <= EXACT_POSITIONS:
        return True
    return abs(position - previous) > ESTIMATE_TOLERANCE * previous


def is_prompt(status: Mapping[str, Any], update: Mapping[str, Any]) -> bool:
    """Whether an estimate `update` of a waiting request (with `status`) is written at once rather
    than at the next refresh (ESTIMATE_REFRESH_S): a new request's first Queued status, a change of
    queue, and a position among the first EXACT_POSITIONS. Deeper positions and wait estimates move
    with every admission: rewriting thousands of them every pass loads the API server that the
    admissions need (Kueue likewise refreshes its pending-workload positions every 5 s)."""
    if "phase" in update or "queue" in update:
        return True
    if "positionInQueue" not in update:
        return False
    previous = status.get("positionInQueue")
    return previous is None or min(int(previous), int(update["positionInQueue"])) <= EXACT_POSITIONS


def estimate_update(
    status: Mapping[str, Any], estimate: Estimate, now: float, queue: str | None
) -> dict[str, Any]:
    """The status fields of a waiting request (its `status`, charged to the public `queue`) to
    rewrite for `estimate` (empty: none moved enough)."""
    wait = None if estimate.start_s is None else max(0, int(estimate.start_s - now))
    previous = status.get("estimatedWaitSeconds")
    moved = (wait is None) != (previous is None) or (
        wait is not None
        and previous is not None
        and abs(wait - previous) > max(5, ESTIMATE_TOLERANCE * max(wait, previous))
    )
    update: dict[str, Any] = {}
    if position_moved(status.get("positionInQueue"), estimate.position):
        update["positionInQueue"] = estimate.position
    if moved:
        update["estimatedWaitSeconds"] = wait
        update["estimatedStartTime"] = (
            None if estimate.start_s is None else format_time(datetime.fromtimestamp(estimate.start_s, UTC))
        )
    if status.get("phase") is None:
        update["phase"] = "Queued"  # a new request (written only onto the version read)
    if status.get("phase") in (None, "Queued") and status.get("message") != estimate.reason:
        update["message"] = estimate.reason
    if status.get("queue") != queue:
        update["queue"] = queue
    return update


def queue_usage(
    queue: QueueQuota,
    running: Sequence[RunningRequest],
    pending: Sequence[GpuRequest],
    policy: QueueOrder = "default",
) -> dict[str, Any]:
    """A GPUQueue's status: its pending and admitted counts, the GPUs in use per type (with what
    is borrowed beyond its nominal quota), and the operator's queue policy that orders it."""
    used: dict[str, int] = {}
    for request in running:
        if request.request.queue == queue.name:
            used[request.placement.gpu_type] = used.get(request.placement.gpu_type, 0) + request.request.gpus
    return {
        "pending": sum(1 for p in pending if p.queue == queue.name),
        "admitted": sum(1 for r in running if r.request.queue == queue.name),
        "usage": [
            {
                "gpuType": gpu_type,
                "used": count,
                "borrowed": max(0, count - queue.nominal.get(gpu_type, 0)),
            }
            for gpu_type, count in sorted(used.items())
        ],
        "policy": policy,
    }
