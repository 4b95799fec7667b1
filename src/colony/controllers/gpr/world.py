"""The read of a scheduling pass: the World (GPRs, GPUQueues, Colonies, ColonyShares, and the
nodes and pods of each colony cluster in play), from the informers or listed, and what a pass asks
of it (a request's queue and candidate colonies, which of its clusters did not answer)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import aiohttp

from colony.api import COLONY, GPR, GPUQUEUE
from colony.controllers.cluster_access import cluster_client
from colony.controllers.colony_shares import read_visibility
from colony.controllers.gpr.state import wake_scheduler
from colony.kube.colony_clusters import ClusterAccessError
from colony.kube.informer import Informer
from colony.kube.resources import Kube, KubeApiError
from colony.scheduling.fault_rules import has_ledger, unreachable_clusters
from colony.scheduling.queueing.objects import (
    PENDING_PHASES,
    RUNNING_PHASES,
    pod_uses_reservation,
    queues_by_namespace,
    request_key,
    reservation_label,
)
from colony.scheduling.queueing.rules import candidate_colonies as candidates_of
from colony.scheduling.queueing.rules import request_queue
from colony.scheduling.visibility import NOBODY_ELSE, Visibility

if TYPE_CHECKING:
    from colony.controllers.context import OperatorContext

CLUSTER_READ_TIMEOUT_S = 5.0
UNFINISHED_PODS = "status.phase!=Succeeded,status.phase!=Failed"
UNREACHABLE = (ClusterAccessError, KubeApiError, OSError, TimeoutError, aiohttp.ClientError)
"""Errors of a colony cluster that is down, hung, refusing us, or gone: that colony is skipped for
the pass (or the write recorded for later), never the whole pass."""
INFORMED = {"gpr": GPR, "queue": GPUQUEUE, "colony": COLONY}
"""The kinds a pass reads, by informer name (SchedulerState.informers; the task watching for one
is the context's task `informer_task(name)`)."""

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


def informer_task(name: str) -> str:
    """The name of the context's task that keeps the informer `name` (see INFORMED)."""
    return f"gpr-{name}-informer"


def start_informers(context: OperatorContext) -> None:
    """Keep the GPRs, GPUQueues and Colonies in memory (colony.kube.informer) instead of listing
    them all on every pass. They are watched cluster-wide even by an operator limited to some
    namespaces: a pass needs every request and colony (cluster-wide queues, shared colonies), which
    such an operator listed cluster-wide before (its chart grants list and watch on them). A new or
    deleted request wakes the scheduler at once (kopf's handlers may lag behind the watch under
    load)."""
    for name, kind in INFORMED.items():
        wake = _wake_on_gpr_event(context) if name == "gpr" else None
        watcher = Informer(context.kube.api, kind.group, kind.version, kind.plural, kind.kind, wake)
        context.scheduler.informers[name] = watcher
        context.start(informer_task(name), watcher.run())


def _wake_on_gpr_event(context: OperatorContext) -> Callable[[str, Mapping[str, Any]], None]:
    """The GPR informer's callback: a deleted request is kept for `release.release_deleted`; an
    added or deleted request (or one being deleted) wakes the loop."""

    def wake(event_type: str, obj: Mapping[str, Any]) -> None:
        if event_type == "DELETED":
            context.scheduler.deleted.append(dict(obj))
        if event_type != "MODIFIED" or (obj.get("metadata") or {}).get("deletionTimestamp"):
            wake_scheduler(context)

    return wake


def informer(context: OperatorContext, name: str = "gpr") -> Informer | None:
    """An informer (see INFORMED) once its first list is in."""
    found = context.scheduler.informers.get(name)
    return found if found is not None and found.synced.is_set() else None


async def _list(context: OperatorContext, name: str) -> list[dict[str, Any]]:
    """Every object of an informed kind: from its informer, else listed."""
    watcher = informer(context, name)
    if watcher is not None:
        return watcher.objects()
    kind = INFORMED[name]
    objects: list[dict[str, Any]] = await context.kube.list(kind.api_version, kind.kind)
    return objects


async def read(context: OperatorContext) -> World:
    """GPRs, GPUQueues and Colonies (from the informers, else listed at once), then the colony
    clusters in play."""
    all_gprs, queues, all_colonies, shares = await asyncio.gather(
        _list(context, "gpr"),
        _list(context, "queue"),
        _list(context, "colony"),
        read_visibility(context.kube),
    )
    gprs = [g for g in all_gprs if context.watches(g["metadata"]["namespace"])]
    colonies = {request_key(c): c for c in all_colonies if context.watches(c["metadata"]["namespace"])}
    ready = {
        k: c
        for k, c in colonies.items()
        if (c.get("status") or {}).get("phase") == "Ready" and not c["metadata"].get("deletionTimestamp")
    }
    world = World(time.time(), gprs, queues, ready, colonies, shares)
    await read_colonies(context, world, sorted(_colonies_in_play(world)))
    return world


def _colonies_in_play(world: World) -> set[str]:
    """Ready colonies that some open request may use or holds GPUs on, and those whose ledger
    records labels to take off (fault_rules.has_ledger): only those are read."""
    wanted = {key for key, colony in world.colonies.items() if has_ledger(colony["metadata"])}
    for gpr in world.gprs:
        status = gpr.get("status") or {}
        if status.get("phase") in RUNNING_PHASES and status.get("colony"):
            wanted.add(str(status["colony"]))
        elif status.get("phase") in PENDING_PHASES and not gpr["metadata"].get("deletionTimestamp"):
            wanted |= candidate_colonies(world, gpr)
    return wanted & set(world.colonies)


NodesAndPods = tuple[list[dict[str, Any]], list[dict[str, Any]]]


async def read_colonies(context: OperatorContext, world: World, keys: list[str]) -> None:
    """Nodes and unfinished pods of the Ready clusters of these colonies, all read concurrently
    under one deadline (CLUSTER_READ_TIMEOUT_S for the whole pass, not per colony): a colony whose
    clusters miss it is left out of this pass (its requests keep their GPUs, see fault_rules) while
    the others are scheduled. A cluster registered in several colonies (same API server) is read
    once. Views are added in the colonies' sorted order, so a pass's decisions do not depend on
    which server answered first."""
    deadline = asyncio.get_running_loop().time() + CLUSTER_READ_TIMEOUT_S
    reads: dict[str, asyncio.Future[NodesAndPods]] = {}
    try:
        views = await asyncio.gather(*(_read_colony(context, world, key, reads, deadline) for key in keys))
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
    context: OperatorContext,
    world: World,
    key: str,
    reads: dict[str, asyncio.Future[NodesAndPods]],
    deadline: float,
) -> list[ClusterView]:
    """Views of the Ready clusters of one colony that answered before the pass's deadline."""
    namespace, name = key.split("/", 1)
    loop = asyncio.get_running_loop()
    views: list[ClusterView] = []
    for cluster in (world.colonies[key].get("status") or {}).get("clusters") or []:
        if cluster.get("phase") != "Ready":
            continue
        try:
            client = await cluster_client(context, namespace, name, cluster["name"], world.colonies[key])
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


