"""Sharing a colony is the admin's decision (issue 16): on real API servers, a tenant's colony that
labels itself `colony.exalsius.ai/shared: "true"` receives no other namespace's GPU request nor
framework object; a cluster-scoped ColonyShare, which a tenant with namespaced edit/admin rights
cannot create, makes it eligible.

The colony cluster here is this module's own (1 node x 8 H100, kwok, PyTorchJob CRD, no Volcano).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from colony.devenv.cluster import LocalCluster
from colony.devenv.environment import start_colony_cluster
from colony.devenv.kwok import GPUNodeSpec
from colony.devenv.process import ManagedProcess
from colony.devenv.tools import Tools
from colony.placement.names import COLONY_ANNOTATION, MESSAGE_ANNOTATION
from colony.scheduling.queueing.objects import reservation_label
from tests.integration.conftest import eventually
from tests.integration.test_chart import render
from tests.integration.test_colony_controller import _apply, _kubeconfig_secret, _phase_is

H100 = "NVIDIA-H100-80GB-HBM3"
LABEL = {"colony.exalsius.ai/shared": "true"}
QUIET_S = 6.0
"""How long a refused request is watched staying refused (several scheduling/placement passes)."""


@pytest.fixture(scope="module")
def shared_cluster(tools: Tools) -> Iterator[LocalCluster]:
    nodes = (GPUNodeSpec("h100", product=H100, gpus=8, gpu_memory_mib=81559, count=1),)
    cluster = start_colony_cluster(tools, "share", nodes, upstream=("kubeflow",), volcano=False)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def victim(management: LocalCluster) -> str:
    """A second tenant namespace, whose work the first tenant tries to pull onto its colony."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    management.kubectl("create", "namespace", name)
    return name


@pytest.fixture
def cleanup(management: LocalCluster) -> Iterator[list[tuple[str, ...]]]:
    objects: list[tuple[str, ...]] = []
    yield objects
    for args in objects:
        management.kubectl("delete", *args, "--ignore-not-found", "--wait=true", "--timeout=60s", check=False)


def _self_labelled_colony(management: LocalCluster, cluster: LocalCluster, namespace: str) -> None:
    """The tenant's colony, price 0, labelled shared by the tenant itself."""
    _kubeconfig_secret(management, namespace, "pool-kubeconfig", cluster.kubeconfig())
    colony = {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "Colony",
        "metadata": {"name": "pool", "labels": LABEL},
        "spec": {
            "k8sVersion": "v1.36.3",
            "colonyClusters": [
                {
                    "clusterName": "onprem",
                    "existing": {"kubeconfigSecretRef": {"name": "pool-kubeconfig"}},
                    "pricePerHour": 0.0,
                }
            ],
        },
    }
    _apply(management, namespace, colony)
    eventually(lambda: _phase_is(management, namespace, "pool", "Ready"), 60)


def _share(name: str, colony_namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "ColonyShare",
        "metadata": {"name": name},
        "spec": {"colony": {"namespace": colony_namespace, "name": "pool"}, **spec},
    }


