"""The GPR scheduling loop: observe → snapshot → `schedule()` → apply, once a second or on a change.

One pass:
1. reads GPRs and Colonies of the watched namespaces, GPUQueues, and each Ready colony cluster's
   Nodes and Pods;
2. releases what is due: exitDuration elapsed (Expired), reserved GPUs idle for
   idleTimeOutDuration (Released); finishes interrupted admissions (Admitted → labels → Ready);
3. runs the pure scheduler core on the snapshot (in a thread: it is CPU work);
4. applies its decisions: admit (status first; node reservation labels, then Ready, are written
   in the background while the next pass runs, which counts the GPUs as taken already), preempt
   (labels removed, victim requeued with evictedBy), provision (an ephemeral Colony for the
   cheapest offer), and writes queue positions and wait estimates that changed.

Every decision is written to the request's status before anything else is done for it, so a
crash anywhere is finished or redone by a later pass; status is the source of truth for
allocations.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import aiohttp
import kopf

from colony import events, metrics, settings
from colony.api import COLONY, GPR, GPUQUEUE
from colony.api.conditions import set_condition
from colony.api.gpr import GPRSpec
from colony.controllers.acceptance import accept_spec
from colony.controllers.cluster_access import cluster_client
from colony.controllers.colony_shares import read_visibility
from colony.gpu import GPU_PRODUCT_LABEL, GPU_RESOURCE
from colony.kube.colony_clusters import ClusterAccessError
from colony.kube.informer import Informer, newer
from colony.kube.resources import Conflict, Kube, KubeApiError, NotFound
from colony.labels import FINALIZER, FOR_GPR_LABEL, FOR_GPR_NAME_ANNOTATION
from colony.render.offer_colony import (
    SUPPORTED_CLOUDS,
    ProviderNotSupported,
    colony_for_offer,
    ephemeral_colony_name,
)
from colony.scheduling.fault_rules import (
    COLONY_REACHABLE,
    IdleAction,
    Reservations,
    idle_action,
    label_fixes,
    ledger_entry,
    orphaned_colonies,
    pinned_while_unreachable,
    reachability_condition,
    reservations,
    settled_ledger,
    stale_ledger,
    transition_applies,
    unreachable_clusters,
)
from colony.scheduling.offers.gpu_names import normalize_gpu
from colony.scheduling.queueing.core import schedule
from colony.scheduling.queueing.model import (
    Admit,
    ColonyInfo,
    Decisions,
    Estimate,
    GpuNode,
    GpuRequest,
    Preempt,
    Provision,
    QueueQuota,
    RunningRequest,
    Snapshot,
)
from colony.scheduling.queueing.objects import (
    PENDING_PHASES,
    RUNNING_PHASES,
    gpu_nodes,
    gpu_request,
    listed_colonies,
    parse_duration,
    pod_uses_reservation,
    queue_quota,
    queues_by_namespace,
    request_key,
    reservation_label,
    running_request,
    timestamp,
)
from colony.scheduling.visibility import NOBODY_ELSE, Visibility, visible
from colony.status.cost import job_usage, price_per_gpu_hour
from colony.timefmt import format_time
from colony.versions import pinned

PASS_INTERVAL_S = settings.positive_seconds("COLONY_SCHEDULE_INTERVAL_SECONDS", 1.0)
REQUIRE_QUEUE = settings.flag("COLONY_REQUIRE_QUEUE")
PLACEMENT_POLICY = settings.placement_policy()
QUEUE_POLICY = settings.queue_policy()
QUEUE_AGING_S = settings.queue_aging_seconds()
CLUSTER_READ_TIMEOUT_S = 5.0
USAGE_REFRESH_S = 60.0
UNFINISHED_PODS = "status.phase!=Succeeded,status.phase!=Failed"
ESTIMATE_TOLERANCE = 0.1
"""A wait estimate is rewritten when it moved by more than this fraction (or 5 s)."""
EXACT_POSITIONS = 10
"""Queue positions up to this are always exact; further back one is rewritten when it moved by more
than ESTIMATE_TOLERANCE of itself (thousands of waiting requests each move every pass)."""
ESTIMATE_WRITES_PER_PASS = 200
"""Most status writes of positions, estimates and messages per pass, heads of the queues first;
the rest follow in later passes (a pass must stay short with any number waiting)."""
ACCEPTS_PER_PASS = 500
"""Most new specs a pass accepts (status and Event); the rest follow in the next passes."""
WRITE_CONCURRENCY = 24
"""Requests the loop applies decisions to at once (colony.kube.config.CONNECTIONS connections, which
kopf's handlers share)."""
SETTLE_S = 0.05
"""Pause after a pass before the next may start: wake-ups of a burst of new requests coalesce."""
ESTIMATE_WRITE_CONCURRENCY = 2
"""... and when it writes estimates in the background, so that the next pass's reads and
admissions find free connections."""
WRITE_ATTEMPTS = 3
"""Tries of a status write carrying a resourceVersion precondition (each after a 409 re-reads the
request and recomputes the write from the fresh version); then the next pass decides afresh."""
UNREACHABLE = (ClusterAccessError, KubeApiError, OSError, TimeoutError, aiohttp.ClientError)
"""Errors of a colony cluster that is down, hung, refusing us, or gone: that colony is skipped for
the pass (or the write recorded for later), never the whole pass."""

log = logging.getLogger(__name__)


@dataclass
class ClusterView:
    """What one pass read from one colony cluster."""

    colony: str
    cluster: str
    kube: Kube
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]


@dataclass
class World:
    """Everything one pass read."""

    now: float
    gprs: list[dict[str, Any]]
    queues: list[dict[str, Any]]
    colonies: dict[str, dict[str, Any]]
    """Ready colonies by key `namespace/name`."""
    all_colonies: dict[str, dict[str, Any]]
    visibility: Visibility = NOBODY_ELSE
    """Which colonies each namespace may use (its own; others through ColonyShares)."""
    clusters: dict[tuple[str, str], ClusterView] = field(default_factory=dict)
    reads: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = field(default_factory=dict)
    """Nodes and pods by API server URL (one read per physical cluster per pass)."""
    namespace_queues: dict[str, str] = field(default_factory=dict)
    """namespace -> the GPUQueue listing it (computed once per pass from `queues`)."""
    candidates: dict[tuple[Any, ...], frozenset[str]] = field(default_factory=dict)
    """Candidate colonies by what decides them (requests of one namespace mostly share them)."""

    def __post_init__(self) -> None:
        self.namespace_queues = queues_by_namespace(self.queues)


class ParseCache:
    """Values derived from a request's spec, kept from one pass to the next: a waiting request is
    validated and turned into the core's GpuRequest once per spec (generation), not on every pass
    (thousands wait at once). What a pass did not ask for is dropped when it ends."""

    def __init__(self) -> None:
        self._previous: dict[tuple[Any, ...], Any] = {}
        self._current: dict[tuple[Any, ...], Any] = {}

    def get(self, key: tuple[Any, ...], compute: Callable[..., Any], *args: Any) -> Any:
        """The value for `key`, `compute(*args)` only when the previous or this pass has none."""
        if key in self._current:
            return self._current[key]
        value = self._previous[key] if key in self._previous else compute(*args)
        self._current[key] = value
        return value

    def end_pass(self) -> None:
        """Forget what this pass did not use."""
        self._previous, self._current = self._current, {}


def _parse_cache(memo: kopf.Memo) -> ParseCache:
    cache: ParseCache | None = getattr(memo, "parse_cache", None)
    if cache is None:
        cache = memo.parse_cache = ParseCache()
    return cache


def _spec_version(gpr: Mapping[str, Any]) -> tuple[str, Any]:
    """What identifies a request's spec: its uid and generation (a spec change bumps it; an object
    without a generation is identified by its resourceVersion)."""
    meta = gpr["metadata"]
    return str(meta.get("uid") or request_key(gpr)), meta.get("generation") or meta.get("resourceVersion")


def _key(obj: Mapping[str, Any]) -> str:
    return request_key(obj)


def _watched(memo: kopf.Memo, namespace: str) -> bool:
    patterns: Sequence[str] = getattr(memo, "namespaces", ()) or ()
    return not patterns or any(fnmatch.fnmatchcase(namespace, p) for p in patterns)


@kopf.on.startup()
async def start_scheduler(memo: kopf.Memo, **_: Any) -> None:
    """Run the scheduling loop for the operator's lifetime."""
    memo.scheduler_wakeup = asyncio.Event()
    memo.scheduler_task = asyncio.create_task(_loop(memo))


