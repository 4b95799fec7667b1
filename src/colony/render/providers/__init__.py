"""Infrastructure providers behind one contract (`InfrastructureProvider`), looked up by name."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from colony.render.providers.aws import AwsProvider
from colony.render.providers.base import InfrastructureProvider, ProviderObjects
from colony.render.providers.docker import DockerProvider
from colony.render.providers.existing import ExistingProvider
from colony.render.providers.remote import RemoteProvider

_ALL: tuple[InfrastructureProvider, ...] = (
    DockerProvider(),
    AwsProvider(),
    RemoteProvider(),
    ExistingProvider(),
)
PROVIDERS: Mapping[str, InfrastructureProvider] = MappingProxyType({p.name: p for p in _ALL})
"""Every provider, by the name of its block in ColonyCluster."""

__all__ = ["PROVIDERS", "InfrastructureProvider", "ProviderObjects"]
