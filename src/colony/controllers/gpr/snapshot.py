"""From the World a pass read to the scheduler core's Snapshot: the running and pending requests
(specs validated and parsed once per generation, see state.ParseCache), the queues with their
quotas (a namespace's own queue unlimited), the free GPU nodes, the colonies with their prices,
and the offers the core may provision."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from colony.api.gpr import GPRSpec
from colony.controllers.gpr.apply import provisioning_failed
from colony.controllers.gpr.world import World, candidate_colonies, gpr_queue, unreachable
from colony.controllers.gpr.writes import backing_off, guarded, newest_known
from colony.render.offer_colony import SUPPORTED_CLOUDS
from colony.scheduling.fault_rules import pinned_while_unreachable
from colony.scheduling.queueing.model import (
    ColonyInfo,
    GpuNode,
    GpuRequest,
    QueueQuota,
    RunningRequest,
    Snapshot,
)
from colony.scheduling.queueing.objects import (
    PENDING_PHASES,
    RUNNING_PHASES,
    gpu_nodes,
    gpu_request,
    queue_quota,
    request_key,
    running_request,
)
from colony.scheduling.queueing.rules import (
    NAMESPACE_QUEUE_PREFIX,
    UNLIMITED,
    known_reservations,
    placement_order,
)
from colony.status.cost import price_per_gpu_hour

if TYPE_CHECKING:
    from colony.controllers.context import OperatorContext


@dataclass
class Requests:
    """The requests a pass schedules: running and pending ones as the core sees them, and every
    one of them (not deleted, with a valid spec) by key."""

    running: list[RunningRequest] = field(default_factory=list)
    pending: list[GpuRequest] = field(default_factory=list)
    by_key: dict[str, dict[str, Any]] = field(default_factory=dict)


def _spec_version(gpr: Mapping[str, Any]) -> tuple[str, Any]:
    """What identifies a request's spec: its uid and generation (a spec change bumps it; an object
    without a generation is identified by its resourceVersion)."""
    meta = gpr["metadata"]
    return str(meta.get("uid") or request_key(gpr)), meta.get("generation") or meta.get("resourceVersion")


def _valid(gpr: Mapping[str, Any]) -> bool:
    """Whether a request's spec validates (an invalid one is failed by `accept`, never scheduled)."""
    try:
        GPRSpec.model_validate(dict(gpr["spec"]))
    except ValueError:
        return False
    return True


async def requests(context: OperatorContext, world: World) -> Requests:
    """The running and pending requests of the World; a pending one whose provisioned colony
    failed is requeued or failed instead (apply.provisioning_failed). A running request whose
    colony did not answer keeps its GPUs (fault_rules.pinned_while_unreachable). A pending request
    backing off (writes.guarded) waits out its backoff unscheduled; one that cannot be turned into
    the core's input is recorded and backed off, and the others are scheduled."""
    found = Requests()
    for gpr in world.gprs:
        await guarded(context, gpr, "scheduling", _add_request(context, world, gpr, found))
    context.scheduler.parse_cache.end_pass()
    return found


async def _add_request(context: OperatorContext, world: World, read: dict[str, Any], found: Requests) -> None:
    """One request of `requests`, added to `found` (or not): as assumed while its admission is
    being written, else at the newest version known (an admission written since the read counts)."""
    gpr = context.scheduler.assumed.get(request_key(read)) or newest_known(context, read)
    cache = context.scheduler.parse_cache
    version = _spec_version(gpr)
    if gpr["metadata"].get("deletionTimestamp") or not cache.get(("valid", *version), _valid, gpr):
        return
    status = gpr.get("status") or {}
    queue = gpr_queue(world, gpr, context.settings.require_queue)
    found.by_key[request_key(gpr)] = gpr
    if status.get("phase") in RUNNING_PHASES:
        if (current := running_request(gpr, queue)) is not None:
            found.running.append(pinned_while_unreachable(current, bool(unreachable(world, gpr))))
    elif status.get("phase") in PENDING_PHASES:
        if backing_off(context, gpr) or await provisioning_failed(context, world, gpr):
            return
        candidates = candidate_colonies(world, gpr)
        request = cache.get(("request", *version, queue, candidates), gpu_request, gpr, queue, candidates)
        if status.get("provisionedColony"):
            request = replace(request, auto_provision=False)  # its colony is on the way
        found.pending.append(request)


def queue_quotas(world: World, requests: Requests) -> tuple[QueueQuota, ...]:
    """The quotas of the GPUQueues, and an unlimited queue for each namespace in use that no
    GPUQueue lists."""
    namespace_queues = sorted(
        {r.queue for r in (*requests.pending, *(r.request for r in requests.running))}
        - {q["metadata"]["name"] for q in world.queues}
    )
    return tuple(queue_quota(q) for q in world.queues) + tuple(
        QueueQuota(name, {"*": UNLIMITED})
        for name in namespace_queues
        if name.startswith(NAMESPACE_QUEUE_PREFIX)
    )


def free_nodes(world: World, requests: Requests) -> list[GpuNode]:
    """The GPU nodes of the clusters read, with what foreign reservations and pods hold taken off
    (scheduling.queueing.rules.known_reservations)."""
    known = known_reservations(requests.running, world.gprs)
    nodes: list[GpuNode] = []
    for view in world.clusters.values():
        nodes += gpu_nodes(view.colony, view.cluster, view.nodes, view.pods, known.get(view.colony, set()))
    return nodes


def snapshot(
    context: OperatorContext,
    world: World,
    requests: Requests,
    queues: tuple[QueueQuota, ...],
    nodes: list[GpuNode],
) -> Snapshot:
    """The core's input: the requests, nodes and queues, the Ready colonies (price, placement
    order), the offers of supported clouds, and the operator's policies."""
    return Snapshot(
        now_s=world.now,
        pending=tuple(requests.pending),
        running=tuple(requests.running),
        nodes=tuple(nodes),
        colonies=tuple(
            ColonyInfo(key, price_per_gpu_hour(c.get("status") or {}), int(placement_order(c)))
            for key, c in sorted(world.colonies.items())
        ),
        queues=queues,
        offers=tuple(o for o in context.catalog if o.cloud in SUPPORTED_CLOUDS),
        placement_policy=context.settings.placement_policy,
        order=context.settings.queue_policy,
        aging_s=context.settings.queue_aging_s,
    )
