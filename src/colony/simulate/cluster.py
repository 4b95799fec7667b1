"""The synthetic cluster and queues a trace is replayed on, and how trace jobs become gang requests.

Gangs: a trace job of G GPUs becomes a request for `ceil(G / gpus_per_node)` nodes x
`min(G, gpus_per_node)` GPUs each. When G > gpus_per_node and is not a multiple of it, the gang is
rounded up (12 GPUs on 8-GPU nodes take 2 x 8) and the allocated GPUs count as busy. A job whose gang
cannot fit on the empty cluster is dropped (and counted) before the replay.

Cluster: `gpus` GPUs on full nodes of `gpus_per_node` (plus one smaller node with the remainder), all
of one colony "sim" and one GPU type: the trace's, if all its jobs that name one name the same, else
"generic". Requests accept any GPU type: on a homogeneous cluster the type constrains nothing.

Queues: for the "default", "shortest" and "sjf" orders, one QueueQuota per tenant, all in one cohort, with
nominal quota an equal share of the cluster (the first tenants, by name, get one GPU more when it
does not divide), so idle tenants' quota is lent to busy ones and reclaimed when they need it. No
queues (no quota) for "fifo" and "priority".
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from colony.scheduling.queueing.model import (
    ANY_GPU_TYPE,
    RESERVATION_ORDERS,
    ColonyInfo,
    GpuNode,
    GpuRequest,
    QueueOrder,
    QueueQuota,
)
from colony.simulate.trace import TraceJob

SIM_COLONY = "sim"
SIM_COHORT = "sim"
GENERIC_GPU_TYPE = "generic"


@dataclass(frozen=True)
class SimCluster:
    """A homogeneous cluster of `gpus` GPUs on nodes of `gpus_per_node` GPUs."""

    gpus: int
    gpus_per_node: int = 8
    gpu_type: str = GENERIC_GPU_TYPE

    def __post_init__(self) -> None:
        if self.gpus < 1 or self.gpus_per_node < 1:
            raise ValueError("a cluster needs gpus >= 1 and gpus_per_node >= 1")

    @classmethod
    def for_trace(cls, jobs: Iterable[TraceJob], gpus: int, gpus_per_node: int = 8) -> SimCluster:
        """A cluster of the trace's single GPU type (or "generic" when it names none or several)."""
        types = {job.gpu_type for job in jobs if job.gpu_type}
        gpu_type = types.pop() if len(types) == 1 else GENERIC_GPU_TYPE
        return cls(gpus=gpus, gpus_per_node=gpus_per_node, gpu_type=gpu_type)

    @property
    def node_capacities(self) -> tuple[int, ...]:
        """GPUs of each node: full nodes, then the remainder, if any."""
        full, rest = divmod(self.gpus, self.gpus_per_node)
        return (self.gpus_per_node,) * full + ((rest,) if rest else ())

    def nodes(self) -> tuple[GpuNode, ...]:
        """The cluster's nodes, named node-000, node-001, ..."""
        return tuple(
            GpuNode(colony=SIM_COLONY, name=f"node-{i:03d}", gpu_type=self.gpu_type, capacity=capacity)
            for i, capacity in enumerate(self.node_capacities)
        )

    def colonies(self) -> tuple[ColonyInfo, ...]:
        """The one colony all nodes belong to."""
        return (ColonyInfo(name=SIM_COLONY),)

    def gang(self, gpus: int) -> tuple[int, int]:
        """(nodes, gpus_per_node) of the gang a job of `gpus` GPUs runs as."""
        return math.ceil(gpus / self.gpus_per_node), min(gpus, self.gpus_per_node)

    def fits(self, gpus: int) -> bool:
        """Whether a job of `gpus` GPUs fits on the empty cluster."""
        nodes, per_node = self.gang(gpus)
        return sum(1 for capacity in self.node_capacities if capacity >= per_node) >= nodes


def tenant_queues(tenants: Iterable[str], cluster_gpus: int) -> tuple[QueueQuota, ...]:
    """One queue per tenant in one cohort, nominal quota an equal share of `cluster_gpus`."""
    names = sorted(set(tenants))
    if not names:
        return ()
    share, extra = divmod(cluster_gpus, len(names))
    return tuple(
        QueueQuota(name=name, nominal={ANY_GPU_TYPE: share + (1 if i < extra else 0)}, cohort=SIM_COHORT)
        for i, name in enumerate(names)
    )


def to_request(job: TraceJob, cluster: SimCluster, order: QueueOrder) -> GpuRequest:
    """The gang request of a trace job; charged to its tenant's queue under the reservation orders
    ("default", "shortest", "sjf")."""
    nodes, per_node = cluster.gang(job.gpus)
    return GpuRequest(
        key=job.job_id,
        queue=job.tenant if order in RESERVATION_ORDERS else "",
        priority=job.priority,
        submitted_s=job.submit_time_s,
        gpu_types=(),
        nodes=nodes,
        gpus_per_node=per_node,
        duration_s=job.duration_s,
        evictable=job.evictable,
    )
