"""A deleted Colony takes the GPR reservation labels it accounts for off the nodes of its existing
clusters, which outlive it (colony.scheduling.fault_rules.labels_of_colony says which labels).

Without this a label whose removal failed while the colony was unreachable (kept in the colony's
ledger), or the label of a request still holding GPUs there, would stay on the node forever: nothing
reads a deleted colony's clusters again, and a colony registered later on the same cluster would
count the label as another operator's, its GPUs occupied for good.

Like every cleanup behind a finalizer it ends (colony.scheduling.cleanup): after DELETE_RETRIES
failed tries of any error class, what was left is reported as abandoned and deletion goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from colony.api import GPR
from colony.controllers.existing_addons import Removal
from colony.controllers.gpr.world import informer
from colony.kube.resources import NotFound
from colony.render.contract import RenderedCluster
from colony.scheduling.cleanup import gives_up
from colony.scheduling.fault_rules import label_removals, labels_of_colony

if TYPE_CHECKING:
    from colony.controllers.context import OperatorContext

log = logging.getLogger(__name__)


async def release_reservations(
    context: OperatorContext, body: Mapping[str, Any], clusters: Iterable[RenderedCluster]
) -> Removal:
    """One step of deleting a colony: take its reservation labels off the nodes of its existing
    clusters. Returns what is still to do (a failed try, retried by the caller's next step) or, on
    the last allowed try, what was abandoned; an empty Removal when done."""
    meta = body["metadata"]
    namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
    existing = [c for c in clusters if c.capi_cluster_name is None]
    if not existing:
        return Removal()
    where = f"reservation labels on the existing clusters of colony {namespace}/{name}"
    try:
        labels = labels_of_colony(f"{namespace}/{name}", meta, await _requests(context))
        if labels:
            for cluster in existing:
                await _unlabel_cluster(context, namespace, cluster, labels)
    except Exception as error:  # any error class is a failed try (colony.scheduling.cleanup)
        tries = context.reservation_cleanup_tries[uid] = context.reservation_cleanup_tries.get(uid, 0) + 1
        log.warning("taking off %s failed (try %d): %s", where, tries, error)
        if gives_up(tries):
            del context.reservation_cleanup_tries[uid]
            return Removal(abandoned={where: str(error) or type(error).__name__})
        return Removal(remaining=[where])
    context.reservation_cleanup_tries.pop(uid, None)
    return Removal()


async def _requests(context: OperatorContext) -> list[dict[str, Any]]:
    """Every GPR: the scheduler's informer when it runs, else listed."""
    watcher = informer(context, "gpr")
    if watcher is not None:
        return watcher.objects()
    found: list[dict[str, Any]] = await context.kube.list(GPR.api_version, GPR.kind)
    return found


async def _unlabel_cluster(
    context: OperatorContext, namespace: str, cluster: RenderedCluster, labels: frozenset[str]
) -> None:
    """Take `labels` off every node of one existing cluster that carries some of them."""
    client = await context.colony_clients.client(namespace, cluster.kubeconfig_secret, cluster.kubeconfig_key)
    for node, removal in label_removals(await client.list("v1", "Node"), labels):
        try:
            await client.patch_labels("v1", "Node", node, None, removal)
        except NotFound:
            continue  # the node is gone, and its labels with it
        log.info("reservation labels %s taken off %s/%s", sorted(removal), cluster.cluster_name, node)