@kopf.on.cleanup()
async def stop_scheduler(memo: kopf.Memo, **_: Any) -> None:
    """Stop the loop."""
    background = ("estimate_writes", "queue_usage_writes")
    for name in ("scheduler_task", *background, *(f"{i}_informer_task" for i in INFORMED)):
        task: asyncio.Task[None] | None = getattr(memo, name, None)
        if task is not None:
            task.cancel()
    for reservation in list(_reservations_in_flight(memo).values()):
        reservation.cancel()


def wake_scheduler(memo: kopf.Memo) -> None:
    """Ask for a pass now (a GPR, queue or colony changed)."""
    event: asyncio.Event | None = getattr(memo, "scheduler_wakeup", None)
    if event is not None:
        event.set()


@kopf.on.event(GPUQUEUE.group, GPUQUEUE.version, GPUQUEUE.plural)
async def queue_changed(memo: kopf.Memo, **_: Any) -> None:
    """A GPUQueue changed: quotas may admit or require preemption now."""
    wake_scheduler(memo)


INFORMED = {"gpr": GPR, "queue": GPUQUEUE, "colony": COLONY}
"""The kinds a pass reads, by informer name (memo.<name>_informer)."""


def _start_informers(memo: kopf.Memo) -> None:
    """An operator watching the whole cluster keeps the GPRs, GPUQueues and Colonies in memory
    (colony.kube.informer) instead of listing them all on every pass; one limited to namespaces
    lists them (its RBAC may not allow cluster-wide watches). A new or deleted request wakes the
    scheduler at once (kopf's handlers may lag behind the watch under load)."""
    if getattr(memo, "namespaces", None):
        return
    for name, kind in INFORMED.items():
        wake = _wake_on_gpr_event(memo) if name == "gpr" else None
        informer = Informer(memo.kube.api, kind.group, kind.version, kind.plural, kind.kind, wake)
        setattr(memo, f"{name}_informer", informer)
        setattr(memo, f"{name}_informer_task", asyncio.create_task(informer.run()))


def _wake_on_gpr_event(memo: kopf.Memo) -> Callable[[str, Mapping[str, Any]], None]:
    def wake(event_type: str, obj: Mapping[str, Any]) -> None:
        if event_type == "DELETED":
            _deleted(memo).append(dict(obj))
        if event_type != "MODIFIED" or (obj.get("metadata") or {}).get("deletionTimestamp"):
            wake_scheduler(memo)

    return wake


def _informer(memo: kopf.Memo, name: str = "gpr") -> Informer | None:
    """An informer (see INFORMED) once its first list is in."""
    informer: Informer | None = getattr(memo, f"{name}_informer", None)
    return informer if informer is not None and informer.synced.is_set() else None


async def _list(memo: kopf.Memo, name: str) -> list[dict[str, Any]]:
    """Every object of an informed kind: from its informer, else listed."""
    informer = _informer(memo, name)
    if informer is not None:
        return informer.objects()
    kind = INFORMED[name]
    objects: list[dict[str, Any]] = await memo.kube.list(kind.api_version, kind.kind)
    return objects


async def _loop(memo: kopf.Memo) -> None:
    while getattr(memo, "kube", None) is None:
        await asyncio.sleep(0.1)
    _start_informers(memo)
    while True:
        started = time.monotonic()
        try:
            with metrics.observe_handler(GPR.kind, "scheduling_pass"):
                await run_pass(memo)
        except asyncio.CancelledError:
            raise
        except Exception:  # one bad pass must not stop scheduling; the next one retries
            log.exception("scheduling pass failed")
        await asyncio.sleep(SETTLE_S)
        memo.scheduler_wakeup.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(memo.scheduler_wakeup.wait(), PASS_INTERVAL_S)
        log.debug("scheduling pass took %.3fs", time.monotonic() - started)


async def _read(memo: kopf.Memo) -> World:
    """GPRs, GPUQueues and Colonies (from the informers, else listed at once), then the colony
    clusters in play."""
    all_gprs, queues, all_colonies, shares = await asyncio.gather(
        _list(memo, "gpr"), _list(memo, "queue"), _list(memo, "colony"), read_visibility(memo.kube)
    )
    gprs = [g for g in all_gprs if _watched(memo, g["metadata"]["namespace"])]
    colonies = {_key(c): c for c in all_colonies if _watched(memo, c["metadata"]["namespace"])}
    ready = {
        k: c
        for k, c in colonies.items()
        if (c.get("status") or {}).get("phase") == "Ready" and not c["metadata"].get("deletionTimestamp")
    }
    world = World(time.time(), gprs, queues, ready, colonies, shares)
    await _read_colonies(memo, world, sorted(_colonies_in_play(world)))
    return world


def _colonies_in_play(world: World) -> set[str]:
    """Ready colonies that some open request may use or holds GPUs on: only those are read."""
    wanted: set[str] = set()
    for gpr in world.gprs:
        status = gpr.get("status") or {}
        if status.get("phase") in RUNNING_PHASES and status.get("colony"):
            wanted.add(str(status["colony"]))
        elif status.get("phase") in PENDING_PHASES and not gpr["metadata"].get("deletionTimestamp"):
            wanted |= _candidate_colonies(world, gpr)
    return wanted & set(world.colonies)


NodesAndPods = tuple[list[dict[str, Any]], list[dict[str, Any]]]


async def _read_colonies(memo: kopf.Memo, world: World, keys: list[str]) -> None:
    """Nodes and unfinished pods of the Ready clusters of these colonies, all read concurrently
    under one deadline (CLUSTER_READ_TIMEOUT_S for the whole pass, not per colony): a colony whose
    clusters miss it is left out of this pass (its requests keep their GPUs, see fault_rules) while
    the others are scheduled. A cluster registered in several colonies (same API server) is read
    once. Views are added in the colonies' sorted order, so a pass's decisions do not depend on
    which server answered first."""
    deadline = asyncio.get_running_loop().time() + CLUSTER_READ_TIMEOUT_S
    reads: dict[str, asyncio.Future[NodesAndPods]] = {}
    try:
        views = await asyncio.gather(*(_read_colony(memo, world, key, reads, deadline) for key in keys))
    finally:
        for task in reads.values():
            task.cancel()
        await asyncio.gather(*reads.values(), return_exceptions=True)
    for colony_views in views:
        for view in colony_views:
            world.clusters[(view.colony, view.cluster)] = view
    world.reads.update({server: task.result() for server, task in reads.items() if _succeeded(task)})


def _succeeded(task: asyncio.Future[NodesAndPods]) -> bool:
    """Whether a read finished with a result (not cancelled at the deadline, not failed)."""
    return task.done() and not task.cancelled() and task.exception() is None


async def _read_colony(
    memo: kopf.Memo, world: World, key: str, reads: dict[str, asyncio.Future[NodesAndPods]], deadline: float
) -> list[ClusterView]:
    """Views of the Ready clusters of one colony that answered before the pass's deadline."""
    namespace, name = key.split("/", 1)
    loop = asyncio.get_running_loop()
    views: list[ClusterView] = []
    for cluster in (world.colonies[key].get("status") or {}).get("clusters") or []:
        if cluster.get("phase") != "Ready":
            continue
        try:
            client = await cluster_client(memo, namespace, name, cluster["name"], world.colonies[key])
            server = str(client.api.configuration.host)
            if server not in reads:
                reads[server] = asyncio.ensure_future(
                    asyncio.gather(
                        client.list("v1", "Node"), client.list("v1", "Pod", field_selector=UNFINISHED_PODS)
                    )
                )
            remaining = max(deadline - loop.time(), 0.0)
            nodes, pods = await asyncio.wait_for(asyncio.shield(reads[server]), remaining)
        except UNREACHABLE as error:
            log.warning("colony %s cluster %s unreadable: %s", key, cluster["name"], error)
            continue
        views.append(ClusterView(key, cluster["name"], client, nodes, pods))
    return views


NAMESPACE_QUEUE_PREFIX = "namespace:"
UNLIMITED = 10**9


def _queue_name(world: World, namespace: str, requested: str | None = None) -> str:
    """The GPUQueue charged for a namespace's requests. A namespace no GPUQueue lists gets a queue
    of its own without quota (positions and fair sharing are then per namespace), unless
    COLONY_REQUIRE_QUEUE=true, which makes its requests wait, naming the cause. A request naming a
    queue (`queueName`) gets it when that queue lists its namespace, else it waits, naming why."""
    if requested:
        queue = next((q for q in world.queues if q["metadata"]["name"] == requested), None)
        if queue is not None and namespace in ((queue.get("spec") or {}).get("namespaces") or []):
            return requested
        return f"({requested}: no GPUQueue of that name lists namespace {namespace})"
    listed = world.namespace_queues.get(namespace)
    if listed is not None:
        return listed
    return (
        f"(no GPUQueue lists namespace {namespace})" if REQUIRE_QUEUE else NAMESPACE_QUEUE_PREFIX + namespace
    )


