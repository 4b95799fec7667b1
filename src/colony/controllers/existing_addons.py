"""Add-ons on `existing` colony clusters: helm install/upgrade/uninstall in background tasks.

Handlers never wait for helm: `observe` reads the releases (one `helm list` per cluster), starts
an install/upgrade task for every planned release that is missing or out of date and an uninstall
task for every release of the colony that is no longer planned, and reports what it saw. A failed
helm run is reported (not ready, with helm's message) and retried after RETRY_S, not in a loop.
The next status refresh (timer) sees the tasks' results.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import time
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from colony.kube.helm import HelmClient, Release, UnsafeKubeconfig
from colony.kube.resources import Kube
from colony.kube.safe_kubeconfig import yaml_error_position
from colony.render.contract import ColonyRef, RenderedCluster
from colony.render.existing_addons import HelmReleasePlan
from colony.scheduling.cleanup import DELETE_RETRY_DELAY_S, gives_up

RETRY_S = 30.0
CONCURRENT_HELM_RUNS = 4
_log = logging.getLogger(__name__)

_Key = tuple[str, str, str, str]
"""(colony uid, cluster, release namespace, release name)."""


@dataclass(frozen=True)
class ReleaseObservation:
    """The state of one planned release on one existing cluster."""

    helm_chart_proxy: str
    cluster: str
    ready: bool
    message: str


@dataclass
class _Failure:
    spec_hash: str
    at: float
    message: str


@dataclass
class Removal:
    """One step of removing a colony's add-ons: the releases still to go (wait for them), and those
    given up in this step (their uninstall failed DELETE_RETRIES times: colony.scheduling.cleanup),
    each with helm's last message."""

    remaining: list[str] = field(default_factory=list)
    abandoned: dict[str, str] = field(default_factory=dict)


