"""Several independent clusters run at once, and stopping one leaves no process behind."""

from __future__ import annotations

import json
import os

from colony.devenv.cluster import LocalCluster
from colony.devenv.tools import Tools
from tests.integration.conftest import eventually


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is gone once reaped, which stop() does.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split()[2] != "Z"


def test_clusters_are_independent(management: LocalCluster, colony_cluster: LocalCluster) -> None:
    assert management.server != colony_cluster.server
    colony_cluster.kubectl("create", "namespace", "only-in-colony")
    namespaces = management.kubectl("get", "namespaces", "-o", "name").stdout
    assert "only-in-colony" not in namespaces
    version = json.loads(management.kubectl("get", "--raw", "/version").stdout)
    assert version["gitVersion"].startswith("v1.36.")


def test_stop_leaves_no_processes(tools: Tools) -> None:
    cluster = LocalCluster("short-lived", tools, scheduler=True, controller_manager=False, kwok=True)
    workdir = cluster.workdir
    with cluster:
        pids = [p.pid for p in cluster._processes if p.pid]
        assert len(pids) == 4  # etcd, kube-apiserver, kube-scheduler, kwok
        assert all(_alive(pid) for pid in pids)
        cluster.kubectl("get", "namespaces")
    assert not any(_alive(pid) for pid in pids)
    assert not workdir.exists()


def test_management_cluster_collects_garbage(management: LocalCluster, namespace: str) -> None:
    """kube-controller-manager runs: dependents of a deleted owner are garbage-collected."""
    management.kubectl("create", "configmap", "owner", "-n", namespace)
    owner_uid = management.get_json("configmap", "owner", "-n", namespace)["metadata"]["uid"]
    dependent = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "dependent",
            "namespace": namespace,
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner_uid}],
        },
    }
    management.apply([dependent])
    management.kubectl("delete", "configmap", "owner", "-n", namespace)

    def collected() -> bool:
        result = management.kubectl("get", "configmap", "dependent", "-n", namespace, check=False)
        return result.returncode != 0 and "NotFound" in result.stderr

    eventually(collected, 30)
