"""Pydantic models of every custom resource: the single source of truth for crds/*.yaml."""

from colony.api.base import ResourceDefinition
from colony.api.colony import COLONY
from colony.api.colonyshare import COLONY_SHARE
from colony.api.ddpjob import DDPJOB
from colony.api.gpr import GPR
from colony.api.gpuqueue import GPUQUEUE
from colony.api.placementpolicy import PLACEMENT_POLICY
from colony.api.workloaddefinition import WORKLOAD_DEFINITION

RESOURCES: tuple[ResourceDefinition, ...] = (
    COLONY,
    DDPJOB,
    GPR,
    GPUQUEUE,
    WORKLOAD_DEFINITION,
    PLACEMENT_POLICY,
    COLONY_SHARE,
)

__all__ = [
    "COLONY",
    "COLONY_SHARE",
    "DDPJOB",
    "GPR",
    "GPUQUEUE",
    "PLACEMENT_POLICY",
    "RESOURCES",
    "WORKLOAD_DEFINITION",
    "ResourceDefinition",
]
