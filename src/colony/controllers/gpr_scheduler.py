"""The GPR scheduling loop: observe → snapshot → `schedule()` → apply, once a second or on a change.

One pass:
1. reads GPRs and Colonies of the watched namespaces, GPUQueues, and each Ready colony cluster's
   Nodes and Pods;
2. releases what is due: exitDuration elapsed (Expired), reserved GPUs idle for
   idleTimeOutDuration (Released); finishes interrupted admissions (Admitted → labels → Ready);
3. runs the pure scheduler core on the snapshot (in a thread: it is CPU work);
4. applies its decisions: admit (status first, then node reservation labels, then Ready), preempt
   (labels removed, victim requeued with evictedBy), provision (an ephemeral Colony for the
   cheapest offer), and writes queue positions and wait estimates that changed.

Everything is written to the API server before the next pass reads it again, so a crash anywhere
is finished or redone by the next pass; status is the source of truth for allocations.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, cast

import kopf

from colony import metrics
from colony.api import COLONY, GPR, GPUQUEUE
from colony.api.gpr import GPRSpec
from colony.controllers.cluster_access import cluster_client
from colony.kube.colony_clusters import ClusterAccessError
from colony.kube.resources import Conflict, Kube, KubeApiError, NotFound
from colony.render.offer_colony import SUPPORTED_CLOUDS, ProviderNotSupported, colony_for_offer
from colony.scheduling.queueing.core import schedule
from colony.scheduling.queueing.model import (
    Admit,
    ColonyInfo,
    Decisions,
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
    parse_duration,
    pod_uses_reservation,
    queue_quota,
    queues_by_namespace,
    request_key,
    reservation_label,
    running_request,
    timestamp,
)
from colony.status.cost import format_time, job_usage, price_per_gpu_hour
from colony.versions import pinned

PASS_INTERVAL_S = float(os.environ.get("COLONY_SCHEDULE_INTERVAL_SECONDS", "1"))
SHARED_COLONY_LABEL = "colony.exalsius.ai/shared"
FOR_GPR_LABEL = "colony.exalsius.ai/for-gpr"
REQUIRE_QUEUE = os.environ.get("COLONY_REQUIRE_QUEUE", "false").lower() == "true"
CLUSTER_READ_TIMEOUT_S = 5.0
USAGE_REFRESH_S = 60.0
UNFINISHED_PODS = "status.phase!=Succeeded,status.phase!=Failed"
ESTIMATE_TOLERANCE = 0.1
"""A wait estimate is rewritten when it moved by more than this fraction (or 5 s)."""

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
    clusters: dict[tuple[str, str], ClusterView] = field(default_factory=dict)
    reads: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = field(default_factory=dict)
    """Nodes and pods by API server URL (one read per physical cluster per pass)."""
    namespace_queues: dict[str, str] = field(default_factory=dict)
    """namespace -> the GPUQueue listing it (computed once per pass from `queues`)."""

    def __post_init__(self) -> None:
        self.namespace_queues = queues_by_namespace(self.queues)


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
    task: asyncio.Task[None] | None = getattr(memo, "scheduler_task", None)
    if task is not None:
        task.cancel()


def wake_scheduler(memo: kopf.Memo) -> None:
    """Ask for a pass now (a GPR, queue or colony changed)."""
    event: asyncio.Event | None = getattr(memo, "scheduler_wakeup", None)
    if event is not None:
        event.set()


@kopf.on.event(GPUQUEUE.group, GPUQUEUE.version, GPUQUEUE.plural)
async def queue_changed(memo: kopf.Memo, **_: Any) -> None:
    """A GPUQueue changed: quotas may admit or require preemption now."""
    wake_scheduler(memo)


async def _loop(memo: kopf.Memo) -> None:
    while getattr(memo, "kube", None) is None:
        await asyncio.sleep(0.1)
    while True:
        started = time.monotonic()
        try:
            await run_pass(memo)
        except asyncio.CancelledError:
            raise
        except Exception:  # one bad pass must not stop scheduling; the next one retries
            log.exception("scheduling pass failed")
        await asyncio.sleep(0.2)  # our own status writes wake us too: let them settle
        memo.scheduler_wakeup.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(memo.scheduler_wakeup.wait(), PASS_INTERVAL_S)
        log.debug("scheduling pass took %.3fs", time.monotonic() - started)


async def _read(memo: kopf.Memo) -> World:
    kube: Kube = memo.kube
    gprs = [
        g for g in await kube.list(GPR.api_version, GPR.kind) if _watched(memo, g["metadata"]["namespace"])
    ]
    queues = await kube.list(GPUQUEUE.api_version, GPUQUEUE.kind)
    colonies = {
        _key(c): c
        for c in await kube.list(COLONY.api_version, COLONY.kind)
        if _watched(memo, c["metadata"]["namespace"])
    }
    ready = {
        k: c
        for k, c in colonies.items()
        if (c.get("status") or {}).get("phase") == "Ready" and not c["metadata"].get("deletionTimestamp")
    }
    world = World(time.time(), gprs, queues, ready, colonies)
    for key in sorted(_colonies_in_play(world)):
        await _read_colony(memo, world, key)
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


async def _read_colony(memo: kopf.Memo, world: World, key: str) -> None:
    """Nodes and unfinished pods of each Ready cluster of a colony; a cluster registered in several
    colonies (same API server) is read once per pass."""
    namespace, name = key.split("/", 1)
    cache: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = world.reads
    for cluster in (world.colonies[key].get("status") or {}).get("clusters") or []:
        if cluster.get("phase") != "Ready":
            continue
        try:
            client = await cluster_client(memo, namespace, name, cluster["name"])
            server = str(client.api.configuration.host)
            if server not in cache:
                nodes = await asyncio.wait_for(client.list("v1", "Node"), CLUSTER_READ_TIMEOUT_S)
                pods = await asyncio.wait_for(
                    client.list("v1", "Pod", field_selector=UNFINISHED_PODS), CLUSTER_READ_TIMEOUT_S
                )
                cache[server] = (nodes, pods)
        except (ClusterAccessError, KubeApiError, OSError, TimeoutError) as error:
            log.warning("colony %s cluster %s unreadable: %s", key, cluster["name"], error)
            continue
        nodes, pods = cache[server]
        world.clusters[(key, cluster["name"])] = ClusterView(key, cluster["name"], client, nodes, pods)


NAMESPACE_QUEUE_PREFIX = "namespace:"
UNLIMITED = 10**9


def _queue_name(world: World, namespace: str) -> str:
    """The GPUQueue charged for a namespace's requests. A namespace no GPUQueue lists gets a queue
    of its own without quota (positions and fair sharing are then per namespace), unless
    COLONY_REQUIRE_QUEUE=true, which makes its requests wait, naming the cause."""
    listed = world.namespace_queues.get(namespace)
    if listed is not None:
        return listed
    return (
        f"(no GPUQueue lists namespace {namespace})" if REQUIRE_QUEUE else NAMESPACE_QUEUE_PREFIX + namespace
    )


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
    """The GPR's own namespace's colonies and shared ones, matching its colonySelector; only its
    provisioned colony once it has one."""
    namespace = gpr["metadata"]["namespace"]
    provisioned = (gpr.get("status") or {}).get("provisionedColony")
    if provisioned:
        return frozenset({f"{namespace}/{provisioned}"})
    selector = ((gpr["spec"].get("colonySelector") or {}).get("matchLabels")) or {}
    chosen = set()
    for key, colony in world.colonies.items():
        labels = colony["metadata"].get("labels") or {}
        own = colony["metadata"]["namespace"] == namespace or labels.get(SHARED_COLONY_LABEL) == "true"
        if own and all(labels.get(k) == v for k, v in selector.items()):
            chosen.add(key)
    return frozenset(chosen)


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


async def run_pass(memo: kopf.Memo) -> Decisions | None:
    """One scheduling pass; returns the core's decisions (None when nothing was pending)."""
    world = await _read(memo)
    if await _release_due(memo, world):
        world = await _read(memo)  # the released GPUs are free for this very pass
    running: list[RunningRequest] = []
    pending: list[GpuRequest] = []
    by_key: dict[str, dict[str, Any]] = {}
    for gpr in world.gprs:
        if gpr["metadata"].get("deletionTimestamp") or not _valid(gpr):
            continue
        status = gpr.get("status") or {}
        queue = _queue_name(world, gpr["metadata"]["namespace"])
        by_key[_key(gpr)] = gpr
        if status.get("phase") in RUNNING_PHASES:
            if (current := running_request(gpr, queue)) is not None:
                running.append(current)
        elif status.get("phase") in PENDING_PHASES:
            if await _provisioning_failed(memo, world, gpr):
                continue
            request = gpu_request(gpr, queue, _candidate_colonies(world, gpr))
            if status.get("provisionedColony"):
                request = replace(request, auto_provision=False)  # its colony is on the way
            pending.append(request)
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
    if not pending:
        await _write_queue_status(memo, world, queues, running, pending, Decisions())
        return None
    # A reservation is "ours" only on the colony it was made through: the same physical cluster
    # registered as two colonies must not sell its GPUs twice.
    known: dict[str, set[str]] = {}
    for r in running:
        known.setdefault(r.placement.colony, set()).add(reservation_label(r.request.key))
    nodes: list[GpuNode] = []
    for view in world.clusters.values():
        nodes += gpu_nodes(view.colony, view.cluster, view.nodes, view.pods, known.get(view.colony, set()))
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
        placement_policy=cast(Any, os.environ.get("COLONY_PLACEMENT_POLICY", "cheapest")),
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
    await _apply(memo, world, by_key, decisions)
    await _write_queue_status(memo, world, snapshot.queues, running, pending, decisions)
    return decisions


