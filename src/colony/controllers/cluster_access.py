"""Clients of the clusters a colony is made of (through their kubeconfig Secrets)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from colony.api import COLONY
from colony.api.colony import ColonySpec
from colony.kube.colony_clusters import ClusterAccessError
from colony.kube.resources import Kube
from colony.render.colony import render_colony
from colony.render.contract import ColonyRef

MANAGEMENT = "management"
"""The cluster name of workloads that run on the management cluster itself (no colony)."""

if TYPE_CHECKING:
    from colony.controllers.context import OperatorContext


async def cluster_client(
    context: OperatorContext,
    namespace: str,
    colony: str,
    cluster: str,
    body: Mapping[str, Any] | None = None,
) -> Kube:
    """The client of one cluster of a colony (through its kubeconfig Secret); `body`: the Colony
    as the caller just read it (else it is read here)."""
    if not colony:
        return context.kube
    if body is None:
        body = await context.kube.get(COLONY.api_version, COLONY.kind, colony, namespace)
    if body is None:
        raise ClusterAccessError(f"colony {colony} no longer exists")
    spec = ColonySpec.model_validate(body["spec"])
    rendered = render_colony(ColonyRef(colony, namespace, body["metadata"]["uid"]), spec, {})
    target = next((c for c in rendered.clusters if c.cluster_name == cluster), None)
    if target is None:
        raise ClusterAccessError(f"colony {colony} has no cluster {cluster}")
    client: Kube = await context.colony_clients.client(
        namespace, target.kubeconfig_secret, target.kubeconfig_key
    )
    return client


def kubeconfig_secrets(body: Mapping[str, Any]) -> list[str]:
    """The kubeconfig Secrets of a colony's clusters (none when its spec cannot be rendered)."""
    meta = body.get("metadata") or {}
    try:
        spec = ColonySpec.model_validate(body.get("spec") or {})
        rendered = render_colony(ColonyRef(meta["name"], meta["namespace"], meta.get("uid", "")), spec, {})
    except (ValueError, KeyError):
        return []
    return [c.kubeconfig_secret for c in rendered.clusters]