def _gpr_queue(world: World, gpr: Mapping[str, Any]) -> str:
    """The queue a GPR is charged to (see _queue_name)."""
    return _queue_name(world, gpr["metadata"]["namespace"], (gpr.get("spec") or {}).get("queueName"))


def _public_queue(name: str) -> str | None:
    """The queue name shown in status (None for a namespace's own unlimited queue)."""
    return None if name.startswith(NAMESPACE_QUEUE_PREFIX) else name


def _valid(gpr: Mapping[str, Any]) -> bool:
    try:
        GPRSpec.model_validate(dict(gpr["spec"]))
    except ValueError:
        return False
    return True


def _candidate_colonies(world: World, gpr: Mapping[str, Any]) -> frozenset[str]:
    """The GPR's own namespace's colonies and those shared with it (ColonyShare), matching its
    colonySelector and among its `colonies` when it lists them; only its provisioned colony once it
    has one."""
    namespace = gpr["metadata"]["namespace"]
    provisioned = (gpr.get("status") or {}).get("provisionedColony")
    if provisioned:
        return frozenset({f"{namespace}/{provisioned}"})
    selector = ((gpr["spec"].get("colonySelector") or {}).get("matchLabels")) or {}
    listed = listed_colonies(gpr)
    decided_by = (namespace, tuple(sorted(selector.items())), listed)
    if (known := world.candidates.get(decided_by)) is None:
        known = world.candidates[decided_by] = _matching_colonies(world, namespace, selector, listed)
    return known


def _matching_colonies(
    world: World, namespace: str, selector: Mapping[str, str], listed: tuple[str, ...] | None
) -> frozenset[str]:
    chosen = set()
    for key, colony in world.colonies.items():
        if listed is not None and key not in listed:
            continue
        labels = colony["metadata"].get("labels") or {}
        if visible(key, namespace, world.visibility) and all(labels.get(k) == v for k, v in selector.items()):
            chosen.add(key)
    return frozenset(chosen)


def _unreachable(world: World, gpr: Mapping[str, Any]) -> list[str]:
    """The clusters of a running request's colony that this pass could not read."""
    return unreachable_clusters(gpr, world.clusters, world.all_colonies)


def _reservation_in_use(world: World, gpr: Mapping[str, Any]) -> bool:
    label = reservation_label(_key(gpr))
    colony = (gpr.get("status") or {}).get("colony")
    return any(
        pod_uses_reservation(pod) == label
        and (pod.get("status") or {}).get("phase") in ("Pending", "Running")
        for (key, _), view in world.clusters.items()
        if key == colony
        for pod in view.pods
    )


def _deleted(memo: kopf.Memo) -> list[dict[str, Any]]:
    """Requests the GPR informer saw deleted since the last pass (their last known state)."""
    if getattr(memo, "gpr_deleted", None) is None:
        memo.gpr_deleted = []
    deleted: list[dict[str, Any]] = memo.gpr_deleted
    return deleted


def _seen(memo: kopf.Memo) -> dict[str, dict[str, Any]]:
    """The requests of the last pass's read, by key, each at the newest version known: the one
    read, or a later one this process wrote (an admission written after the read must be known
    when the request disappears from the next read, or its labels would stay on)."""
    if getattr(memo, "gpr_seen", None) is None:
        memo.gpr_seen = {}
    seen: dict[str, dict[str, Any]] = memo.gpr_seen
    return seen


def _remember(memo: kopf.Memo, written: dict[str, Any]) -> None:
    """Keep a request version this process wrote (see `_seen`; the informer keeps it too)."""
    seen, key = _seen(memo), _key(written)
    if key not in seen or newer(written, seen[key]):
        seen[key] = written
    if (informer := _informer(memo)) is not None:
        informer.put(written)  # the next pass sees this write even before the watch brings it


async def _release_deleted(memo: kopf.Memo, world: World) -> bool:
    """Free the reservations (and unused ephemeral colony) of the requests deleted since the last
    pass: those the informer reported deleted and those missing from this read that the last one
    had (requests that never held GPUs, so had no finalizer; an ephemeral colony that a crash makes
    this miss is found by the orphan sweeper). Then `_sync_finalizers`. True when something was
    released."""
    released = False
    seen = _seen(memo)
    current = {_key(g): g for g in world.gprs}
    gone = {k: g for k, g in seen.items() if k not in current}
    for last in _deleted(memo):  # the informer's last state of a deleted request
        key = _key(last)
        if key not in gone or newer(last, gone[key]):
            gone[key] = last
    memo.gpr_deleted = []
    memo.gpr_seen = {k: seen[k] if k in seen and newer(seen[k], g) else g for k, g in current.items()}
    for key, gpr in sorted(gone.items()):
        if key in current:
            continue  # deleted and created again under the same name: the new one is live
        await release_on_delete(memo, gpr, wake=False)
        metrics.forget_job(gpr["metadata"]["namespace"], GPR.kind, gpr["metadata"]["name"])
        released = True
    return await _sync_finalizers(memo, world) or released


async def _sync_finalizers(memo: kopf.Memo, world: World) -> bool:
    """A request holds the operator's finalizer exactly while it may have reservation labels on
    nodes (it is put on by `_reserve` before any label): one being deleted is released here, then
    let go; one that stopped holding GPUs (released, expired, preempted, requeued) is let go. A
    request whose admission is being finished in the background is left to that task this pass.
    True when a deleted request was released."""
    in_flight = _reservations_in_flight(memo)
    released = False

    async def settle(gpr: dict[str, Any]) -> None:
        nonlocal released
        if gpr["metadata"].get("deletionTimestamp"):
            await release_on_delete(memo, gpr, wake=False)
            metrics.forget_job(gpr["metadata"]["namespace"], GPR.kind, gpr["metadata"]["name"])
            released = True
        try:
            await _set_finalizer(memo, gpr, hold=False)
        except KubeApiError as error:  # the next pass tries again
            log.warning("letting go of %s failed: %s", _key(gpr), error)

    await _concurrently(
        settle(g)
        for g in world.gprs
        if FINALIZER in (g["metadata"].get("finalizers") or [])
        and _key(g) not in in_flight
        and (
            g["metadata"].get("deletionTimestamp")
            or (g.get("status") or {}).get("phase") not in RUNNING_PHASES
        )
    )
    return released


async def _set_finalizer(memo: kopf.Memo, gpr: Mapping[str, Any], *, hold: bool) -> dict[str, Any] | None:
    """Put the operator's finalizer on a request (`hold`) or take it off: a merge patch of the
    whole list, onto the version it was computed from (after a 409 the request is read again).
    Returns the request as it now is (as given when there was nothing to do), None when it is gone
    or, for `hold`, being deleted (no finalizer can be added then)."""
    current: Mapping[str, Any] | None = gpr
    for _ in range(WRITE_ATTEMPTS):
        if current is None:
            return None
        meta = current["metadata"]
        if hold and meta.get("deletionTimestamp"):
            return None
        finalizers = list(meta.get("finalizers") or [])
        if (FINALIZER in finalizers) == hold:
            return dict(current)
        wanted = [*finalizers, FINALIZER] if hold else [f for f in finalizers if f != FINALIZER]
        body = {"metadata": {"finalizers": wanted or None, "resourceVersion": meta.get("resourceVersion")}}
        try:
            patched: dict[str, Any] = await memo.kube.patch(
                GPR.api_version, GPR.kind, meta["name"], meta["namespace"], body
            )
        except NotFound:
            return None
        except Conflict:
            current = await memo.kube.get(GPR.api_version, GPR.kind, meta["name"], meta["namespace"])
            continue
        _remember(memo, patched)
        return patched
    raise Conflict(409, "Conflict", f"finalizer of {_key(gpr)}: the request kept changing")


