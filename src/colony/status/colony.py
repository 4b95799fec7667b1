"""Pure: what the operator observed about a colony's clusters and add-ons -> Colony status.

Rules a user can rely on:
- a colony with no clusters is never Ready; it is Ready when every cluster is Ready;
- a cluster is Ready when Cluster API reports it Provisioned (or, for an existing cluster, at once)
  and its API server answers through the kubeconfig Secret;
- any Failed or Unreachable cluster makes the colony Degraded, naming the clusters; the others keep
  working and reporting;
- add-on readiness is reported (AddonsReady) but does not gate Ready.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from colony.api.conditions import set_condition
from colony.render.contract import RenderedCluster, RenderedColony
from colony.status.inventory import ClusterInventory


@dataclass(frozen=True)
class ClusterObservation:
    """What the controller read for one colony cluster."""

    capi_cluster: Mapping[str, Any] | None = None
    """The Cluster API Cluster object, or None when it does not exist (yet)."""
    inventory: ClusterInventory | None = None
    """Nodes and GPUs read from the cluster's API server, when it answered."""
    access_error: str | None = None
    """Why the cluster's API server could not be read (missing Secret, bad kubeconfig, ...)."""
    refused_field: str | None = None
    """The kubeconfig field the operator refused to use (exec, tokenFile, ...), when that is why."""


@dataclass(frozen=True)
class AddonObservation:
    """Readiness of one dependency, aggregated from its HelmReleaseProxies."""

    name: str
    helm_chart_proxy: str
    ready: bool
    message: str


def _capi_failure_message(cluster: Mapping[str, Any]) -> str:
    status = cluster.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("status") == "False" and condition.get("message"):
            return f"{condition.get('type')}: {condition['message']}"
    deprecated = ((status.get("deprecated") or {}).get("v1beta1") or {}).get("failureMessage")
    return str(deprecated or "Cluster API reports the cluster Failed")


def _endpoint(cluster: Mapping[str, Any] | None) -> str | None:
    endpoint = ((cluster or {}).get("spec") or {}).get("controlPlaneEndpoint") or {}
    if endpoint.get("host"):
        return f"{endpoint['host']}:{endpoint.get('port', 6443)}"
    return None


def cluster_status(rendered: RenderedCluster, observed: ClusterObservation) -> dict[str, Any]:
    """The status entry of one colony cluster."""
    entry: dict[str, Any] = {"name": rendered.cluster_name, "provider": rendered.provider}
    if rendered.capi_cluster_name:
        entry["capiCluster"] = rendered.capi_cluster_name
    if rendered.hosted_ports:
        entry["hostedControlPlane"] = {
            "apiPort": rendered.hosted_ports.api,
            "konnectivityPort": rendered.hosted_ports.konnectivity,
        }
    if endpoint := _endpoint(observed.capi_cluster):
        entry["controlPlaneEndpoint"] = endpoint
    phase, message = _cluster_phase(rendered, observed)
    entry["phase"] = phase
    entry["message"] = message
    inventory = observed.inventory
    entry["readyNodes"] = inventory.ready_nodes if inventory else 0
    entry["totalNodes"] = inventory.total_nodes if inventory else 0
    entry["gpus"] = [g.to_status() for g in inventory.gpus] if inventory else []
    return entry


def _cluster_phase(rendered: RenderedCluster, observed: ClusterObservation) -> tuple[str, str]:
    if rendered.problems:
        return "Failed", "; ".join(rendered.problems)
    if rendered.capi_cluster_name is not None:
        cluster = observed.capi_cluster
        if cluster is None:
            return "Pending", "the Cluster API Cluster has not been created yet"
        if (cluster.get("metadata") or {}).get("deletionTimestamp"):
            return "Deleting", "Cluster API is deleting the cluster"
        capi_phase = (cluster.get("status") or {}).get("phase") or "Pending"
        if capi_phase == "Failed":
            return "Failed", _capi_failure_message(cluster)
        if capi_phase == "Pending":
            return "Pending", "Cluster API has not started provisioning the cluster yet"
        if capi_phase != "Provisioned":
            return "Provisioning", f"Cluster API phase is {capi_phase}"
        if observed.inventory is None and observed.refused_field is not None:
            return (
                "Unreachable",
                observed.access_error or f"kubeconfig field {observed.refused_field} refused",
            )
        if observed.inventory is None:
            return "Provisioning", f"waiting for the cluster's API server: {observed.access_error}"
        return "Ready", f"{observed.inventory.ready_nodes} node(s) ready"
    if observed.inventory is None:
        return "Unreachable", observed.access_error or "the cluster's API server did not answer"
    return "Ready", f"{observed.inventory.ready_nodes} node(s) ready"


