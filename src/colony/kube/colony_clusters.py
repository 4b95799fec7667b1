"""Clients for colony clusters, built from their kubeconfig Secrets (through the safe loader) and
cached while the Secret exists unchanged (a rotated kubeconfig gets a new client on the next read,
a deleted Secret or colony loses its client)."""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Iterable
from dataclasses import dataclass

import yaml

from colony import settings
from colony.kube.config import api_client_from_kubeconfig
from colony.kube.reachability import Reachability, ServerUnreachable, guard_requests
from colony.kube.resources import Kube
from colony.kube.safe_kubeconfig import KubeconfigError, RefusedKubeconfigField, yaml_error_position
from colony.status.inventory import ClusterInventory, inventory_from_nodes

READ_TIMEOUT_S = 5.0
CLOSE_GRACE_S = 30.0
"""How long a dropped client stays open for requests already under way on it."""


class ClusterAccessError(Exception):
    """A colony cluster cannot be reached; the message says why, for a status condition.
    `refused_field`: the kubeconfig field the operator refused to use (exec, tokenFile...), if that
    is why."""

    def __init__(self, message: str, refused_field: str | None = None) -> None:
        super().__init__(message)
        self.refused_field = refused_field


@dataclass
class _Cached:
    resource_version: str
    kube: Kube
    reachability: Reachability


class ColonyClusterClients:
    """One cached client per kubeconfig Secret (namespace, name, key).

    An entry lives while its Secret does, unchanged: a Secret found deleted (or without the key)
    drops it, a new resourceVersion replaces it, and `forget` drops the entries of a deleted colony.
    A dropped client is closed CLOSE_GRACE_S later, so that a request already under way on it (a
    caller may hold the client for a few seconds) finishes; `close` closes everything at once.
    Each client fails fast while its API server is marked unreachable (kube/reachability.py): a
    hung colony costs the loops one request bound, not one per call.
    `allow_unsafe`: COLONY_ALLOW_UNSAFE_KUBECONFIGS (see kube.safe_kubeconfig).
    """

    def __init__(self, management: Kube, *, allow_unsafe: bool | None = None) -> None:
        self.management = management
        self.allow_unsafe = settings.allow_unsafe_kubeconfigs() if allow_unsafe is None else allow_unsafe
        self._cache: dict[tuple[str, str, str], _Cached] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._cache)

    async def client(self, namespace: str, secret: str, key: str = "value") -> Kube:
        """The client for the cluster whose kubeconfig is in Secret `namespace/secret`, data `key`."""
        found = await self.management.get("v1", "Secret", secret, namespace)
        cache_key = (namespace, secret, key)
        if found is None:
            self._drop(cache_key)
            raise ClusterAccessError(f"kubeconfig Secret {namespace}/{secret} does not exist")
        version = found["metadata"]["resourceVersion"]
        cached = self._cache.get(cache_key)
        if cached and cached.resource_version == version:
            try:
                cached.reachability.check()
            except ServerUnreachable as error:
                raise ClusterAccessError(str(error)) from None
            return cached.kube
        self._drop(cache_key)
        encoded = (found.get("data") or {}).get(key)
        if not encoded:
            raise ClusterAccessError(f"kubeconfig Secret {namespace}/{secret} has no key {key!r}")
        where = f"kubeconfig in Secret {namespace}/{secret}"
        try:
            kubeconfig = yaml.safe_load(base64.b64decode(encoded))
        except (binascii.Error, ValueError, yaml.YAMLError) as error:
            # a YAML error quotes the Secret's lines: only its position goes into status
            at = yaml_error_position(error)
            raise ClusterAccessError(f"{where} is invalid: not base64-encoded YAML{at}") from None
        try:
            api = await api_client_from_kubeconfig(kubeconfig, allow_unsafe=self.allow_unsafe)
        except RefusedKubeconfigField as refused:
            raise ClusterAccessError(f"{where} cannot be used: {refused}", refused.field) from None
        except KubeconfigError as error:
            raise ClusterAccessError(f"{where} is invalid: {error}") from None
        kube = Kube(api)
        self._drop(cache_key)  # one a concurrent call built meanwhile, else it would never be closed
        self._cache[cache_key] = _Cached(version, kube, guard_requests(api))
        return kube

    def reachability(self, namespace: str, secret: str, key: str = "value") -> Reachability | None:
        """Whether the cluster of a cached client answers (None: no client is cached)."""
        cached = self._cache.get((namespace, secret, key))
        return None if cached is None else cached.reachability

    def forget(self, namespace: str, secrets: Iterable[str]) -> None:
        """Drop (and close, after the grace) the clients of these kubeconfig Secrets, every key:
        their colony is gone."""
        names = set(secrets)
        for cache_key in [k for k in self._cache if k[0] == namespace and k[1] in names]:
            self._drop(cache_key)

    def _drop(self, cache_key: tuple[str, str, str]) -> None:
        cached = self._cache.pop(cache_key, None)
        if cached is not None:
            task = asyncio.get_running_loop().create_task(_close_later(cached))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

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
        for task in list(self._closing):
            task.cancel()  # each closes its client as it is cancelled
        await asyncio.gather(*self._closing, return_exceptions=True)
        for cached in self._cache.values():
            await cached.reachability.close()
            await cached.kube.api.close()
        self._cache.clear()


async def _close_later(cached: _Cached) -> None:
    """Close a dropped client after CLOSE_GRACE_S (at once when cancelled)."""
    try:
        await asyncio.sleep(CLOSE_GRACE_S)
    finally:
        await cached.reachability.close()
        await cached.kube.api.close()


def _short(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:300] if text else type(error).__name__