async def _accept(memo: kopf.Memo, world: World) -> None:
    """Validate the specs not yet accepted at their generation, in bulk (at most
    ACCEPTS_PER_PASS, oldest first; scheduling does not wait for it: a pass parses every spec
    itself): observedGeneration and an Accepted condition (an invalid spec fails the request with
    the reason), and a GPRQueued event for a new valid request. The world keeps the written
    versions, so this pass's later writes go onto them."""
    position = {id(g): i for i, g in enumerate(world.gprs)}

    async def accept(gpr: dict[str, Any]) -> None:
        meta = gpr["metadata"]
        status = gpr.get("status") or {}
        patch = kopf.Patch()
        parsed = accept_spec(GPRSpec, gpr.get("spec") or {}, status, meta.get("generation"), patch, log)
        try:
            patched = await _patch(memo, gpr, dict(patch.status), only_if_unchanged=True)
        except KubeApiError as error:  # one request's failed write must not fail the pass
            log.warning("accepting %s failed (retried next pass): %s", _key(gpr), error)
            return
        if patched is None:
            return  # gone, or changed since this read: the next pass accepts the newer version
        world.gprs[position[id(gpr)]] = patched
        if isinstance(parsed, GPRSpec) and not status.get("phase"):
            shapes = ", ".join(parsed.gpu_shapes or [parsed.gpu_shape or "any"])
            size = f"{parsed.number_of_gpu_nodes} node(s) x {parsed.number_of_gpus} GPU(s)"
            await _event(memo, patched, "GPRQueued", f"queued for {size} ({shapes})")

    todo = sorted(
        (
            g
            for g in world.gprs
            if not g["metadata"].get("deletionTimestamp")
            and (g.get("status") or {}).get("observedGeneration") != g["metadata"].get("generation")
        ),
        key=lambda g: (str(g["metadata"].get("creationTimestamp") or ""), _key(g)),
    )
    await _concurrently(accept(g) for g in todo[:ACCEPTS_PER_PASS])


async def run_pass(memo: kopf.Memo) -> Decisions | None:
    """One scheduling pass; returns the core's decisions (None when nothing was pending)."""
    world = await _read(memo)
    if await _release_deleted(memo, world):
        world = await _read(memo)  # the freed GPUs are free for this very pass
    await _accept(memo, world)
    if await _release_due(memo, world):
        world = await _read(memo)  # the released GPUs are free for this very pass
    await _reconcile_colonies(memo, world)
    running: list[RunningRequest] = []
    pending: list[GpuRequest] = []
    by_key: dict[str, dict[str, Any]] = {}
    cache = _parse_cache(memo)
    for gpr in world.gprs:
        version = _spec_version(gpr)
        if gpr["metadata"].get("deletionTimestamp") or not cache.get(("valid", *version), _valid, gpr):
            continue
        status = gpr.get("status") or {}
        queue = _gpr_queue(world, gpr)
        by_key[_key(gpr)] = gpr
        if status.get("phase") in RUNNING_PHASES:
            if (current := running_request(gpr, queue)) is not None:
                running.append(pinned_while_unreachable(current, bool(_unreachable(world, gpr))))
        elif status.get("phase") in PENDING_PHASES:
            if await _provisioning_failed(memo, world, gpr):
                continue
            candidates = _candidate_colonies(world, gpr)
            request = cache.get(("request", *version, queue, candidates), gpu_request, gpr, queue, candidates)
            if status.get("provisionedColony"):
                request = replace(request, auto_provision=False)  # its colony is on the way
            pending.append(request)
    cache.end_pass()
    await _finish_admissions(memo, world, by_key)
    namespace_queues = sorted(
        {r.queue for r in (*pending, *(r.request for r in running))}
        - {q["metadata"]["name"] for q in world.queues}
    )
    queues = tuple(queue_quota(q) for q in world.queues) + tuple(
        QueueQuota(name, {"*": UNLIMITED})
        for name in namespace_queues
        if name.startswith(NAMESPACE_QUEUE_PREFIX)
    )
    known = known_reservations(running, world.gprs)
    nodes: list[GpuNode] = []
    for view in world.clusters.values():
        nodes += gpu_nodes(view.colony, view.cluster, view.nodes, view.pods, known.get(view.colony, set()))
    if not pending:
        _export_metrics(world, queues, nodes, running, pending, Decisions())
        _write_queue_status(memo, world, queues, running, pending, Decisions())
        return None
    snapshot = Snapshot(
        now_s=world.now,
        pending=tuple(pending),
        running=tuple(running),
        nodes=tuple(nodes),
        colonies=tuple(
            ColonyInfo(key, price_per_gpu_hour(c.get("status") or {}), int(_order(c)))
            for key, c in sorted(world.colonies.items())
        ),
        queues=queues,
        offers=tuple(o for o in getattr(memo, "catalog", ()) if o.cloud in SUPPORTED_CLOUDS),
        placement_policy=PLACEMENT_POLICY,
        order=QUEUE_POLICY,
        aging_s=QUEUE_AGING_S,
    )
    decisions = await asyncio.to_thread(schedule, snapshot)
    log.info(
        "scheduling pass: %d pending, %d running, %d node(s): %d admitted, %d preempted, %d provisioning",
        len(pending),
        len(running),
        len(nodes),
        len(decisions.admitted),
        len(decisions.preemptions),
        len(decisions.provisions),
    )
    for key, estimate in sorted(decisions.estimates.items()):
        log.debug("waiting %s (#%d): %s", key, estimate.position, estimate.reason)
    _export_metrics(world, snapshot.queues, nodes, running, pending, decisions)
    await _apply(memo, world, by_key, decisions)
    _write_queue_status(memo, world, snapshot.queues, running, pending, decisions)
    return decisions


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
            known.setdefault(str(colony), set()).add(reservation_label(_key(gpr)))
    return known


def _export_metrics(
    world: World,
    queues: Sequence[QueueQuota],
    nodes: Sequence[GpuNode],
    running: Sequence[RunningRequest],
    pending: Sequence[GpuRequest],
    decisions: Decisions,
) -> None:
    """Queue depth and estimated waits per queue, GPUs allocated/free per colony and GPU type."""
    queue_of = {p.key: p.queue for p in pending}
    waits: dict[str, list[float]] = {}
    for key, estimate in decisions.estimates.items():
        if estimate.start_s is not None and key in queue_of:
            waits.setdefault(queue_of[key], []).append(max(0.0, estimate.start_s - world.now))
    metrics.record_queues(
        {
            q.name: metrics.QueueStats(
                pending=sum(1 for p in pending if p.queue == q.name),
                admitted=sum(1 for r in running if r.request.queue == q.name),
                waits=tuple(waits.get(q.name, ())),
            )
            for q in queues
        }
    )
    inventory = gpu_inventory(world.clusters.values(), nodes, running)
    metrics.record_gpus(
        {
            (colony.split("/", 1)[0], colony.split("/", 1)[-1], gpu_type): counts
            for (colony, gpu_type), counts in inventory.items()
        }
    )


def gpu_inventory(
    views: Iterable[ClusterView], nodes: Sequence[GpuNode], running: Sequence[RunningRequest]
) -> dict[tuple[str, str], tuple[int, int]]:
    """(allocated, free) GPUs by (colony, GPU type) on the Ready schedulable nodes of the clusters
    read: free is what the scheduler may still give out (its nodes' capacity minus what our running
    requests hold), allocated is the rest (reservations and pods)."""
    total: dict[tuple[str, str], int] = {}
    for view in views:
        for node in view.nodes:
            status, labels = node.get("status") or {}, node["metadata"].get("labels") or {}
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
            )
            product = labels.get(GPU_PRODUCT_LABEL)
            if not ready or not product or (node.get("spec") or {}).get("unschedulable"):
                continue
            gpus = int(str((status.get("allocatable") or {}).get(GPU_RESOURCE, 0) or 0))
            key = (view.colony, normalize_gpu(product))
            total[key] = total.get(key, 0) + gpus
    free: dict[tuple[str, str], int] = {}
    for gpu_node in nodes:
        key = (gpu_node.colony, gpu_node.gpu_type)
        free[key] = free.get(key, 0) + gpu_node.capacity
    for r in running:
        key = (r.placement.colony, r.placement.gpu_type)
        if key in free:
            free[key] -= sum(n.gpus for n in r.placement.nodes)
    return {
        key: (max(0, gpus - max(0, free.get(key, 0))), min(gpus, max(0, free.get(key, 0))))
        for key, gpus in total.items()
    }


def _order(colony: Mapping[str, Any]) -> str:
    value = (colony["metadata"].get("annotations") or {}).get("colony.exalsius.ai/placement-order", "0")
    return value if str(value).lstrip("-").isdigit() else "0"