class ExistingClusterAddons:
    """The operator's helm runs on existing clusters, one background task per release at most."""

    def __init__(self, management: Kube, helm: Path | None) -> None:
        self.management = management
        self.helm = helm
        self._tasks: dict[_Key, asyncio.Task[None]] = {}
        self._installing: set[_Key] = set()
        self._applied: dict[_Key, str] = {}
        self._failures: dict[_Key, _Failure] = {}
        self._uninstall_tries: dict[_Key, int] = {}
        """Uninstalls started per release of a colony being deleted, bounded by DELETE_RETRIES."""
        self._uninstall_ended: dict[_Key, float] = {}
        """When the last uninstall of a release ended (the next waits DELETE_RETRY_DELAY_S)."""
        self._abandoned: set[_Key] = set()
        self._runs = asyncio.Semaphore(CONCURRENT_HELM_RUNS)

    async def observe(
        self,
        colony: ColonyRef,
        clusters: Sequence[RenderedCluster],
        plans: Sequence[HelmReleasePlan],
    ) -> list[ReleaseObservation]:
        """Converge each existing cluster towards `plans` (in the background) and report."""
        observations: list[ReleaseObservation] = []
        for cluster in clusters:
            if cluster.capi_cluster_name is not None or cluster.problems:
                continue
            mine = [p for p in plans if p.cluster == cluster.cluster_name]
            observations += await self._observe_cluster(colony, cluster, mine)
        return observations

    async def _observe_cluster(
        self, colony: ColonyRef, cluster: RenderedCluster, plans: Sequence[HelmReleasePlan]
    ) -> list[ReleaseObservation]:
        def every(ready: bool, message: str) -> list[ReleaseObservation]:
            return [ReleaseObservation(p.helm_chart_proxy, p.cluster, ready, message) for p in plans]

        client, error = await self._client(colony.namespace, cluster)
        if client is None:
            return every(False, f"cluster {cluster.cluster_name}: {error}")
        try:
            owned = {(r.namespace, r.name): r for r in await client.releases(colony.uid)}
        except Exception as failure:  # helm's errors carry its stderr
            return every(False, f"cluster {cluster.cluster_name}: helm list failed: {_short(failure)}")
        result = [await self._observe_release(colony, client, plan, owned) for plan in plans]
        planned = {(p.namespace, p.release_name) for p in plans}
        for (namespace, name), release in owned.items():
            if (namespace, name) not in planned and release.status != "uninstalling":
                key = (colony.uid, cluster.cluster_name, namespace, name)
                self._start(key, client.uninstall(name, namespace))
        return result

    async def _observe_release(
        self,
        colony: ColonyRef,
        client: HelmClient,
        plan: HelmReleasePlan,
        owned: Mapping[tuple[str, str], Release],
    ) -> ReleaseObservation:
        key = (colony.uid, plan.cluster, plan.namespace, plan.release_name)

        def seen(ready: bool, message: str) -> ReleaseObservation:
            return ReleaseObservation(plan.helm_chart_proxy, plan.cluster, ready, message)

        if key in self._tasks:
            return seen(False, f"helm is installing {plan.release_name} on {plan.cluster}")
        release = owned.get((plan.namespace, plan.release_name))
        if release is not None and self._applied.get(key) != plan.spec_hash:
            try:  # after a restart: the release label tells whether it is up to date
                matching = await client.releases(colony.uid, plan.spec_hash)
                if any((r.namespace, r.name) == (plan.namespace, plan.release_name) for r in matching):
                    self._applied[key] = plan.spec_hash
            except Exception as error:
                return seen(False, f"helm list failed on {plan.cluster}: {_short(error)}")
        current = release is not None and self._applied.get(key) == plan.spec_hash
        if current and release is not None and release.status == "deployed":
            return seen(True, f"{release.chart} deployed on {plan.cluster}")
        last = self._failures.get(key)
        if last and last.spec_hash == plan.spec_hash and time.monotonic() - last.at < RETRY_S:
            return seen(False, f"helm failed on {plan.cluster}: {last.message}")
        self._start(key, self._install(key, client, plan, colony.uid), spec_hash=plan.spec_hash)
        return seen(False, f"helm is installing {plan.release_name} on {plan.cluster}")

    async def _install(self, key: _Key, client: HelmClient, plan: HelmReleasePlan, uid: str) -> None:
        status = await client.install_or_upgrade(plan, uid)
        if status != "deployed":
            raise RuntimeError(f"release {plan.release_name} is {status}")
        self._applied[key] = plan.spec_hash

    def _start(self, key: _Key, work: Coroutine[Any, Any, None], spec_hash: str | None = None) -> None:
        """Run `work` in the background unless a task for `key` is running; `spec_hash`: the
        plan being installed (None for an uninstall)."""
        if key in self._tasks:
            work.close()
            return
        if spec_hash is not None:
            self._installing.add(key)
        self._tasks[key] = asyncio.create_task(self._run(key, work, spec_hash or ""))

    async def _run(self, key: _Key, work: Coroutine[Any, Any, None], spec_hash: str) -> None:
        try:
            async with self._runs:
                await work
            self._failures.pop(key, None)
        except asyncio.CancelledError:
            raise
        except Exception as failure:
            message = _short(failure)
            _log.warning("helm on %s failed for %s/%s: %s", key[1], key[2], key[3], message)
            self._failures[key] = _Failure(spec_hash, time.monotonic(), message)
            self._applied.pop(key, None)
        finally:
            if not spec_hash:  # an uninstall
                self._uninstall_ended[key] = time.monotonic()
            self._tasks.pop(key, None)
            self._installing.discard(key)

    async def remove(self, colony: ColonyRef, clusters: Iterable[RenderedCluster]) -> Removal:
        """One step of deleting the colony: uninstall its releases; what remains (empty: done).

        A cluster that cannot be reached any more is skipped: its releases cannot be removed. A
        release still there after DELETE_RETRIES uninstalls (failed with any error, or "succeeded"
        and left it: colony.scheduling.cleanup) is given up, reported once in `abandoned`, and no
        longer waited for; each uninstall starts DELETE_RETRY_DELAY_S after the last one ended.
        """
        installs = [t for k, t in self._tasks.items() if k[0] == colony.uid and k in self._installing]
        for task in installs:
            task.cancel()
        await asyncio.gather(*installs, return_exceptions=True)
        removal = Removal()
        for cluster in clusters:
            if cluster.capi_cluster_name is not None:
                continue
            client, error = await self._client(colony.namespace, cluster)
            if client is None:
                _log.warning("cannot uninstall add-ons of cluster %s: %s", cluster.cluster_name, error)
                continue
            try:
                releases = await client.releases(colony.uid)
            except Exception as failure:
                _log.warning("cannot list add-ons of cluster %s: %s", cluster.cluster_name, _short(failure))
                continue
            for release in releases:
                name = f"HelmRelease/{cluster.cluster_name}/{release.namespace}/{release.name}"
                key = (colony.uid, cluster.cluster_name, release.namespace, release.name)
                if key not in self._tasks and gives_up(self._uninstall_tries.get(key, 0)):
                    if key not in self._abandoned:
                        self._abandoned.add(key)
                        last = self._failures.get(key)
                        removal.abandoned[name] = last.message if last else "still installed after uninstall"
                    continue
                removal.remaining.append(name)
                ended = self._uninstall_ended.get(key)
                if key not in self._tasks and (
                    ended is None or time.monotonic() - ended >= DELETE_RETRY_DELAY_S
                ):
                    self._uninstall_tries[key] = self._uninstall_tries.get(key, 0) + 1
                    self._start(key, client.uninstall(release.name, release.namespace))
        return removal

    def forget(self, uid: str) -> None:
        """Drop what is kept about a colony that is gone (its uid)."""
        for kept in (self._applied, self._failures, self._uninstall_tries, self._uninstall_ended):
            for key in [k for k in kept if k[0] == uid]:
                del kept[key]
        self._abandoned = {k for k in self._abandoned if k[0] != uid}

    async def _client(self, namespace: str, cluster: RenderedCluster) -> tuple[HelmClient | None, str]:
        if self.helm is None:
            return None, "no helm binary (set COLONY_HELM or put helm on PATH)"
        secret = await self.management.get("v1", "Secret", cluster.kubeconfig_secret, namespace)
        if secret is None:
            return None, f"kubeconfig Secret {namespace}/{cluster.kubeconfig_secret} does not exist"
        encoded = (secret.get("data") or {}).get(cluster.kubeconfig_key)
        if not encoded:
            return None, f"kubeconfig Secret {namespace}/{cluster.kubeconfig_secret} has no key"
        return kubeconfig_client(
            self.helm, encoded, f"kubeconfig in Secret {namespace}/{cluster.kubeconfig_secret}"
        )

    async def close(self) -> None:
        """Cancel every running helm task."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def kubeconfig_client(helm: Path, encoded: str, where: str) -> tuple[HelmClient | None, str]:
    """A HelmClient for a kubeconfig Secret's value, or why not. The message goes into
    status.addons, which the tenant and everyone who may read the colony sees: a YAML error gives
    only its line (its own text quotes the Secret's lines, tokens included)."""
    try:
        kubeconfig = yaml.safe_load(base64.b64decode(encoded))
    except (binascii.Error, ValueError, yaml.YAMLError) as error:
        return None, f"{where} is invalid: not base64-encoded YAML{yaml_error_position(error)}"
    try:
        return HelmClient(helm, kubeconfig), ""
    except (UnsafeKubeconfig, AttributeError) as error:
        return None, f"{where} is refused: {error}"


def _short(error: BaseException) -> str:
    stderr = getattr(error, "stderr", None)
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else str(error)
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else type(error).__name__