def _order(colony: Mapping[str, Any]) -> str:
    value = (colony["metadata"].get("annotations") or {}).get("colony.exalsius.ai/placement-order", "0")
    return value if str(value).lstrip("-").isdigit() else "0"


async def _patch(memo: kopf.Memo, gpr: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    meta = gpr["metadata"]
    try:
        await memo.kube.patch_status(GPR.api_version, GPR.kind, meta["name"], meta["namespace"], status)
    except NotFound:
        return False
    return True


async def _event(
    memo: kopf.Memo, gpr: Mapping[str, Any], reason: str, message: str, warning: bool = False
) -> None:
    """A Kubernetes Event on the GPR (posted directly: this loop runs outside kopf's handlers)."""
    meta = gpr["metadata"]
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    try:
        await memo.kube.create(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
                "involvedObject": {
                    "apiVersion": GPR.api_version,
                    "kind": GPR.kind,
                    "name": meta["name"],
                    "namespace": meta["namespace"],
                    "uid": meta.get("uid"),
                },
                "reason": reason,
                "message": message[:1024],
                "type": "Warning" if warning else "Normal",
                "source": {"component": "colony-operator"},
                "firstTimestamp": now[:19] + "Z",
                "lastTimestamp": now[:19] + "Z",
                "count": 1,
            }
        )
    except KubeApiError as error:
        log.warning("could not post event %s on %s/%s: %s", reason, meta["namespace"], meta["name"], error)


