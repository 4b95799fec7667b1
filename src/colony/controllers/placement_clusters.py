"""Placement's I/O with colony clusters: which framework resources an API server serves
(discovery, cached briefly), and the copies of placed objects (read, created, deleted)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from colony.controllers.cluster_access import cluster_client
from colony.kube.colony_clusters import ClusterAccessError
from colony.kube.resources import FIELD_MANAGER, Conflict, Kube, KubeApiError
from colony.placement.names import ORIGIN_UID_LABEL

DISCOVERY_TTL_S = 10.0
"""How long what an API server serves is believed (a CRD installed by an add-on shows up after that)."""
READ_TIMEOUT_S = 5.0

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from colony.controllers.context import OperatorContext


class CopyConflict(Exception):
    """An object of the copy's name exists in the colony cluster and is not ours."""


class Discovery:
    """Resources each API server serves per group version, cached for DISCOVERY_TTL_S."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], tuple[float, frozenset[str]]] = {}

    async def resources(self, kube: Kube, api_version: str) -> frozenset[str]:
        """Names of the served resources (and subresources, `plural/status`) of a group version."""
        key = (str(kube.api.configuration.host), api_version)
        cached = self._cache.get(key)
        if cached is not None and time.monotonic() - cached[0] < DISCOVERY_TTL_S:
            return cached[1]
        found: Sequence[dict[str, Any]] | None = None
        async with asyncio.timeout(READ_TIMEOUT_S):
            found = await kube.api_resources(api_version)
        names = frozenset(str(item.get("name")) for item in found or [])
        self._cache[key] = (time.monotonic(), names)
        return names

    async def serves(self, kube: Kube, api_version: str, plural: str) -> bool:
        return plural in await self.resources(kube, api_version)

    async def has_status(self, kube: Kube, api_version: str, plural: str) -> bool:
        return f"{plural}/status" in await self.resources(kube, api_version)


@dataclass
class ColonyAccess:
    """The clients of a colony's Ready clusters (those that could be reached) and why the others
    could not."""

    key: str
    clients: dict[str, Kube] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


async def open_colony(
    context: OperatorContext, colony: Mapping[str, Any], only_ready: bool = True
) -> ColonyAccess:
    """Clients of the Ready clusters of a colony (of all its clusters unless `only_ready`: to delete
    copies from a colony that is being deleted or has failed)."""
    meta = colony["metadata"]
    access = ColonyAccess(f"{meta['namespace']}/{meta['name']}")
    for cluster in (colony.get("status") or {}).get("clusters") or []:
        if only_ready and cluster.get("phase") != "Ready":
            continue
        try:
            access.clients[cluster["name"]] = await cluster_client(
                context, meta["namespace"], meta["name"], cluster["name"], colony
            )
        except (ClusterAccessError, KubeApiError, OSError) as error:
            access.errors[cluster["name"]] = str(error)
    return access


async def serving(discovery: Discovery, access: ColonyAccess, api_version: str, plural: str) -> str | None:
    """None when every Ready cluster of the colony serves the resource; "lacks" when one does not;
    else why it cannot be told."""
    if access.errors:
        cluster, error = sorted(access.errors.items())[0]
        return f"cluster {cluster} unreachable: {error}"
    if not access.clients:
        return "no Ready cluster"
    for cluster, kube in sorted(access.clients.items()):
        try:
            if not await discovery.serves(kube, api_version, plural):
                return "lacks"
        except (KubeApiError, OSError, TimeoutError) as error:
            return f"cluster {cluster} unreadable: {error}"
    return None


async def list_copies(kube: Kube, api_version: str, kind: str) -> dict[str, dict[str, Any]]:
    """Our copies of one kind in a cluster, by the uid of their original."""
    found = await asyncio.wait_for(
        kube.list(api_version, kind, label_selector=ORIGIN_UID_LABEL), READ_TIMEOUT_S
    )
    return {str(c["metadata"]["labels"][ORIGIN_UID_LABEL]): c for c in found}


async def create_copy(kube: Kube, manifest: Mapping[str, Any], update: bool) -> None:
    """Create the copy (its namespace first, when missing); an existing copy of ours is updated
    (server-side apply) when `update`; an object of that name that is not ours is left alone."""
    meta = manifest["metadata"]
    namespace = meta.get("namespace")
    if namespace:
        with contextlib.suppress(Conflict):
            await kube.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                field_manager=FIELD_MANAGER,
            )
    try:
        await kube.create(manifest, field_manager=FIELD_MANAGER)
        return
    except Conflict:
        pass
    existing = await kube.get(manifest["apiVersion"], manifest["kind"], meta["name"], namespace)
    uid = (meta.get("labels") or {}).get(ORIGIN_UID_LABEL)
    if existing is not None and (existing["metadata"].get("labels") or {}).get(ORIGIN_UID_LABEL) != uid:
        raise CopyConflict(
            f"{manifest['kind']} {namespace}/{meta['name']} already exists in the colony and was not "
            "placed from this object"
        )
    if update:
        await kube.apply(manifest)
