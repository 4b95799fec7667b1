"""Colony handlers: render → server-side apply → prune → observe → status. Never blocks.

- create/update/resume: the full reconcile (idempotent: a crash anywhere and a re-run converge).
- a timer and Cluster API Cluster events refresh the status (phase, per-cluster GPU inventory).
- delete: deletes the colony's Clusters and add-ons, takes the GPR reservation labels it accounts
  for off its existing clusters, re-checks with a delay until Cluster API is done, then removes the
  remaining parts and releases the finalizer.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import kopf

from colony import events, metrics
from colony.api import COLONY
from colony.api.colony import ColonySpec
from colony.controllers.acceptance import accept_spec
from colony.controllers.cluster_access import kubeconfig_secrets
from colony.controllers.colony_children import (
    CAPI_CLUSTER,
    HELM_RELEASE_PROXY,
    apply_all,
    delete_everything,
    desired_objects,
    prune,
)
from colony.controllers.colony_reservations import release_reservations
from colony.controllers.context import OperatorContext, context_of
from colony.controllers.existing_addons import ExistingClusterAddons, ReleaseObservation, Removal
from colony.kube.colony_clusters import ClusterAccessError, ColonyClusterClients
from colony.kube.resources import Conflict, Kube
from colony.labels import ADDON_LABEL, COLONY_LABEL
from colony.render.colony import render_colony
from colony.render.contract import ColonyRef, HostedControlPlanePorts, RenderedCluster, RenderedColony
from colony.render.existing_addons import plan_existing_releases
from colony.render.resources import hosted_clusters, hosted_ports
from colony.scheduling.cleanup import CLEANUP_ABANDONED, abandoned_message
from colony.status.colony import AddonObservation, ClusterObservation, colony_status
from colony.status.cost import cluster_price, priced_colony_status

STATUS_REFRESH_S = 5.0
DELETE_RECHECK_S = 3.0

Logger = logging.Logger | logging.LoggerAdapter[logging.Logger]


async def _ports(
    kube: Kube, namespace: str, name: str, spec: ColonySpec, status: Mapping[str, Any]
) -> dict[str, HostedControlPlanePorts]:
    """Hosted control-plane ports: the ones recorded in status, else freshly allocated ones that no
    other colony has recorded (see render.resources.hosted_ports). Remote clusters always get a
    hosted control plane."""
    if not hosted_clusters(spec):
        return {}
    others = await kube.list(COLONY.api_version, COLONY.kind)
    return hosted_ports(namespace, name, spec, status, others)


async def _render(ctx: OperatorContext, body: Mapping[str, Any], spec: ColonySpec) -> RenderedColony:
    meta = body["metadata"]
    ref = ColonyRef(name=meta["name"], namespace=meta["namespace"], uid=meta["uid"])
    ports = await _ports(ctx.kube, ref.namespace, ref.name, spec, body.get("status") or {})
    return render_colony(ref, spec, ports, aws_instance_profiles=ctx.settings.aws_instance_profiles)


async def _observe(
    ctx: OperatorContext, ref: ColonyRef, spec: ColonySpec, rendered: RenderedColony
) -> tuple[dict[str, ClusterObservation], list[AddonObservation]]:
    namespace, colony = ref.namespace, ref.name
    kube: Kube = ctx.kube
    clients: ColonyClusterClients = ctx.colony_clients
    capi = {
        c["metadata"]["name"]: c
        for c in await kube.list(*CAPI_CLUSTER, namespace, label_selector=f"{COLONY_LABEL}={colony}")
    }
    observations: dict[str, ClusterObservation] = {}
    for cluster in rendered.clusters:
        capi_cluster = capi.get(cluster.capi_cluster_name) if cluster.capi_cluster_name else None
        provisioned = cluster.capi_cluster_name is None or (
            capi_cluster is not None and (capi_cluster.get("status") or {}).get("phase") == "Provisioned"
        )
        inventory, error, refused = None, None, None
        if provisioned:
            try:
                inventory = await clients.inventory(
                    namespace, cluster.kubeconfig_secret, cluster.kubeconfig_key
                )
            except ClusterAccessError as access:
                error, refused = str(access), access.refused_field
        observations[cluster.cluster_name] = ClusterObservation(capi_cluster, inventory, error, refused)
    plans, not_installable = plan_existing_releases(ref, spec, rendered)
    existing: ExistingClusterAddons = ctx.existing_addons
    helm_releases = await existing.observe(ref, rendered.clusters, plans)
    return observations, await _observe_addons(kube, namespace, rendered, helm_releases, not_installable)


async def _observe_addons(
    kube: Kube,
    namespace: str,
    rendered: RenderedColony,
    helm_releases: list[ReleaseObservation],
    refused: dict[str, str],
) -> list[AddonObservation]:
    """Aggregate, per HelmChartProxy, the HelmReleaseProxies CAAPH created (Cluster API clusters)
    and the releases the operator installed itself (existing clusters)."""
    addons = []
    capi_clusters = any(c.capi_cluster_name is not None for c in rendered.clusters)
    for proxy in rendered.addons:
        name = proxy["metadata"]["name"]
        dependency = proxy["metadata"].get("labels", {}).get(ADDON_LABEL, name)
        releases = await kube.list(
            *HELM_RELEASE_PROXY,
            namespace,
            label_selector=f"addons.cluster.x-k8s.io/helmchartproxy-name={name}",
        )
        not_ready = [
            r["metadata"]["name"]
            for r in releases
            if not any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (r.get("status") or {}).get("conditions") or []
            )
        ]
        own = [r for r in helm_releases if r.helm_chart_proxy == name]
        problems = [f"not ready: {', '.join(not_ready)}"] if not_ready else []
        problems += [r.message for r in own if not r.ready]
        if name in refused:
            problems.append(refused[name])
        deployed = len(releases) + len(own)
        if problems:
            addons.append(AddonObservation(dependency, name, False, "; ".join(problems)))
        elif not deployed or (capi_clusters and not releases):
            addons.append(AddonObservation(dependency, name, False, "no Helm release yet"))
        else:
            addons.append(AddonObservation(dependency, name, True, f"deployed on {deployed} cluster(s)"))
    return addons


async def _status(
    ctx: OperatorContext,
    body: Mapping[str, Any],
    spec: ColonySpec,
    rendered: RenderedColony,
    conditions: list[dict[str, Any]],
) -> dict[str, Any]:
    meta = body["metadata"]
    ref = ColonyRef(name=meta["name"], namespace=meta["namespace"], uid=meta["uid"])
    observations, addons = await _observe(ctx, ref, spec, rendered)
    status = colony_status(
        rendered, observations, addons, previous_conditions=conditions, generation=meta.get("generation")
    )
    prices = {c.cluster_name: cluster_price(c, ctx.catalog) for c in spec.colony_clusters}
    priced = priced_colony_status(
        status,
        prices,
        body.get("status") or {},
        datetime.now(UTC),
        min_interval_s=ctx.settings.cost_refresh_s,
    )
    metrics.record_colony_cost(meta["namespace"], meta["name"], priced)
    return priced


@kopf.on.resume(COLONY.group, COLONY.version, COLONY.plural)
@kopf.on.create(COLONY.group, COLONY.version, COLONY.plural)
@kopf.on.update(COLONY.group, COLONY.version, COLONY.plural)
async def reconcile_colony(
    body: kopf.Body,
    spec: kopf.Spec,
    status: kopf.Status,
    meta: kopf.Meta,
    patch: kopf.Patch,
    memo: kopf.Memo,
    logger: Logger,
    **_: Any,
) -> None:
    """Render the colony, apply it, prune what was removed, and write the observed status."""
    ctx = context_of(memo)
    parsed = accept_spec(ColonySpec, spec, status, meta.get("generation"), patch, logger)
    if not isinstance(parsed, ColonySpec):
        return
    rendered = await _render(ctx, body, parsed)
    applied = await apply_all(ctx.kube, desired_objects(rendered))
    removed = await prune(ctx.kube, meta["namespace"], meta["name"], rendered)
    for problem in rendered.problems:
        events.post(body, "UnknownDependency", problem, warning=True)
    if removed:
        events.post(body, "Pruned", f"deleted objects no longer in the spec: {', '.join(removed)}")
    logger.info("applied %d object(s), pruned %d", applied, len(removed))
    new_status = await _status(ctx, body, parsed, rendered, patch.status["conditions"])
    _record_transition(body, status, new_status)
    patch.status.update(new_status)


async def _refreshed_status(ctx: OperatorContext, body: Mapping[str, Any]) -> dict[str, Any] | None:
    """Finish pending prunes and re-observe; the status to patch, or None when nothing changed."""
    status = body.get("status") or {}
    try:
        parsed = ColonySpec.model_validate(dict(body["spec"]))
    except ValueError:
        return None
    rendered = await _render(ctx, body, parsed)
    # Parts of a removed cluster wait for its Cluster to be gone; finish pruning them here.
    await prune(ctx.kube, body["metadata"]["namespace"], body["metadata"]["name"], rendered)
    new_status = await _status(ctx, body, parsed, rendered, list(status.get("conditions") or []))
    new_status.pop("observedGeneration")  # only a full reconcile may claim a generation
    if all(status.get(k) == v for k, v in new_status.items()):
        return None
    return new_status


async def _refresh(ctx: OperatorContext, body: Mapping[str, Any]) -> None:
    """Re-observe and patch the status, guarded by the resourceVersion the status was computed from:
    the reconcile handler, the timer and Cluster events all write status, and a status computed
    from a stale read must not drop what another writer just set (e.g. the Accepted condition)."""
    new_status = await _refreshed_status(ctx, body)
    if new_status is None:
        return
    meta = body["metadata"]
    try:
        await ctx.kube.patch_status(
            COLONY.api_version,
            COLONY.kind,
            meta["name"],
            meta["namespace"],
            new_status,
            resource_version=meta["resourceVersion"],
        )
    except Conflict:
        return  # somebody wrote first; the next event or tick recomputes from the newer object
    _record_transition(body, body.get("status") or {}, new_status)


@kopf.timer(
    COLONY.group, COLONY.version, COLONY.plural, interval=STATUS_REFRESH_S, initial_delay=STATUS_REFRESH_S
)
async def refresh_colony_status(memo: kopf.Memo, meta: kopf.Meta, **_: Any) -> None:
    """Periodic safety net: re-observe clusters and add-ons (inventory changes have no event)."""
    ctx = context_of(memo)
    current = await ctx.kube.get(COLONY.api_version, COLONY.kind, meta["name"], meta["namespace"])
    if current is not None and not current["metadata"].get("deletionTimestamp"):
        await _refresh(ctx, current)


@kopf.on.event("cluster.x-k8s.io", "v1beta2", "clusters", labels={COLONY_LABEL: kopf.PRESENT})
async def capi_cluster_changed(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """A colony's Cluster API Cluster changed: refresh that colony's status now, not at the next tick."""
    ctx = context_of(memo)
    namespace, colony = body["metadata"]["namespace"], body["metadata"]["labels"][COLONY_LABEL]
    current = await ctx.kube.get(COLONY.api_version, COLONY.kind, colony, namespace)
    if current is not None and not current["metadata"].get("deletionTimestamp"):
        await _refresh(ctx, current)


def _record_transition(body: Mapping[str, Any], old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """An Event on the colony when its phase changes (a plain dict body works for kopf's posting)."""
    if old.get("phase") != new["phase"]:
        ready: Mapping[str, Any] = next((c for c in new["conditions"] if c["type"] == "Ready"), {})
        warning = new["phase"] in ("Degraded", "Failed")
        events.post(body, f"Colony{new['phase']}", ready.get("message", new["phase"]), warning=warning)


def _rendered_clusters(body: Mapping[str, Any]) -> tuple[RenderedCluster, ...]:
    """The colony's clusters as rendered from its spec (none when the spec does not validate)."""
    try:
        parsed = ColonySpec.model_validate(dict(body["spec"]))
    except ValueError:
        return ()
    meta = body["metadata"]
    ref = ColonyRef(name=meta["name"], namespace=meta["namespace"], uid=meta["uid"])
    return render_colony(ref, parsed, {}).clusters


async def _remove_existing_addons(
    ctx: OperatorContext, body: Mapping[str, Any], clusters: tuple[RenderedCluster, ...]
) -> Removal:
    """Uninstall the releases the operator installed on the colony's existing clusters."""
    if not clusters:
        return Removal()
    meta = body["metadata"]
    ref = ColonyRef(name=meta["name"], namespace=meta["namespace"], uid=meta["uid"])
    existing: ExistingClusterAddons = ctx.existing_addons
    return await existing.remove(ref, clusters)


@kopf.on.delete(COLONY.group, COLONY.version, COLONY.plural)
async def delete_colony(
    body: kopf.Body, meta: kopf.Meta, patch: kopf.Patch, memo: kopf.Memo, logger: Logger, retry: int, **_: Any
) -> None:
    """Delete the colony's objects; re-check later (never wait here) until all are gone. Add-ons
    on existing clusters whose uninstall keeps failing are given up after DELETE_RETRIES tries
    (colony.scheduling.cleanup): a CleanupAbandoned Event names them, and deletion goes on."""
    ctx = context_of(memo)
    patch.status["phase"] = "Deleting"
    remaining = await delete_everything(ctx.kube, meta["namespace"], meta["name"])
    clusters = _rendered_clusters(body)
    addons = await _remove_existing_addons(ctx, body, clusters)
    reservations = await release_reservations(ctx, body, clusters)
    remaining += addons.remaining + reservations.remaining
    abandoned = {**addons.abandoned, **reservations.abandoned}
    if abandoned:
        failures = "; ".join(sorted(set(abandoned.values())))
        message = abandoned_message("the colony's existing clusters", failures, sorted(abandoned))
        events.post(body, CLEANUP_ABANDONED, message, warning=True)
        logger.warning("abandoning cleanup: %s", message)
    if retry == 0:
        events.post(body, "ColonyDeleting", f"deleting the colony: {len(remaining)} object(s) to remove")
    if remaining:
        logger.info("waiting for %d object(s) to go: %s", len(remaining), ", ".join(remaining[:5]))
        raise kopf.TemporaryError(
            f"waiting for {len(remaining)} object(s) to be deleted", delay=DELETE_RECHECK_S
        )
    logger.info("every object of the colony is gone")
    ctx.colony_clients.forget(meta["namespace"], kubeconfig_secrets(body))
    ctx.existing_addons.forget(meta["uid"])
    events.post(body, "ColonyDeleted", "every object of the colony is gone")
    metrics.forget_colony(meta["namespace"], meta["name"])