async def _label_nodes(world: World, gpr: Mapping[str, Any], add: bool) -> None:
    """Put (or take off) the GPR's reservation label on its nodes."""
    status = gpr.get("status") or {}
    label = reservation_label(_key(gpr))
    for allocation in status.get("nodes") or []:
        view = world.clusters.get((str(status.get("colony")), allocation["cluster"]))
        if view is None:
            continue  # cluster unreadable or gone: nothing to label, nothing left to free
        try:
            await view.kube.patch_labels(
                "v1", "Node", allocation["node"], None, {label: str(allocation["gpus"]) if add else None}
            )
        except NotFound:
            continue


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
    await _label_nodes(world, gpr, add=False)
    meta = gpr["metadata"]
    metrics.record_job_usage(meta["namespace"], GPR.kind, meta["name"], _usage(gpr, world.now))
    await _patch(
        memo,
        gpr,
        {
            "phase": phase,
            "message": message,
            "releasedAt": format_time(datetime.fromtimestamp(world.now, UTC)),
            "nodes": [],
            **_usage(gpr, world.now),
        },
    )
    await _event(memo, gpr, f"GPR{phase}", message)
    await _teardown_if_unused(memo, world, gpr)


async def _teardown_if_unused(memo: kopf.Memo, world: World, gpr: Mapping[str, Any]) -> None:
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
    if not users and await memo.kube.delete(COLONY.api_version, COLONY.kind, provisioned, namespace):
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
        if _reservation_in_use(world, gpr):
            if status.get("idleSince"):
                await _patch(memo, gpr, {"idleSince": None})
            continue
        idle_since = timestamp(status.get("idleSince"))
        if idle_since is None:
            await _patch(memo, gpr, {"idleSince": format_time(datetime.fromtimestamp(world.now, UTC))})
        elif world.now - idle_since >= idle_limit:
            await release(
                memo,
                world,
                gpr,
                "Released",
                f"no pod used the GPUs for idleTimeOutDuration {spec['idleTimeOutDuration']}",
            )
            released = True
    return released


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
    if gpr["spec"].get("requeueOnFailure", True):
        retries = int(status.get("retryCount") or 0) + 1
        await _patch(
            memo,
            gpr,
            {
                "phase": "Queued",
                "provisionedColony": None,
                "retryCount": retries,
                "message": f"{why}; requeued",
            },
        )
        await _event(memo, gpr, "ProvisioningFailed", f"{why}; requeued (retry {retries})", warning=True)
    else:
        await _patch(memo, gpr, {"phase": "Failed", "message": why})
        await _event(memo, gpr, "ProvisioningFailed", why, warning=True)
    return True