def _gpr_status(management: LocalCluster, namespace: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = management.get_json("gpr", name, "-n", namespace).get("status") or {}
    return status


def _reserved(cluster: LocalCluster, key: str) -> bool:
    label = reservation_label(key)
    return any(label in (n["metadata"].get("labels") or {}) for n in cluster.get_json("nodes")["items"])


def test_a_self_labelled_colony_gets_no_other_namespaces_gpr_until_an_admin_shares_it(
    management: LocalCluster,
    shared_cluster: LocalCluster,
    namespace: str,
    victim: str,
    operator_process: ManagedProcess,
    cleanup: list[tuple[str, ...]],
) -> None:
    share = f"share-{namespace}"
    cleanup += [("gpr", "--all", "-n", victim), ("colonyshare", share), ("colony", "pool", "-n", namespace)]
    _self_labelled_colony(management, shared_cluster, namespace)
    request = {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "GPUProvisioningRequest",
        "metadata": {"name": "work"},
        "spec": {"gpuShape": "H100", "numberOfGPUNodes": 1, "numberOfGPUs": 8},
    }
    _apply(management, victim, request)
    eventually(lambda: _gpr_status(management, victim, "work").get("phase") == "Queued", 20)
    time.sleep(QUIET_S)
    status = _gpr_status(management, victim, "work")
    assert status.get("phase") == "Queued" and not status.get("colony"), status
    assert not _reserved(shared_cluster, f"{victim}/work")

    # A share for another namespace, or for another colony, changes nothing.
    management.apply([_share(share, namespace, namespaces=[f"{victim}-x"])])
    time.sleep(QUIET_S / 2)
    assert _gpr_status(management, victim, "work").get("phase") == "Queued"

    # The admin shares the colony with the victim's namespace: the request is placed there.
    management.apply([_share(share, namespace, namespaces=[victim])])
    placed = eventually(
        lambda: (s := _gpr_status(management, victim, "work")).get("phase") == "Ready" and s, 30
    )
    assert placed["colony"] == f"{namespace}/pool"
    assert _reserved(shared_cluster, f"{victim}/work")


def test_a_self_labelled_colony_gets_no_other_namespaces_framework_object_until_an_admin_shares_it(
    management: LocalCluster,
    shared_cluster: LocalCluster,
    namespace: str,
    victim: str,
    operator_process: ManagedProcess,
    cleanup: list[tuple[str, ...]],
) -> None:
    policy, share = f"victim-{victim}", f"share-{namespace}"
    cleanup += [
        ("pytorchjobs", "--all", "-n", victim),
        ("placementpolicy", policy),
        ("colonyshare", share),
        ("colony", "pool", "-n", namespace),
    ]
    _self_labelled_colony(management, shared_cluster, namespace)
    management.apply(
        [
            {
                "apiVersion": "infra.exalsius.ai/v1",
                "kind": "PlacementPolicy",
                "metadata": {"name": policy},
                "spec": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": victim}},
                    "kinds": [{"group": "kubeflow.org", "kind": "PyTorchJob"}],
                },
            }
        ]
    )
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "train"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Worker": {
                    "replicas": 1,
                    "restartPolicy": "OnFailure",
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "pytorch",
                                    "image": "busybox",
                                    "env": [{"name": "TOKEN", "value": "victim-secret-value"}],
                                    "resources": {"limits": {"nvidia.com/gpu": "8"}},
                                }
                            ]
                        }
                    },
                }
            }
        },
    }
    _apply(management, victim, job)

    def annotations() -> dict[str, str]:
        found: dict[str, str] = (
            management.get_json("pytorchjob", "train", "-n", victim)["metadata"].get("annotations") or {}
        )
        return found

    eventually(lambda: "no colony can take it" in annotations().get(MESSAGE_ANNOTATION, ""), 30)
    time.sleep(QUIET_S)
    assert COLONY_ANNOTATION not in annotations()
    assert shared_cluster.kubectl("get", "pytorchjob", "train", "-n", victim, check=False).returncode != 0

    management.apply(
        [_share(share, namespace, namespaceSelector={"matchLabels": {"kubernetes.io/metadata.name": victim}})]
    )
    assert eventually(lambda: annotations().get(COLONY_ANNOTATION), 60) == f"{namespace}/pool"
    eventually(
        lambda: (
            shared_cluster.kubectl("get", "pytorchjob", "train", "-n", victim, check=False).returncode == 0
        ),
        30,
    )


def _can(management: LocalCluster, user: str, *args: str) -> bool:
    answer = management.kubectl("auth", "can-i", *args, f"--as={user}", check=False)
    return answer.stdout.strip() == "yes"


def test_a_tenant_cannot_create_a_colony_share_and_the_chart_grants_no_one_but_the_operator(
    management: LocalCluster, tools: Tools, namespace: str
) -> None:
    """A tenant ServiceAccount holding `edit` and `admin` in its namespace cannot create, change or
    delete a ColonyShare (cluster-scoped: a RoleBinding cannot grant it); the chart's own roles only
    let the operator list them."""
    management.kubectl("create", "serviceaccount", "tenant", "-n", namespace)
    for role in ("edit", "admin"):
        management.kubectl(
            "create",
            "rolebinding",
            f"tenant-{role}",
            f"--clusterrole={role}",
            f"--serviceaccount={namespace}:tenant",
            "-n",
            namespace,
        )
    tenant = f"system:serviceaccount:{namespace}:tenant"
    assert _can(management, tenant, "create", "configmaps", "-n", namespace)  # the binding works
    for verb in ("create", "update", "patch", "delete"):
        assert not _can(management, tenant, verb, "colonyshares.infra.exalsius.ai")
        assert not _can(management, tenant, verb, "colonyshares.infra.exalsius.ai", "-n", namespace)

    granted: dict[str, set[str]] = {}
    for doc in render(tools, "colony-system"):
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        for rule in doc.get("rules") or []:
            if "infra.exalsius.ai" in rule.get("apiGroups", []) and (
                {"colonyshares", "*"} & set(rule.get("resources", []))
            ):
                granted.setdefault(doc["metadata"]["name"], set()).update(rule.get("verbs", []))
    assert list(granted.values()) == [{"list"}], granted  # the operator's ClusterRole, nothing else
