"""Clients for colony clusters, built from their kubeconfig Secrets and cached until the Secret
changes (a rotated kubeconfig gets a new client on the next read)."""

from __future__ import annotations

import asyncio
import base64
import binascii
from dataclasses import dataclass

import yaml

from colony.kube.config import api_client_from_kubeconfig
from colony.kube.resources import Kube
from colony.status.inventory import ClusterInventory, inventory_from_nodes

READ_TIMEOUT_S = 5.0


class ClusterAccessError(Exception):
    """A colony cluster cannot be reached; the message says why, for a status condition."""


@dataclass
class _Cached:
    resource_version: str
    kube: Kube


class ColonyClusterClients:
    """One cached client per kubeconfig Secret (namespace, name, key)."""

    def __init__(self, management: Kube) -> None:
        self.management = management
        self._cache: dict[tuple[str, str, str], _Cached] = {}

    async def client(self, namespace: str, secret: str, key: str = "value") -> Kube:
        """The client for the cluster whose kubeconfig is in Secret `namespace/secret`, data `key`."""
        found = await self.management.get("v1", "Secret", secret, namespace)
        if found is None:
            raise ClusterAccessError(f"kubeconfig Secret {namespace}/{secret} does not exist")
        version = found["metadata"]["resourceVersion"]
        cache_key = (namespace, secret, key)
        cached = self._cache.get(cache_key)
        if cached and cached.resource_version == version:
            return cached.kube
        encoded = (found.get("data") or {}).get(key)
        if not encoded:
            raise ClusterAccessError(f"kubeconfig Secret {namespace}/{secret} has no key {key!r}")
        try:
            kubeconfig = yaml.safe_load(base64.b64decode(encoded))
            api = await api_client_from_kubeconfig(kubeconfig)
        except (binascii.Error, yaml.YAMLError, ValueError, KeyError, TypeError, AttributeError) as error:
            raise ClusterAccessError(
                f"kubeconfig in Secret {namespace}/{secret} is invalid: {error}"
            ) from error
        except Exception as error:  # the loaders raise their own ConfigException types
            raise ClusterAccessError(
                f"kubeconfig in Secret {namespace}/{secret} is unusable: {error}"
            ) from error
        if cached:
            await cached.kube.api.close()
        kube = Kube(api)
        self._cache[cache_key] = _Cached(version, kube)
        return kube

    async def inventory(self, namespace: str, secret: str, key: str = "value") -> ClusterInventory:
        """Nodes and GPUs of the cluster; ClusterAccessError when it cannot be read."""
        kube = await self.client(namespace, secret, key)
        try:
            nodes = await asyncio.wait_for(kube.list("v1", "Node"), READ_TIMEOUT_S)
        except TimeoutError as error:
            raise ClusterAccessError(f"the API server did not answer within {READ_TIMEOUT_S:.0f}s") from error
        except Exception as error:
            raise ClusterAccessError(f"listing nodes failed: {_short(error)}") from error
        return inventory_from_nodes(nodes)

    async def close(self) -> None:
        """Close every cached client."""
        for cached in self._cache.values():
            await cached.kube.api.close()
        self._cache.clear()


def _short(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:300] if text else type(error).__name__