async def release_on_delete(memo: kopf.Memo, gpr: Mapping[str, Any]) -> None:
    """A GPR is being deleted: free its nodes and tear down its ephemeral colony if unused."""
    world = await _read(memo)
    await _label_nodes(world, gpr, add=False)
    await _teardown_if_unused(memo, world, gpr)
    wake_scheduler(memo)


async def _finish_admissions(memo: kopf.Memo, world: World, by_key: Mapping[str, dict[str, Any]]) -> None:
    """Admitted (status written) but not yet Ready (labels maybe missing): label, then Ready."""
    for gpr in by_key.values():
        if (gpr.get("status") or {}).get("phase") == "Admitted":
            await _label_nodes(world, gpr, add=True)
            await _patch(memo, gpr, {"phase": "Ready", "message": _ready_message(gpr.get("status") or {})})
            await _event(memo, gpr, "GPRReady", _ready_message(gpr.get("status") or {}))


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
    for victim in decisions.preemptions:
        if victim.victim in by_key:
            await _preempt(memo, world, by_key[victim.victim], victim)
    for admit in decisions.admitted:
        if admit.key in by_key:
            await _admit(memo, world, by_key[admit.key], admit)
    for provision in decisions.provisions:
        if provision.key in by_key:
            await _provision(memo, by_key[provision.key], provision)


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
        "queue": _public_queue(_queue_name(world, gpr["metadata"]["namespace"])),
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
    if not await _patch(memo, gpr, status):
        return
    admitted = {**gpr, "status": {**(gpr.get("status") or {}), **status}}
    await _label_nodes(world, admitted, add=True)
    await _patch(memo, admitted, {"phase": "Ready", "message": _ready_message(admitted["status"])})
    await _event(memo, gpr, "GPRReady", _ready_message(admitted["status"]))