async def _concurrently(calls: Iterable[Awaitable[Any]], limit: int = WRITE_CONCURRENCY) -> None:
    """Await `calls` with at most `limit` in flight; every call runs to its end, then the first
    error (if any) is raised."""
    semaphore = asyncio.Semaphore(limit)

    async def bounded(call: Awaitable[Any]) -> None:
        async with semaphore:
            await call

    results = await asyncio.gather(*(bounded(call) for call in calls), return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        raise errors[0]


async def _patch(
    memo: kopf.Memo, gpr: Mapping[str, Any], status: Mapping[str, Any], *, only_if_unchanged: bool = False
) -> dict[str, Any] | None:
    """Merge-patch the GPR's status; the patched GPR, or None when it is gone or, with
    `only_if_unchanged`, when it changed since `gpr` was read (the status was computed from a stale
    read)."""
    meta = gpr["metadata"]
    version = meta.get("resourceVersion") if only_if_unchanged else None
    try:
        patched: dict[str, Any] = await memo.kube.patch_status(
            GPR.api_version, GPR.kind, meta["name"], meta["namespace"], status, resource_version=version
        )
    except (NotFound, Conflict):
        return None
    _remember(memo, patched)
    return patched


StatusUpdate = Callable[[Mapping[str, Any]], Mapping[str, Any] | None]
"""From a version of a request, the status fields to write onto it, or None to write nothing."""


async def _write_on_version(
    memo: kopf.Memo, gpr: Mapping[str, Any], update: StatusUpdate
) -> tuple[dict[str, Any] | None, Mapping[str, Any] | None]:
    """Merge-patch `update(gpr)` onto exactly the version `gpr` is (resourceVersion precondition);
    after a 409 the request is read again and `update` is asked again on the fresh version, up to
    WRITE_ATTEMPTS times: a write is never computed from one version and applied onto another.
    Returns (the patched request or None, the last version seen: None when it is gone)."""
    meta = gpr["metadata"]
    current: Mapping[str, Any] | None = gpr
    for _ in range(WRITE_ATTEMPTS):
        if current is None:
            break
        status = update(current)
        if status is None:
            break
        try:
            patched: dict[str, Any] = await memo.kube.patch_status(
                GPR.api_version,
                GPR.kind,
                meta["name"],
                meta["namespace"],
                status,
                resource_version=current["metadata"].get("resourceVersion"),
            )
        except NotFound:
            return None, None
        except Conflict:
            current = await memo.kube.get(GPR.api_version, GPR.kind, meta["name"], meta["namespace"])
            continue
        _remember(memo, patched)
        return patched, patched
    return None, current


def _moving(
    read: Mapping[str, Any],
    status: Mapping[str, Any],
    from_phases: Sequence[str | None],
    *,
    same_spec: bool = False,
    same_allocation: bool = False,
    provisioned: tuple[str | None] | None = None,
) -> StatusUpdate:
    """The StatusUpdate of a phase change decided on `read`: `status` on `read` itself, and on a
    fresh version only while `transition_applies` (and, when `provisioned` is given, its
    provisionedColony is `provisioned[0]`)."""

    def update(current: Mapping[str, Any]) -> Mapping[str, Any] | None:
        if current is read:
            return status
        applies = transition_applies(
            read, current, from_phases, same_spec=same_spec, same_allocation=same_allocation
        )
        if (
            provisioned is not None
            and (current.get("status") or {}).get("provisionedColony") != provisioned[0]
        ):
            return None
        return status if applies else None

    return update


async def _event(
    memo: kopf.Memo, gpr: Mapping[str, Any], reason: str, message: str, warning: bool = False
) -> None:
    """A Kubernetes Event on the GPR (posted directly: this loop runs outside kopf's handlers)."""
    await events.post_now(
        memo.kube, GPR.api_version, GPR.kind, gpr["metadata"], reason, message, warning=warning
    )


async def _label_nodes(world: World, gpr: Mapping[str, Any], add: bool) -> list[str]:
    """Put (or take off) the GPR's reservation label on its nodes; returns the nodes (as
    `cluster/node (why)`) whose label could not be written or, when putting it on, read back (a
    node that is gone has no label left to take off)."""
    status = gpr.get("status") or {}
    label = reservation_label(_key(gpr))
    not_labelled: list[str] = []
    for allocation in status.get("nodes") or []:
        node = f"{allocation['cluster']}/{allocation['node']}"
        view = world.clusters.get((str(status.get("colony")), allocation["cluster"]))
        if view is None:
            not_labelled.append(f"{node} (cluster not readable)")
            continue
        value = str(allocation["gpus"]) if add else None
        try:
            patched = await view.kube.patch_labels("v1", "Node", allocation["node"], None, {label: value})
        except NotFound:
            if add:
                not_labelled.append(f"{node} (node gone)")
            continue
        except UNREACHABLE as error:
            not_labelled.append(f"{node} ({type(error).__name__})")
            continue
        if add and ((patched.get("metadata") or {}).get("labels") or {}).get(label) != value:
            not_labelled.append(f"{node} (label not read back)")
    return not_labelled


async def _unlabel(memo: kopf.Memo, world: World, gpr: Mapping[str, Any]) -> None:
    """Take the GPR's reservation label off its nodes; what cannot be taken off now (its colony is
    unreachable) is recorded in the colony's ledger, and comes off when the colony is read again
    (by then the request may be gone, and its label key, a hash, would name nobody)."""
    left = await _label_nodes(world, gpr, add=False)
    colony = str((gpr.get("status") or {}).get("colony") or "")
    if not left or "/" not in colony:
        return
    nodes = [entry.split(" (", 1)[0] for entry in left]
    key, value = ledger_entry(reservation_label(_key(gpr)), nodes)
    namespace, name = colony.split("/", 1)
    log.warning("reservation of %s left on %s of colony %s: recorded for later", _key(gpr), value, colony)
    try:
        await memo.kube.patch(
            COLONY.api_version, COLONY.kind, name, namespace, {"metadata": {"annotations": {key: value}}}
        )
    except NotFound:
        pass  # the colony is gone, and its nodes with it
    except (KubeApiError, OSError, TimeoutError, aiohttp.ClientError) as error:
        log.warning(
            "recording the leftover reservation of %s on colony %s failed: %s", _key(gpr), colony, error
        )


def _usage(gpr: Mapping[str, Any], end: float) -> dict[str, Any]:
    status = gpr.get("status") or {}
    start = timestamp(status.get("admittedAt"))
    gpus = int(status.get("gpusAllocated") or 0)
    usage = job_usage(
        gpus,
        datetime.fromtimestamp(start, UTC) if start else None,
        datetime.fromtimestamp(end, UTC),
        status.get("pricePerGpuHour"),
    )
    return {"gpuHours": usage["gpuHours"], "cost": usage["cost"]}


async def release(memo: kopf.Memo, world: World, gpr: Mapping[str, Any], phase: str, message: str) -> None:
    """Give the GPR's GPUs back (labels off), record why, and tear down its colony if it was the
    last user of an ephemeral one."""
    await _reservation_finished(memo, gpr)
    await _unlabel(memo, world, gpr)
    meta = gpr["metadata"]
    metrics.record_job_usage(meta["namespace"], GPR.kind, meta["name"], _usage(gpr, world.now))
    released = {
        "phase": phase,
        "message": message,
        "releasedAt": format_time(datetime.fromtimestamp(world.now, UTC)),
        "nodes": [],
        **_usage(gpr, world.now),
    }
    patched, _ = await _write_on_version(
        memo, gpr, _moving(gpr, released, RUNNING_PHASES, same_allocation=True)
    )
    if patched is None:
        return  # it no longer holds these GPUs (released, deleted or gone meanwhile)
    await _event(memo, gpr, f"GPR{phase}", message)
    await _teardown_if_unused(memo, world, gpr, released_at=world.now)


async def _teardown_if_unused(
    memo: kopf.Memo, world: World, gpr: Mapping[str, Any], released_at: float | None = None
) -> None:
    """Delete the GPR's provisioned (ephemeral) colony when no other request uses it; the teardown
    latency is measured from `released_at` (default: the GPR's deletion or release time)."""
    provisioned = (gpr.get("status") or {}).get("provisionedColony")
    if not provisioned:
        return
    namespace = gpr["metadata"]["namespace"]
    key = f"{namespace}/{provisioned}"
    users = [
        g
        for g in world.gprs
        if _key(g) != _key(gpr)
        and not g["metadata"].get("deletionTimestamp")
        and (
            (g.get("status") or {}).get("colony") == key
            or (g.get("status") or {}).get("provisionedColony") == provisioned
        )
        and (g.get("status") or {}).get("phase") in (*RUNNING_PHASES, "Provisioning")
    ]
    already_deleting = bool((world.all_colonies.get(key) or {}).get("metadata", {}).get("deletionTimestamp"))
    if not users and await memo.kube.delete(COLONY.api_version, COLONY.kind, provisioned, namespace):
        if already_deleting:
            return  # its teardown was requested (and counted) before, e.g. by its job
        status, meta = gpr.get("status") or {}, gpr["metadata"]
        released = (
            released_at
            or timestamp(status.get("releasedAt"))
            or timestamp(meta.get("deletionTimestamp"))
            or world.now
        )
        metrics.observe_teardown(metrics.teardown.GPR, time.time() - released)
        await _event(memo, gpr, "ColonyTornDown", f"ephemeral colony {provisioned} deletion requested")


async def _bring_usage_forward(memo: kopf.Memo, world: World, gpr: Mapping[str, Any]) -> None:
    """gpuHours and cost of a request holding GPUs, written every USAGE_REFRESH_S, and exported."""
    status = gpr.get("status") or {}
    usage = _usage(gpr, world.now)
    gpus = int(status.get("gpusAllocated") or 0)
    meta = gpr["metadata"]
    metrics.record_job_usage(meta["namespace"], GPR.kind, meta["name"], usage)
    if gpus and usage["gpuHours"] - float(status.get("gpuHours") or 0.0) >= gpus * USAGE_REFRESH_S / 3600:
        await _patch(memo, gpr, usage)


async def _release_due(memo: kopf.Memo, world: World) -> bool:
    """Release what is due; True when something was released."""
    released = False
    for gpr in world.gprs:
        status = gpr.get("status") or {}
        if status.get("phase") not in RUNNING_PHASES or gpr["metadata"].get("deletionTimestamp"):
            continue
        spec = gpr["spec"]
        await _bring_usage_forward(memo, world, gpr)
        admitted = timestamp(status.get("admittedAt")) or world.now
        limit = parse_duration(spec.get("exitDuration"))
        if limit is not None and world.now - admitted >= limit:
            await release(memo, world, gpr, "Expired", f"exitDuration {spec['exitDuration']} elapsed")
            released = True
            continue
        idle_limit = parse_duration(spec.get("idleTimeOutDuration"))
        if idle_limit is None or status.get("phase") != "Ready":
            continue
        reachable = not _unreachable(world, gpr)
        idle_since = timestamp(status.get("idleSince"))
        action = idle_action(
            reachable, reachable and _reservation_in_use(world, gpr), idle_since, world.now, idle_limit
        )
        if action is IdleAction.PAUSE and idle_since is not None:
            await _patch(memo, gpr, {"idleSince": None})  # why: the ColonyReachable condition
        elif action is IdleAction.CLEAR:
            await _patch(memo, gpr, {"idleSince": None})
        elif action is IdleAction.START:
            await _patch(memo, gpr, {"idleSince": format_time(datetime.fromtimestamp(world.now, UTC))})
        elif action is IdleAction.RELEASE:
            await release(
                memo,
                world,
                gpr,
                "Released",
                f"no pod used the GPUs for idleTimeOutDuration {spec['idleTimeOutDuration']}",
            )
            released = True
    return released


async def _reconcile_colonies(memo: kopf.Memo, world: World) -> None:
    """What keeps GPUs accounted for across faults, once per pass: each running request says
    whether its colony answers, the reservation labels of every colony read are reconciled with the
    requests that exist, and ephemeral colonies whose request is gone are deleted."""
    await _concurrently(
        _write_reachability(memo, world, gpr)
        for gpr in world.gprs
        if (gpr.get("status") or {}).get("phase") in RUNNING_PHASES
        and not gpr["metadata"].get("deletionTimestamp")
    )
    if world.clusters:
        known = reservations(world.gprs)
        for colony in sorted({key for key, _ in world.clusters}):
            await _reconcile_labels(memo, world, colony, known)
    await _sweep_orphans(memo, world)


async def _write_reachability(memo: kopf.Memo, world: World, gpr: Mapping[str, Any]) -> None:
    """The ColonyReachable condition (and message) of a running request, when it changed."""
    if (
        gpr["metadata"].get("deletionTimestamp")
        or (gpr.get("status") or {}).get("phase") not in RUNNING_PHASES
    ):
        return
    missing = _unreachable(world, gpr)
    colony = str((gpr.get("status") or {}).get("colony"))
    if reachability_condition((gpr.get("status") or {}).get("conditions") or [], colony, missing) is None:
        return  # nothing to say (the common case: no write, no request)

    def update(current: Mapping[str, Any]) -> Mapping[str, Any] | None:
        status = current.get("status") or {}
        if status.get("phase") not in RUNNING_PHASES or status.get("colony") != colony:
            return None
        conditions = status.get("conditions") or []
        wanted = reachability_condition(conditions, colony, missing)
        if wanted is None:
            return None
        state, reason, message = wanted
        written = set_condition(
            conditions,
            type_=COLONY_REACHABLE,
            status=state,
            reason=reason,
            message=message,
            observed_generation=current["metadata"].get("generation"),
        )
        update = {"conditions": written, "message": message}
        if state == "True":
            update["message"] = _ready_message(status) if status.get("phase") == "Ready" else "admitted"
        return update

    patched, _ = await _write_on_version(memo, gpr, update)
    if patched is not None:
        reason = "ColonyUnreachable" if missing else "ColonyReachable"
        await _event(
            memo, gpr, reason, str(patched.get("status", {}).get("message") or reason), warning=bool(missing)
        )


async def _reconcile_labels(memo: kopf.Memo, world: World, colony: str, known: Reservations) -> None:
    """Make the reservation labels on the nodes of `colony`'s clusters read this pass agree with the
    requests that exist (fault_rules.label_fixes), then clear the colony's ledger entries that are
    settled. A label written back for a request is taken off again if the request turns out to be
    deleted meanwhile (its delete handler may have run between this pass's reads)."""
    views = {cluster: view for (key, cluster), view in world.clusters.items() if key == colony}
    meta = (world.all_colonies.get(colony) or {}).get("metadata") or {}
    ledger = stale_ledger(meta)
    fixes = label_fixes(colony, {c: v.nodes for c, v in views.items()}, known, ledger)
    failed = False
    for fix in fixes:
        try:
            await views[fix.cluster].kube.patch_labels("v1", "Node", fix.node, None, fix.labels)
        except NotFound:
            continue
        except UNREACHABLE as error:
            log.warning(
                "reconciling labels of %s/%s in colony %s failed: %s", fix.cluster, fix.node, colony, error
            )
            failed = True
            continue
        log.info(
            "reservation labels of %s/%s in colony %s reconciled: %s",
            fix.cluster,
            fix.node,
            colony,
            fix.labels,
        )
    await _recheck_rewritten(
        memo, world, {k for fix in fixes for k, v in fix.labels.items() if v is not None}
    )
    settled = settled_ledger(ledger, views) if not failed else []
    if settled and meta.get("name"):
        cleared = {ledger_entry(label, [])[0]: None for label in settled}
        with contextlib.suppress(NotFound):
            await memo.kube.patch(
                COLONY.api_version,
                COLONY.kind,
                meta["name"],
                meta["namespace"],
                {"metadata": {"annotations": cleared}},
            )


async def _recheck_rewritten(memo: kopf.Memo, world: World, labels: set[str]) -> None:
    """Read again each request whose label was just written back; one deleted (or no longer Ready)
    meanwhile gets it taken off again."""
    if not labels:
        return
    for gpr in world.gprs:
        if reservation_label(_key(gpr)) not in labels:
            continue
        meta = gpr["metadata"]
        fresh = await memo.kube.get(GPR.api_version, GPR.kind, meta["name"], meta["namespace"])
        if not transition_applies(gpr, fresh, ("Ready",), same_allocation=True):
            await _unlabel(memo, world, gpr)


async def _sweep_orphans(memo: kopf.Memo, world: World) -> None:
    """Delete the ephemeral colonies whose owning request is gone (fault_rules.orphaned_colonies):
    e.g. the request was deleted while the operator was down after creating its colony."""
    for key in orphaned_colonies(world.all_colonies, world.gprs):
        namespace, name = key.split("/", 1)
        if await memo.kube.delete(COLONY.api_version, COLONY.kind, name, namespace):
            message = f"ephemeral colony {name} deleted: the request it was provisioned for is gone"
            log.info("%s (%s)", message, key)
            await events.post_now(
                memo.kube,
                COLONY.api_version,
                COLONY.kind,
                world.all_colonies[key]["metadata"],
                "OrphanDeleted",
                message,
            )


async def _provisioning_failed(memo: kopf.Memo, world: World, gpr: dict[str, Any]) -> bool:
    """A GPR whose provisioned colony failed or vanished: requeue it (requeueOnFailure, with the
    failed colony deleted) or fail it. True when the GPR was handled here."""
    status = gpr.get("status") or {}
    provisioned = status.get("provisionedColony")
    if not provisioned:
        return False
    colony = world.all_colonies.get(f"{gpr['metadata']['namespace']}/{provisioned}")
    phase = ((colony or {}).get("status") or {}).get("phase")
    if colony is not None and phase not in ("Failed", "Degraded"):
        return False
    why = f"colony {provisioned} " + ("disappeared" if colony is None else f"is {phase}")
    if colony is not None:
        await memo.kube.delete(COLONY.api_version, COLONY.kind, provisioned, gpr["metadata"]["namespace"])
    requeue = gpr["spec"].get("requeueOnFailure", True)
    retries = int(status.get("retryCount") or 0) + 1
    update = (
        {"phase": "Queued", "provisionedColony": None, "retryCount": retries, "message": f"{why}; requeued"}
        if requeue
        else {"phase": "Failed", "message": why}
    )
    written, _ = await _write_on_version(
        memo, gpr, _moving(gpr, update, PENDING_PHASES, provisioned=(provisioned,))
    )
    if written is not None:
        told = f"{why}; requeued (retry {retries})" if requeue else why
        await _event(memo, gpr, "ProvisioningFailed", told, warning=True)
    return True


async def release_on_delete(memo: kopf.Memo, gpr: Mapping[str, Any], wake: bool = True) -> None:
    """A GPR is being deleted: free its nodes and tear down its ephemeral colony if unused. Only
    the teardown needs every request and colony read (who else uses that colony); freeing nodes
    needs only the clients of the request's own colony (a full read per deletion would make
    deleting n requests cost n full reads)."""
    status = gpr.get("status") or {}
    world = await _read(memo) if status.get("provisionedColony") else await _read_own_colony(memo, status)
    await _unlabel(memo, world, gpr)
    await _teardown_if_unused(memo, world, gpr)
    if wake:
        wake_scheduler(memo)


async def _read_own_colony(memo: kopf.Memo, status: Mapping[str, Any]) -> World:
    """A World holding only the clients of the Ready clusters of the Ready colony a request holds
    GPUs on (the clusters `_read` would give it; their nodes and pods are not read)."""
    world = World(time.time(), [], [], {}, {})
    key = str(status.get("colony") or "")
    if "/" not in key or not status.get("nodes"):
        return world
    namespace, name = key.split("/", 1)
    informer = _informer(memo, "colony")
    colony = (
        informer.get(key)
        if informer is not None
        else await memo.kube.get(COLONY.api_version, COLONY.kind, name, namespace)
    )
    if (
        colony is None
        or (colony.get("status") or {}).get("phase") != "Ready"
        or colony["metadata"].get("deletionTimestamp")
    ):
        return world
    for cluster in (colony.get("status") or {}).get("clusters") or []:
        if cluster.get("phase") != "Ready":
            continue
        try:
            client = await cluster_client(memo, namespace, name, cluster["name"], colony)
        except UNREACHABLE as error:
            log.warning("colony %s cluster %s unreachable: %s", key, cluster["name"], error)
            continue
        world.clusters[(key, cluster["name"])] = ClusterView(key, cluster["name"], client, [], [])
    return world


async def _finish_admissions(memo: kopf.Memo, world: World, by_key: Mapping[str, dict[str, Any]]) -> None:
    """Admitted (status written) but not yet Ready (labels maybe missing): label, then Ready;
    except the admissions of earlier passes still being finished in the background."""
    reserving = _reservations_in_flight(memo)
    for key, gpr in by_key.items():
        if (gpr.get("status") or {}).get("phase") == "Admitted" and key not in reserving:
            await _reserve(memo, world, gpr)


def _reservations_in_flight(memo: kopf.Memo) -> dict[str, asyncio.Task[None]]:
    """Admissions whose labels and Ready are being written, by request key."""
    tasks: dict[str, asyncio.Task[None]] | None = getattr(memo, "reservations_in_flight", None)
    if tasks is None:
        tasks = memo.reservations_in_flight = {}
    return tasks


def _reserve_in_background(
    memo: kopf.Memo, world: World, admitted: dict[str, Any], *announce: Awaitable[Any]
) -> None:
    """Finish an admission (`_reserve`) without holding up the pass: its status already says
    Admitted with its nodes, so the next pass counts its GPUs as taken, and a crash before it ends
    leaves it for `_finish_admissions` to redo."""
    key = _key(admitted)
    tasks = _reservations_in_flight(memo)

    async def finish() -> None:
        try:
            await _reserve(memo, world, admitted, *announce)
        except (KubeApiError, OSError, TimeoutError) as error:  # the next pass finishes it
            log.warning("reserving nodes for %s failed: %s", key, error)
        finally:
            if tasks.get(key) is asyncio.current_task():
                del tasks[key]

    tasks[key] = asyncio.create_task(finish())


async def _reservation_finished(memo: kopf.Memo, gpr: Mapping[str, Any]) -> None:
    """Wait for the request's admission being finished in the background, if any: taking its GPUs
    back before its labels and Ready are written would leave them on."""
    task = _reservations_in_flight(memo).get(_key(gpr))
    if task is not None:
        await asyncio.wait([task])


async def _reserve(
    memo: kopf.Memo, world: World, admitted: dict[str, Any], *announce: Awaitable[Any]
) -> None:
    """Label the nodes of an Admitted request (while `announce` is posted), then mark it Ready once
    every label is written and read back (else it stays Admitted, saying which nodes wait). A
    request deleted meanwhile may have had its labels taken off by its delete handler before they
    were put on: they are taken off again, else they would hold the GPUs forever. No label is put on
    before the request holds the operator's finalizer, so a request deleted while the operator is
    down still has its labels taken off (`_sync_finalizers`)."""
    holding: list[dict[str, Any]] = []

    async def hold_then_label() -> list[str]:
        held = await _set_finalizer(memo, admitted, hold=True)
        if held is None or not transition_applies(admitted, held, ("Admitted",), same_allocation=True):
            return []  # gone, being deleted or moved on: the next pass decides on what it is now
        holding.append(held)
        return await _label_nodes(world, held, add=True)

    not_labelled, *_ = await asyncio.gather(hold_then_label(), *announce)
    if not holding:
        return
    admitted = holding[0]
    status = admitted.get("status") or {}
    ready = _ready_message(status)
    if not status.get("nodes"):
        not_labelled = ["(no nodes recorded)"]
    if not_labelled:  # Ready only once every label is on: the next pass tries again
        waiting = f"admitted; waiting to label node(s) {', '.join(not_labelled)}"
        if status.get("message") != waiting:
            await _patch(memo, admitted, {"message": waiting})
        return
    patched, seen = await _write_on_version(
        memo,
        admitted,
        _moving(admitted, {"phase": "Ready", "message": ready}, ("Admitted",), same_allocation=True),
    )
    if patched is not None and not patched["metadata"].get("deletionTimestamp"):
        await _event(memo, admitted, "GPRReady", ready)
        return
    if not transition_applies(admitted, seen, RUNNING_PHASES, same_allocation=True):
        await _unlabel(memo, world, admitted)  # deleted or moved on meanwhile: the labels hold nothing


def _ready_message(status: Mapping[str, Any]) -> str:
    nodes = status.get("nodes") or []
    return (
        f"{status.get('gpusAllocated')} {status.get('gpuType')} GPU(s) reserved on {len(nodes)} node(s) of "
        f"colony {status.get('colony')}; workloads select them by the node label "
        f"{status.get('reservationLabel')}"
    )


async def _apply(
    memo: kopf.Memo, world: World, by_key: Mapping[str, dict[str, Any]], decisions: Decisions
) -> None:
    """Preemptions, then admissions, then provisions; the requests of each step concurrently (each
    request's own writes stay in order)."""
    await _concurrently(
        _preempt(memo, world, by_key[v.victim], v) for v in decisions.preemptions if v.victim in by_key
    )
    await _concurrently(_admit(memo, world, by_key[a.key], a) for a in decisions.admitted if a.key in by_key)
    await _concurrently(_provision(memo, by_key[p.key], p) for p in decisions.provisions if p.key in by_key)


async def _admit(memo: kopf.Memo, world: World, gpr: dict[str, Any], admit: Admit) -> None:
    placement = admit.placement
    colony = world.colonies.get(placement.colony) or {}
    label = reservation_label(_key(gpr))
    status = {
        "phase": "Admitted",
        "colony": placement.colony,
        "gpuType": placement.gpu_type,
        "gpusAllocated": sum(n.gpus for n in placement.nodes),
        "nodes": [
            {"cluster": n.node.split("/", 1)[0], "node": n.node.split("/", 1)[1], "gpus": n.gpus}
            for n in placement.nodes
        ],
        "borrowed": admit.borrowed,
        "queue": _public_queue(_gpr_queue(world, gpr)),
        "admittedAt": format_time(datetime.fromtimestamp(world.now, UTC)),
        "pricePerGpuHour": price_per_gpu_hour(colony.get("status") or {}),
        "reservationLabel": label,
        "positionInQueue": None,
        "estimatedWaitSeconds": None,
        "estimatedStartTime": None,
        "releasedAt": None,
        "idleSince": None,
        "gpuHours": 0.0,
        "cost": 0.0 if price_per_gpu_hour(colony.get("status") or {}) is not None else None,
        "message": "admitted"
        + (" (backfilled)" if admit.backfilled else "")
        + (" on borrowed quota" if admit.borrowed else ""),
    }
    admitted, _ = await _write_on_version(memo, gpr, _moving(gpr, status, PENDING_PHASES, same_spec=True))
    if admitted is None:
        return  # changed meanwhile (spec, phase, deletion): the next pass decides on what it is now
    waited = max(0, int(world.now - (timestamp(gpr["metadata"].get("creationTimestamp")) or world.now)))
    announce = _event(
        memo,
        gpr,
        "GPRAdmitted",
        f"{status['message']} from queue {_gpr_queue(world, gpr)} after "
        f"{waited}s: {status['gpusAllocated']} {placement.gpu_type} GPU(s) on colony {placement.colony}",
    )
    _reserve_in_background(memo, world, admitted, announce)


async def _preempt(memo: kopf.Memo, world: World, victim: dict[str, Any], decision: Preempt) -> None:
    """Take the victim's labels off, then requeue it (written only onto a version that still holds
    the same GPUs)."""
    await _reservation_finished(memo, victim)
    await _unlabel(memo, world, victim)
    status = victim.get("status") or {}
    message = f"evicted for {decision.for_key}: {decision.reason}; requeued"
    evicted = {
        "phase": "Queued",
        "message": message,
        "evictedBy": decision.for_key,
        "retryCount": int(status.get("retryCount") or 0) + 1,
        "nodes": [],
        "colony": None,
        "gpusAllocated": None,
        "releasedAt": format_time(datetime.fromtimestamp(world.now, UTC)),
        **_usage(victim, world.now),
    }
    patched, _ = await _write_on_version(
        memo, victim, _moving(victim, evicted, RUNNING_PHASES, same_allocation=True)
    )
    if patched is not None:
        await _event(memo, victim, "GPREvicted", message, warning=True)


async def _provision(memo: kopf.Memo, gpr: dict[str, Any], decision: Provision) -> None:
    """Create the ephemeral colony of `decision`: its name (from the request's uid) is recorded in
    the request first, so a crash after the creation leaves a colony the request names (and the
    sweeper finds by its for-gpr label), never an orphan nothing knows of."""
    meta = gpr["metadata"]
    name = ephemeral_colony_name(str(meta["uid"]))
    try:
        manifest = colony_for_offer(
            decision.offer,
            name=name,
            namespace=meta["namespace"],
            k8s_version=pinned("KUBERNETES_VERSION"),
            labels={FOR_GPR_LABEL: str(meta["uid"])},
            annotations={FOR_GPR_NAME_ANNOTATION: str(meta["name"])},
        )
    except ProviderNotSupported as error:
        await _patch(memo, gpr, {"phase": "Queued", "message": str(error)})
        return
    intent = {"provisionedColony": name, "message": f"creating colony {name}"}
    recorded, _ = await _write_on_version(
        memo, gpr, _moving(gpr, intent, PENDING_PHASES, same_spec=True, provisioned=(None,))
    )
    if recorded is None:
        return  # changed meanwhile: the next pass decides on what it is now
    try:
        await memo.kube.apply(manifest)
    except (KubeApiError, OSError, TimeoutError, aiohttp.ClientError) as error:
        failed = {"provisionedColony": None, "message": f"creating colony {name} failed: {error}"}
        await _write_on_version(
            memo, recorded, _moving(recorded, failed, PENDING_PHASES, provisioned=(name,))
        )
        return
    offer = decision.offer
    message = (
        f"provisioning colony {name}: {offer.offer.cloud} {offer.offer.region} {offer.offer.instance_type} "
        f"x{offer.nodes} at ${offer.price_per_hour:.2f}/h"
    )
    provisioning = {"phase": "Provisioning", "message": message}
    written, _ = await _write_on_version(
        memo, recorded, _moving(recorded, provisioning, PENDING_PHASES, provisioned=(name,))
    )
    if written is not None:
        await _event(memo, gpr, "ColonyProvisioning", message)


def _write_queue_status(
    memo: kopf.Memo,
    world: World,
    queues: Sequence[QueueQuota],
    running: Sequence[RunningRequest],
    pending: Sequence[GpuRequest],
    decisions: Decisions,
) -> None:
    """Each queue's counts and usage, and the positions, wait estimates and messages of waiting
    requests (in the background: they never hold up the next pass)."""
    _start_unless_running(memo, "estimate_writes", lambda: _write_estimates(memo, world, decisions))
    _start_unless_running(
        memo, "queue_usage_writes", lambda: _write_queue_usages(memo, world, queues, running, pending)
    )


async def _write_queue_usages(
    memo: kopf.Memo,
    world: World,
    queues: Sequence[QueueQuota],
    running: Sequence[RunningRequest],
    pending: Sequence[GpuRequest],
) -> None:
    """Every GPUQueue's counts and usage (see _write_queue_usage)."""
    try:
        await _concurrently(
            _write_queue_usage(memo, world, queue, running, pending)
            for queue in queues
            if not queue.name.startswith(NAMESPACE_QUEUE_PREFIX)
        )
    except (KubeApiError, OSError, TimeoutError) as error:  # the next pass writes them again
        log.warning("writing queue usage failed: %s", error)


def _start_unless_running(
    memo: kopf.Memo, name: str, writes: Callable[[], Coroutine[Any, Any, None]]
) -> None:
    """Start this pass's `writes` as the task memo.<name> unless the previous pass's are still
    running (then the next pass computes them afresh)."""
    task: asyncio.Task[None] | None = getattr(memo, name, None)
    if task is None or task.done():
        setattr(memo, name, asyncio.create_task(writes()))


async def _write_estimates(memo: kopf.Memo, world: World, decisions: Decisions) -> None:
    """The estimate updates that changed enough, at most ESTIMATE_WRITES_PER_PASS of them, in the
    order of queue positions (the heads of every queue first). Each applies only to the version
    of the request the pass read: one admitted or changed since keeps its newer status."""
    by_key = {_key(g): g for g in world.gprs}
    updates = []
    for key, estimate in sorted(decisions.estimates.items(), key=lambda item: (item[1].position, item[0])):
        gpr = by_key.get(key)
        update = estimate_update(world, gpr, estimate) if gpr is not None else {}
        if gpr is not None and update:
            updates.append(_patch(memo, gpr, update, only_if_unchanged=True))
        if len(updates) == ESTIMATE_WRITES_PER_PASS:
            break
    try:
        await _concurrently(updates, ESTIMATE_WRITE_CONCURRENCY)
    except (KubeApiError, OSError, TimeoutError) as error:  # the next pass writes them again
        log.warning("writing wait estimates failed: %s", error)


def position_moved(previous: int | None, position: int) -> bool:
    """Whether a queue position changed enough to be rewritten (see EXACT_POSITIONS)."""
    if previous == position:
        return False
    if previous is None or min(previous, position) <= EXACT_POSITIONS:
        return True
    return abs(position - previous) > ESTIMATE_TOLERANCE * previous


def estimate_update(world: World, gpr: Mapping[str, Any], estimate: Estimate) -> dict[str, Any]:
    """The status fields of a waiting request to rewrite for `estimate` (empty: none moved enough)."""
    status = gpr.get("status") or {}
    wait = None if estimate.start_s is None else max(0, int(estimate.start_s - world.now))
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
        update["phase"] = "Queued"  # a new request (written only onto the version read, see above)
    if status.get("phase") in (None, "Queued") and status.get("message") != estimate.reason:
        update["message"] = estimate.reason
    queue_name = _public_queue(_gpr_queue(world, gpr))
    if status.get("queue") != queue_name:
        update["queue"] = queue_name
    return update


async def _write_queue_usage(
    memo: kopf.Memo,
    world: World,
    queue: QueueQuota,
    running: Sequence[RunningRequest],
    pending: Sequence[GpuRequest],
) -> None:
    """A GPUQueue's pending and admitted counts and GPUs in use per type, when they changed."""
    used: dict[str, int] = {}
    for request in running:
        if request.request.queue == queue.name:
            used[request.placement.gpu_type] = used.get(request.placement.gpu_type, 0) + request.request.gpus
    status = {
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
    }
    current = next((q for q in world.queues if q["metadata"]["name"] == queue.name), {})
    if {k: (current.get("status") or {}).get(k) for k in status} != status:
        with contextlib.suppress(NotFound):
            await memo.kube.patch_status(GPUQUEUE.api_version, GPUQUEUE.kind, queue.name, None, status)
