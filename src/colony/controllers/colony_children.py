"""Apply, prune and delete the management-cluster objects rendered for a colony (I/O only)."""

from __future__ import annotations

from collections.abc import Iterable

from colony.kube.resources import Kube, Object
from colony.labels import CLUSTER_LABEL, COLONY_LABEL
from colony.render.contract import Manifest, RenderedColony

CAPI_CLUSTER = ("cluster.x-k8s.io/v1beta2", "Cluster")
HELM_CHART_PROXY = ("addons.cluster.x-k8s.io/v1alpha1", "HelmChartProxy")
HELM_RELEASE_PROXY = ("addons.cluster.x-k8s.io/v1alpha1", "HelmReleaseProxy")

# Every kind the renderers produce besides Clusters and HelmChartProxies. They are pruned only once
# their Cluster is gone, so Cluster API tears a cluster down in its own order first.
CLUSTER_PARTS = (
    ("cluster.x-k8s.io/v1beta2", "MachineDeployment"),
    ("cluster.x-k8s.io/v1beta2", "Machine"),
    ("infrastructure.cluster.x-k8s.io/v1beta2", "DockerCluster"),
    ("infrastructure.cluster.x-k8s.io/v1beta2", "DockerMachineTemplate"),
    ("infrastructure.cluster.x-k8s.io/v1beta2", "AWSCluster"),
    ("infrastructure.cluster.x-k8s.io/v1beta2", "AWSMachineTemplate"),
    ("infrastructure.cluster.x-k8s.io/v1beta1", "RemoteCluster"),
    ("infrastructure.cluster.x-k8s.io/v1beta1", "RemoteMachine"),
    ("bootstrap.cluster.x-k8s.io/v1beta1", "K0sWorkerConfigTemplate"),
    ("bootstrap.cluster.x-k8s.io/v1beta1", "K0sWorkerConfig"),
    ("controlplane.cluster.x-k8s.io/v1beta1", "K0sControlPlane"),
    ("controlplane.cluster.x-k8s.io/v1beta1", "K0smotronControlPlane"),
)


def _key(obj: Manifest | Object) -> tuple[str, str]:
    return obj["kind"], obj["metadata"]["name"]


def desired_objects(rendered: RenderedColony) -> list[Manifest]:
    """Every object of the colony in apply order: clusters' parts first, add-ons last."""
    return [m for c in rendered.clusters for m in c.manifests] + list(rendered.addons)


async def apply_all(kube: Kube, manifests: Iterable[Manifest]) -> int:
    """Server-side apply each manifest; returns how many were applied."""
    count = 0
    for manifest in manifests:
        await kube.apply(manifest)
        count += 1
    return count


async def _owned(kube: Kube, namespace: str, colony: str, api_version: str, kind: str) -> list[Object]:
    return await kube.list(api_version, kind, namespace, label_selector=f"{COLONY_LABEL}={colony}")


async def prune(kube: Kube, namespace: str, colony: str, rendered: RenderedColony) -> list[str]:
    """Delete owned objects that are no longer desired; returns what was deleted (kind/name).

    A removed cluster loses its Cluster first; its other parts go once the Cluster is gone. The
    objects of a cluster kept as it is (refused by policy, RenderedCluster.kept_as_is) stay.
    """
    desired = {_key(m) for m in desired_objects(rendered)}
    kept = {c.cluster_name for c in rendered.clusters if c.kept_as_is}
    deleted: list[str] = []
    clusters = await _owned(kube, namespace, colony, *CAPI_CLUSTER)
    live_cluster_labels = {c["metadata"].get("labels", {}).get(CLUSTER_LABEL) for c in clusters}
    for api_version, kind in (CAPI_CLUSTER, HELM_CHART_PROXY):
        for obj in await _owned(kube, namespace, colony, api_version, kind):
            if obj["metadata"].get("labels", {}).get(CLUSTER_LABEL) in kept:
                continue
            if _key(obj) not in desired and not obj["metadata"].get("deletionTimestamp"):
                await kube.delete(api_version, kind, obj["metadata"]["name"], namespace)
                deleted.append(f"{kind}/{obj['metadata']['name']}")
    for api_version, kind in CLUSTER_PARTS:
        for obj in await _owned(kube, namespace, colony, api_version, kind):
            cluster = obj["metadata"].get("labels", {}).get(CLUSTER_LABEL)
            if _key(obj) in desired or cluster in live_cluster_labels or cluster in kept:
                continue
            await kube.delete(api_version, kind, obj["metadata"]["name"], namespace)
            deleted.append(f"{kind}/{obj['metadata']['name']}")
    return deleted


async def delete_everything(kube: Kube, namespace: str, colony: str) -> list[str]:
    """One step of colony deletion; returns what still exists (empty when done).

    Clusters and add-ons are deleted first; the remaining parts only once every Cluster is gone.
    """
    remaining: list[str] = []
    for api_version, kind in (CAPI_CLUSTER, HELM_CHART_PROXY):
        for obj in await _owned(kube, namespace, colony, api_version, kind):
            remaining.append(f"{kind}/{obj['metadata']['name']}")
            if not obj["metadata"].get("deletionTimestamp"):
                await kube.delete(api_version, kind, obj["metadata"]["name"], namespace)
    if any(r.startswith("Cluster/") for r in remaining):
        return remaining
    for api_version, kind in CLUSTER_PARTS:
        for obj in await _owned(kube, namespace, colony, api_version, kind):
            remaining.append(f"{kind}/{obj['metadata']['name']}")
            if not obj["metadata"].get("deletionTimestamp"):
                await kube.delete(api_version, kind, obj["metadata"]["name"], namespace)
    return remaining