async def _preempt(memo: kopf.Memo, world: World, victim: dict[str, Any], decision: Preempt) -> None:
    await _label_nodes(world, victim, add=False)
    status = victim.get("status") or {}
    message = f"evicted for {decision.for_key}: {decision.reason}; requeued"
    await _patch(
        memo,
        victim,
        {
            "phase": "Queued",
            "message": message,
            "evictedBy": decision.for_key,
            "retryCount": int(status.get("retryCount") or 0) + 1,
            "nodes": [],
            "colony": None,
            "gpusAllocated": None,
            "releasedAt": format_time(datetime.fromtimestamp(world.now, UTC)),
            **_usage(victim, world.now),
        },
    )
    await _event(memo, victim, "GPREvicted", message, warning=True)


async def _provision(memo: kopf.Memo, gpr: dict[str, Any], decision: Provision) -> None:
    meta = gpr["metadata"]
    name = f"gpr-{meta['name']}"[:60].rstrip("-")
    try:
        manifest = colony_for_offer(
            decision.offer,
            name=name,
            namespace=meta["namespace"],
            k8s_version=pinned("KUBERNETES_VERSION"),
            labels={FOR_GPR_LABEL: meta["name"]},
        )
    except ProviderNotSupported as error:
        await _patch(memo, gpr, {"phase": "Queued", "message": str(error)})
        return
    try:
        await memo.kube.apply(manifest)
    except (Conflict, KubeApiError) as error:
        await _patch(memo, gpr, {"message": f"creating colony {name} failed: {error}"})
        return
    offer = decision.offer
    message = (
        f"provisioning colony {name}: {offer.offer.cloud} {offer.offer.region} {offer.offer.instance_type} "
        f"x{offer.nodes} at ${offer.price_per_hour:.2f}/h"
    )
    await _patch(memo, gpr, {"phase": "Provisioning", "provisionedColony": name, "message": message})
    await _event(memo, gpr, "ColonyProvisioning", message)


async def _write_queue_status(
    memo: kopf.Memo,
    world: World,
    queues: Sequence[QueueQuota],
    running: Sequence[RunningRequest],
    pending: Sequence[GpuRequest],
    decisions: Decisions,
) -> None:
    by_key = {_key(g): g for g in world.gprs}
    for key, estimate in decisions.estimates.items():
        gpr = by_key.get(key)
        if gpr is None:
            continue
        status = gpr.get("status") or {}
        wait = None if estimate.start_s is None else max(0, int(estimate.start_s - world.now))
        previous = status.get("estimatedWaitSeconds")
        moved = (wait is None) != (previous is None) or (
            wait is not None
            and previous is not None
            and abs(wait - previous) > max(5, ESTIMATE_TOLERANCE * max(wait, previous))
        )
        update: dict[str, Any] = {}
        if status.get("positionInQueue") != estimate.position:
            update["positionInQueue"] = estimate.position
        if moved:
            update["estimatedWaitSeconds"] = wait
            update["estimatedStartTime"] = (
                None
                if estimate.start_s is None
                else format_time(datetime.fromtimestamp(estimate.start_s, UTC))
            )
        if status.get("phase") == "Queued" and status.get("message") != estimate.reason:
            update["message"] = estimate.reason
        queue_name = _public_queue(_queue_name(world, gpr["metadata"]["namespace"]))
        if status.get("queue") != queue_name:
            update["queue"] = queue_name
        if update:
            await _patch(memo, gpr, update)
    for queue in queues:
        if queue.name.startswith(NAMESPACE_QUEUE_PREFIX):
            continue
        used: dict[str, int] = {}
        for request in running:
            if request.request.queue == queue.name:
                used[request.placement.gpu_type] = (
                    used.get(request.placement.gpu_type, 0) + request.request.gpus
                )
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
            try:
                await memo.kube.patch_status(GPUQUEUE.api_version, GPUQUEUE.kind, queue.name, None, status)
            except NotFound:
                continue
