"""Colony kubeconfigs against real API servers: plugins never run, the operator's own files are never
read, an inline kubeconfig works, and the client cache follows its Secrets."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from colony.devenv.cluster import LocalCluster
from colony.devenv.process import ManagedProcess
from colony.kube import colony_clusters
from colony.kube.colony_clusters import ClusterAccessError, ColonyClusterClients
from colony.kube.config import api_client_from_kubeconfig
from colony.kube.resources import Kube
from tests.integration.conftest import eventually


def _secret(management: LocalCluster, namespace: str, name: str, kubeconfig: dict[str, Any]) -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"value": base64.b64encode(yaml.safe_dump(kubeconfig).encode()).decode()},
    }
    management.kubectl("apply", "-f", "-", input_text=json.dumps(secret))


def _existing_colony(management: LocalCluster, namespace: str, name: str, secret: str) -> None:
    colony = {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "Colony",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "k8sVersion": "v1.36.3",
            "colonyClusters": [
                {"clusterName": "onprem", "existing": {"kubeconfigSecretRef": {"name": secret}}}
            ],
        },
    }
    management.kubectl("apply", "-f", "-", input_text=json.dumps(colony))


def _cluster_phase(management: LocalCluster, namespace: str, name: str, phase: str) -> dict[str, Any] | None:
    colony = management.get_json("colony", name, "-n", namespace)
    clusters = (colony.get("status") or {}).get("clusters") or []
    return colony if clusters and clusters[0]["phase"] == phase else None


def _with_user(kubeconfig: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    changed = json.loads(json.dumps(kubeconfig))
    changed["users"][0]["user"] = user
    return changed


def _service_account_token(cluster: LocalCluster) -> str:
    """A real token of a (cluster-admin) service account of `cluster`: what an operator's mounted
    token looks like to the API server."""
    name = f"sa-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "serviceaccount", name, "-n", "default")
    cluster.kubectl(
        "create",
        "clusterrolebinding",
        name,
        "--clusterrole=cluster-admin",
        f"--serviceaccount=default:{name}",
    )
    return cluster.kubectl("create", "token", name, "-n", "default").stdout.strip()


def test_plugins_and_file_paths_make_the_cluster_unreachable_and_inline_works(
    management: LocalCluster,
    colony_cluster: LocalCluster,
    namespace: str,
    operator_process: ManagedProcess,
    tmp_path: Path,
) -> None:
    inline = yaml.safe_load(colony_cluster.kubeconfig())
    marker = tmp_path / "exec-ran"
    exec_user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "/bin/sh",
            "args": ["-c", f'touch {marker}; echo \'{{"kind":"ExecCredential","status":{{"token":"x"}}}}\''],
            "interactiveMode": "Never",
        }
    }
    # Stands in for /var/run/secrets/kubernetes.io/serviceaccount/token in the operator's pod: a
    # real, valid token the operator can read.
    token_file = tmp_path / "token"
    token_file.write_text(_service_account_token(colony_cluster))
    _secret(management, namespace, "exec-kubeconfig", _with_user(inline, exec_user))
    _secret(management, namespace, "file-kubeconfig", _with_user(inline, {"tokenFile": str(token_file)}))
    _secret(management, namespace, "inline-kubeconfig", inline)
    _existing_colony(management, namespace, "plugin", "exec-kubeconfig")
    _existing_colony(management, namespace, "paths", "file-kubeconfig")
    _existing_colony(management, namespace, "inline", "inline-kubeconfig")

    assert eventually(lambda: _cluster_phase(management, namespace, "inline", "Ready"), 30)
    for colony, field in (("plugin", "user.exec"), ("paths", "user.tokenFile")):
        refused = eventually(lambda c=colony: _cluster_phase(management, namespace, c, "Unreachable"), 30)
        assert field in refused["status"]["clusters"][0]["message"]
        condition = next(c for c in refused["status"]["conditions"] if c["type"] == "ClustersReady")
        assert condition["reason"] == "KubeconfigRefused" and field in condition["message"]
    assert not marker.exists(), "the exec plugin ran"


@pytest.fixture
async def management_kube(management: LocalCluster) -> AsyncIterator[Kube]:
    kube = Kube(await api_client_from_kubeconfig(yaml.safe_load(management.kubeconfig())))
    try:
        yield kube
    finally:
        await kube.api.close()


async def test_a_token_file_is_refused_while_the_same_token_inline_works(
    management: LocalCluster,
    colony_cluster: LocalCluster,
    unwatched_namespace: str,
    management_kube: Kube,
    tmp_path: Path,
) -> None:
    token = _service_account_token(colony_cluster)
    token_file = tmp_path / "token"
    token_file.write_text(token)
    inline = yaml.safe_load(colony_cluster.kubeconfig())
    _secret(management, unwatched_namespace, "by-file", _with_user(inline, {"tokenFile": str(token_file)}))
    _secret(management, unwatched_namespace, "by-value", _with_user(inline, {"token": token}))
    clients = ColonyClusterClients(management_kube)
    try:
        with pytest.raises(ClusterAccessError) as refused:
            await clients.client(unwatched_namespace, "by-file")
        assert refused.value.refused_field == "user.tokenFile"
        assert token not in str(refused.value)
        inventory = await clients.inventory(unwatched_namespace, "by-value")
        assert inventory.ready_nodes > 0
    finally:
        await clients.close()


async def test_the_cache_follows_its_secrets_and_closes_what_it_drops(
    management: LocalCluster,
    colony_cluster: LocalCluster,
    unwatched_namespace: str,
    management_kube: Kube,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(colony_clusters, "CLOSE_GRACE_S", 0.2)
    ns, inline = unwatched_namespace, yaml.safe_load(colony_cluster.kubeconfig())
    _secret(management, ns, "kc", inline)
    _secret(management, ns, "other", inline)
    clients = ColonyClusterClients(management_kube)

    def closed(kube: Kube) -> bool:
        return bool(kube.api.rest_client.pool_manager.closed)

    try:
        first = await clients.client(ns, "kc")
        assert await clients.client(ns, "kc") is first
        await first.list("v1", "Node")

        inline["contexts"][0]["context"]["namespace"] = "rotated"  # a new resourceVersion
        _secret(management, ns, "kc", inline)
        second = await clients.client(ns, "kc")
        assert second is not first and len(clients) == 1
        assert not closed(first)  # a request under way on it may finish
        await asyncio.sleep(0.5)
        assert closed(first) and not closed(second)

        management.kubectl("delete", "secret", "kc", "-n", ns)
        with pytest.raises(ClusterAccessError, match="does not exist"):
            await clients.client(ns, "kc")
        assert len(clients) == 0
        await asyncio.sleep(0.5)
        assert closed(second)

        other = await clients.client(ns, "other")
        clients.forget(ns, ["other"])  # its colony was deleted
        assert len(clients) == 0
        await asyncio.sleep(0.5)
        assert closed(other)
    finally:
        await clients.close()
