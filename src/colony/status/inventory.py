"""GPU inventory of a cluster, computed from its Node objects."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from colony.gpu import GPU_PRODUCT_LABEL, GPU_RESOURCE

UNKNOWN_PRODUCT = "unknown"


@dataclass(frozen=True)
class GPUCount:
    """GPUs of one product in a cluster."""

    product: str
    capacity: int
    allocatable: int

    def to_status(self) -> dict[str, Any]:
        return {"product": self.product, "capacity": self.capacity, "allocatable": self.allocatable}


@dataclass(frozen=True)
class ClusterInventory:
    """Nodes and GPUs of one cluster."""

    total_nodes: int
    ready_nodes: int
    gpus: tuple[GPUCount, ...]

    @property
    def gpu_capacity(self) -> int:
        return sum(g.capacity for g in self.gpus)

    @property
    def gpu_allocatable(self) -> int:
        return sum(g.allocatable for g in self.gpus)


def _quantity(resources: Mapping[str, Any] | None) -> int:
    try:
        return int(str((resources or {}).get(GPU_RESOURCE, "0")))
    except ValueError:
        return 0


def _is_ready(node: Mapping[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def inventory_from_nodes(nodes: Iterable[Mapping[str, Any]]) -> ClusterInventory:
    """Count nodes, Ready nodes and GPUs by product (capacity; allocatable of Ready nodes only)."""
    total = ready = 0
    capacity: dict[str, int] = {}
    allocatable: dict[str, int] = {}
    for node in nodes:
        total += 1
        node_ready = _is_ready(node)
        ready += node_ready
        status = node.get("status") or {}
        gpus = _quantity(status.get("capacity"))
        if not gpus:
            continue
        product = ((node.get("metadata") or {}).get("labels") or {}).get(GPU_PRODUCT_LABEL, UNKNOWN_PRODUCT)
        capacity[product] = capacity.get(product, 0) + gpus
        usable = _quantity(status.get("allocatable")) if node_ready else 0
        allocatable[product] = allocatable.get(product, 0) + usable
    counts = tuple(GPUCount(p, capacity[p], allocatable.get(p, 0)) for p in sorted(capacity))
    return ClusterInventory(total_nodes=total, ready_nodes=ready, gpus=counts)
