"""What a scheduling pass reports besides its decisions: Prometheus metrics (queue depth and
waits, GPUs allocated and free), each GPUQueue's counts and usage, and the queue positions, wait
estimates and messages of waiting requests. The status writes run in the background and never hold
up the next pass."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from colony import metrics
from colony.api import GPUQUEUE
from colony.controllers.gpr.world import ClusterView, World, gpr_queue
from colony.controllers.gpr.writes import concurrently, is_accepted, patch
from colony.gpu import GPU_PRODUCT_LABEL, GPU_RESOURCE
from colony.kube.resources import KubeApiError, NotFound
from colony.scheduling.offers.gpu_names import normalize_gpu
from colony.scheduling.queueing.model import Decisions, GpuNode, GpuRequest, QueueQuota, RunningRequest
from colony.scheduling.queueing.objects import request_key
from colony.scheduling.queueing.rules import (
    ESTIMATE_REFRESH_S,
    NAMESPACE_QUEUE_PREFIX,
    estimate_update,
    is_prompt,
    public_queue,
    queue_usage,
)

if TYPE_CHECKING:
    from colony.controllers.context import OperatorContext

ESTIMATE_WRITES_PER_PASS = 200
"""Most status writes of positions, estimates and messages per pass, heads of the queues first;
the rest follow in later passes (a pass must stay short with any number waiting)."""
ESTIMATE_WRITES = "gpr-estimate-writes"
QUEUE_USAGE_WRITES = "gpr-queue-usage-writes"
WRITERS = (ESTIMATE_WRITES, QUEUE_USAGE_WRITES)
"""The context's tasks writing a pass's estimates and queue usage in the background (at most one
of each at a time)."""
ESTIMATE_WRITE_CONCURRENCY = 2
"""Requests whose estimates are written at once in the background, so that the next pass's reads
and admissions find free connections."""

log = logging.getLogger(__name__)


def export_metrics(
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


def write_queue_status(
    context: OperatorContext,
    world: World,
    queues: Sequence[QueueQuota],
    running: Sequence[RunningRequest],
    pending: Sequence[GpuRequest],
    decisions: Decisions,
) -> None:
    """Each queue's counts and usage, and the positions, wait estimates and messages of waiting
    requests (in the background: they never hold up the next pass)."""
    start_unless_running(context, ESTIMATE_WRITES, lambda: write_estimates(context, world, decisions))
    start_unless_running(
        context, QUEUE_USAGE_WRITES, lambda: _write_queue_usages(context, world, queues, running, pending)
    )


def start_unless_running(
    context: OperatorContext, name: str, writes: Callable[[], Coroutine[Any, Any, None]]
) -> None:
    """Start this pass's `writes` as the context's task `name` unless the previous pass's are
    still running (then the next pass computes them afresh)."""
    task = context.tasks.get(name)
    if task is None or task.done():
        context.start(name, writes())


async def write_estimates(context: OperatorContext, world: World, decisions: Decisions) -> None:
    """The estimate updates that changed enough (scheduling.queueing.rules.estimate_update), at
    most ESTIMATE_WRITES_PER_PASS of them, in the order of queue positions (the heads of every queue
    first): the prompt ones (is_prompt) on every pass, the others once every ESTIMATE_REFRESH_S.
    Each applies only to the version of the request the pass read: one admitted or changed since
    keeps its newer status. A spec not accepted yet is left to `accept.accept`, which writes it in
    the same pass (two writes onto one version: one would fail)."""
    by_key = {request_key(g): g for g in world.gprs}
    refresh = world.now - context.scheduler.estimates_refreshed_at >= ESTIMATE_REFRESH_S
    if refresh:
        context.scheduler.estimates_refreshed_at = world.now
    updates = []
    for key, estimate in sorted(decisions.estimates.items(), key=lambda item: (item[1].position, item[0])):
        gpr = by_key.get(key)
        update = (
            estimate_update(
                gpr.get("status") or {},
                estimate,
                world.now,
                public_queue(gpr_queue(world, gpr, context.settings.require_queue)),
            )
            if gpr is not None
            else {}
        )
        if (
            gpr is not None
            and update
            and (refresh or is_prompt(gpr.get("status") or {}, update))
            and is_accepted(gpr)  # else accept.accept writes it now; its estimate follows next pass
        ):
            updates.append(patch(context, gpr, update, only_if_unchanged=True))
        if len(updates) == ESTIMATE_WRITES_PER_PASS:
            break
    try:
        await concurrently(updates, ESTIMATE_WRITE_CONCURRENCY)
    except (KubeApiError, OSError, TimeoutError) as error:  # the next pass writes them again
        log.warning("writing wait estimates failed: %s", error)


async def _write_queue_usages(
    context: OperatorContext,
    world: World,
    queues: Sequence[QueueQuota],
    running: Sequence[RunningRequest],
    pending: Sequence[GpuRequest],
) -> None:
    """Every GPUQueue's counts and usage (scheduling.queueing.rules.queue_usage), when they
    changed (a namespace's own queue has no GPUQueue to write)."""
    try:
        await concurrently(
            _write_queue_usage(context, world, queue, running, pending)
            for queue in queues
            if not queue.name.startswith(NAMESPACE_QUEUE_PREFIX)
        )
    except (KubeApiError, OSError, TimeoutError) as error:  # the next pass writes them again
        log.warning("writing queue usage failed: %s", error)


async def _write_queue_usage(
    context: OperatorContext,
    world: World,
    queue: QueueQuota,
    running: Sequence[RunningRequest],
    pending: Sequence[GpuRequest],
) -> None:
    """A GPUQueue's pending and admitted counts, GPUs in use per type and the queue policy, when
    they changed."""
    status = queue_usage(queue, running, pending, context.settings.queue_policy)
    current = next((q for q in world.queues if q["metadata"]["name"] == queue.name), {})
    if {k: (current.get("status") or {}).get(k) for k in status} != status:
        with contextlib.suppress(NotFound):
            await context.kube.patch_status(GPUQUEUE.api_version, GPUQUEUE.kind, queue.name, None, status)