async def read_own_colony(context: OperatorContext, status: Mapping[str, Any]) -> World:
    """A World holding only the clients of the Ready clusters of the Ready colony a request holds
    GPUs on (the clusters `read` would give it; their nodes and pods are not read)."""
    world = World(time.time(), [], [], {}, {})
    key = str(status.get("colony") or "")
    if "/" not in key or not status.get("nodes"):
        return world
    namespace, name = key.split("/", 1)
    watcher = informer(context, "colony")
    colony = (
        watcher.get(key)
        if watcher is not None
        else await context.kube.get(COLONY.api_version, COLONY.kind, name, namespace)
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
            client = await cluster_client(context, namespace, name, cluster["name"], colony)
        except UNREACHABLE as error:
            log.warning("colony %s cluster %s unreachable: %s", key, cluster["name"], error)
            continue
        world.clusters[(key, cluster["name"])] = ClusterView(key, cluster["name"], client, [], [])
    return world


def gpr_queue(world: World, gpr: Mapping[str, Any], require_queue: bool) -> str:
    """The queue a GPR is charged to (see scheduling.queueing.rules.request_queue); `require_queue`:
    the operator's OperatorSettings.require_queue (COLONY_REQUIRE_QUEUE)."""
    return request_queue(gpr, world.queues, world.namespace_queues, require_queue)


def candidate_colonies(world: World, gpr: Mapping[str, Any]) -> frozenset[str]:
    """The Ready colonies a GPR may use (see scheduling.queueing.rules.candidate_colonies), kept in
    the World for the rest of the pass."""
    return candidates_of(gpr, world.colonies, world.visibility, world.candidates)


def unreachable(world: World, gpr: Mapping[str, Any]) -> list[str]:
    """The clusters of a running request's colony that this pass could not read."""
    return unreachable_clusters(gpr, world.clusters, world.all_colonies)


def reservation_in_use(world: World, gpr: Mapping[str, Any]) -> bool:
    """Whether a pod read this pass (Pending or Running, on the request's colony) uses the
    request's reservation."""
    label = reservation_label(request_key(gpr))
    colony = (gpr.get("status") or {}).get("colony")
    return any(
        pod_uses_reservation(pod) == label
        and (pod.get("status") or {}).get("phase") in ("Pending", "Running")
        for (key, _), view in world.clusters.items()
        if key == colony
        for pod in view.pods
    )