def colony_status(
    rendered: RenderedColony,
    observations: Mapping[str, ClusterObservation],
    addons: Sequence[AddonObservation],
    *,
    previous_conditions: list[dict[str, Any]] | None,
    generation: int | None,
    now: str | None = None,
) -> dict[str, Any]:
    """The full status patch of a colony (everything but the Accepted condition)."""
    clusters = [
        cluster_status(c, observations.get(c.cluster_name, ClusterObservation())) for c in rendered.clusters
    ]
    ready = [c for c in clusters if c["phase"] == "Ready"]
    broken = [c for c in clusters if c["phase"] in ("Failed", "Unreachable")]
    if not clusters:
        phase = "Pending"
    elif broken:
        phase = "Degraded"
    elif len(ready) == len(clusters):
        phase = "Ready"
    elif any(c["phase"] in ("Provisioning", "Ready") for c in clusters):
        phase = "Provisioning"
    else:
        phase = "Pending"

    def condition(
        conditions: list[dict[str, Any]], type_: str, ok: bool, reason: str, message: str
    ) -> list[dict[str, Any]]:
        return set_condition(
            conditions,
            type_=type_,
            status="True" if ok else "False",
            reason=reason,
            message=message,
            observed_generation=generation,
            now=now,
        )

    conditions = list(previous_conditions or [])
    if broken:
        names = ", ".join(f"{c['name']} ({c['phase']}: {c['message']})" for c in broken)
        refused = any(
            observations.get(c["name"], ClusterObservation()).refused_field is not None for c in broken
        )
        reason = "KubeconfigRefused" if refused else "ClusterFailed"
        conditions = condition(conditions, "ClustersReady", False, reason, names)
    elif clusters and len(ready) == len(clusters):
        conditions = condition(
            conditions, "ClustersReady", True, "AllClustersReady", f"{len(ready)} cluster(s) ready"
        )
    else:
        waiting = ", ".join(f"{c['name']} ({c['message']})" for c in clusters if c["phase"] != "Ready")
        conditions = condition(
            conditions, "ClustersReady", False, "ClustersNotReady", waiting or "no clusters"
        )
    not_ready = [a for a in addons if not a.ready]
    if not_ready:
        message = "; ".join(f"{a.name}: {a.message}" for a in not_ready)
        conditions = condition(conditions, "AddonsReady", False, "AddonsNotReady", message)
    else:
        conditions = condition(
            conditions, "AddonsReady", True, "AddonsReady", f"{len(addons)} add-on(s) ready"
        )
    if rendered.problems:
        conditions = condition(
            conditions, "DependenciesResolved", False, "UnknownDependency", "; ".join(rendered.problems)
        )
    else:
        conditions = condition(
            conditions, "DependenciesResolved", True, "Resolved", "every dependency is known"
        )
    conditions = condition(conditions, "Ready", phase == "Ready", phase, _summary(phase, clusters))
    return {
        "phase": phase,
        "totalClusters": len(clusters),
        "readyClusters": len(ready),
        "gpus": sum(g["capacity"] for c in ready for g in c["gpus"]),
        "clusters": clusters,
        "addons": [
            {"name": a.name, "helmChartProxy": a.helm_chart_proxy, "ready": a.ready, "message": a.message}
            for a in addons
        ],
        "conditions": conditions,
        "observedGeneration": generation,
    }


def _summary(phase: str, clusters: Sequence[Mapping[str, Any]]) -> str:
    ready = sum(1 for c in clusters if c["phase"] == "Ready")
    return f"{phase}: {ready}/{len(clusters)} cluster(s) ready"
