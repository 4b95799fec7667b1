"""The colony cluster clients the operator's DDPJobs run on, kept a few seconds, and the GPUs in
use per cluster, counted once for a burst of placements (part of the OperatorContext)."""

from __future__ import annotations

import asyncio
import time
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from colony.controllers.cluster_access import cluster_client
from colony.kube.resources import Kube

if TYPE_CHECKING:
    from colony.controllers.context import OperatorContext

CLIENT_TTL_S = 5.0

# Pods that can hold GPUs: bound to a node and not finished (filtered by the API server too).
_HOLDING_GPUS = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"


async def count_used_gpus(kube: Kube) -> int:
    """GPUs held by pods bound to a node and not finished (pending pods hold nothing yet)."""
    used = 0
    for pod in await kube.list("v1", "Pod", field_selector=_HOLDING_GPUS):
        if not pod["spec"].get("nodeName") or (pod.get("status") or {}).get("phase") in (
            "Succeeded",
            "Failed",
        ):
            continue
        for container in pod["spec"].get("containers", []):
            limits = (container.get("resources") or {}).get("limits") or {}
            used += int(str(limits.get("nvidia.com/gpu", 0)))
    return used


@dataclass
class JobTargets:
    """Clients of (namespace, colony, cluster), each kept `ttl_s` seconds: without them every launch
    and every tracking tick of every job would read the Colony and its kubeconfig Secret again. A
    rotated kubeconfig or a deleted colony is noticed within `ttl_s`; expired entries are dropped,
    so the map holds only the clusters used in the last `ttl_s`."""

    ttl_s: float = CLIENT_TTL_S
    _clients: dict[tuple[str, str, str], tuple[float, Kube]] = field(default_factory=dict)
    _counting: weakref.WeakKeyDictionary[Kube, asyncio.Task[int]] = field(
        default_factory=weakref.WeakKeyDictionary
    )

    async def client(self, context: OperatorContext, namespace: str, colony: str, cluster: str) -> Kube:
        """The client of `cluster` of `colony` (the management cluster's when `colony` is empty)."""
        if not colony:
            return await cluster_client(context, namespace, colony, cluster)
        key, now = (namespace, colony, cluster), time.monotonic()
        hit = self._clients.get(key)
        if hit is not None and now - hit[0] < self.ttl_s:
            return hit[1]
        kube = await cluster_client(context, namespace, colony, cluster)
        for old in [k for k, (at, _) in self._clients.items() if now - at >= self.ttl_s]:
            del self._clients[old]
        self._clients[key] = (now, kube)
        return kube

    def __len__(self) -> int:
        """How many clients are kept."""
        return len(self._clients)

    async def used_gpus(self, kube: Kube) -> int:
        """`count_used_gpus`, with concurrent placements on one cluster sharing one count in flight:
        a burst of jobs makes one list of the cluster's pods, not one each (the pods of the burst
        are not bound yet, so a count started a moment earlier is the same count)."""
        task = self._counting.get(kube)
        if task is None or task.done():
            task = asyncio.create_task(count_used_gpus(kube))
            self._counting[kube] = task
        return await asyncio.shield(task)
