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


def _ddpjob_status(management: LocalCluster, namespace: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = management.get_json("ddpjob", name, "-n", namespace).get("status") or {}
    return status


def _wait_until_shared(
    management: LocalCluster, shared_cluster: LocalCluster, tenant: str, colony_namespace: str
) -> None:
    """Wait until the scheduler sees the share: a probe request of `tenant` (no auto-provisioning)
    is placed on the shared colony, then released. A DDPJob's own request auto-provisions, so it
    must not arrive before the share is in effect."""
    probe = {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "GPUProvisioningRequest",
        "metadata": {"name": "share-probe"},
        "spec": {"gpuShape": "H100", "numberOfGPUNodes": 1, "numberOfGPUs": 1},
    }
    _apply(management, tenant, probe)
    try:
        eventually(lambda: _gpr_status(management, tenant, "share-probe").get("phase") == "Ready", 30)
    except AssertionError as error:  # say why: the request's reason, and the labels on the node
        labels = [n["metadata"].get("labels") for n in shared_cluster.get_json("nodes")["items"]]
        status = _gpr_status(management, tenant, "share-probe")
        raise AssertionError(f"{error}; request: {status}; node labels: {labels}") from None
    placed = eventually(
        lambda: (s := _gpr_status(management, tenant, "share-probe")).get("phase") == "Ready" and s, 30
    )
    assert placed["colony"] == f"{colony_namespace}/pool"
    management.kubectl("delete", "gpr", "share-probe", "-n", tenant, "--wait=true", "--timeout=30s")
    eventually(lambda: not _reserved(shared_cluster, f"{tenant}/share-probe"), 30)


def test_a_gpu_types_job_admitted_on_a_shared_colony_runs_there_and_is_cleaned_up_there(
    management: LocalCluster,
    shared_cluster: LocalCluster,
    namespace: str,
    victim: str,
    operator_process: ManagedProcess,
    cleanup: list[tuple[str, ...]],
) -> None:
    """Issue 17, "Shared colonies": a DDPJob with gpuTypes in the tenant namespace `victim`, whose GPU
    request the scheduler admits onto colony `pool` of `namespace` (shared by the admin), is launched
    on that colony's cluster and records its namespace; it never goes to the tenant's own colony of
    the same name (here broken: a job looking it up instead would fail there). Deleting the job
    removes its pods from the shared colony."""
    share = f"share-{namespace}"
    cleanup += [
        ("ddpjob", "--all", "-n", victim),
        ("gpr", "--all", "-n", victim),
        ("colonyshare", share),
        ("colony", "pool", "-n", namespace),
        ("colony", "pool", "-n", victim),
    ]
    _self_labelled_colony(management, shared_cluster, namespace)
    _kubeconfig_secret(management, victim, "pool-kubeconfig", "this: is: not a kubeconfig")
    own = {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "Colony",
        "metadata": {"name": "pool"},
        "spec": {
            "k8sVersion": "v1.36.3",
            "colonyClusters": [
                {"clusterName": "onprem", "existing": {"kubeconfigSecretRef": {"name": "pool-kubeconfig"}}}
            ],
        },
    }
    _apply(management, victim, own)
    management.apply([_share(share, namespace, namespaces=[victim])])
    _wait_until_shared(management, shared_cluster, victim, namespace)
    job = {
        "apiVersion": "training.exalsius.ai/v1",
        "kind": "DDPJob",
        "metadata": {"name": "train"},
        "spec": {
            "gpuTypes": ["H100"],
            "parallelism": 1,
            "nprocPerNode": 2,
            "gangScheduler": "default",
            "image": "busybox",
            "scriptPath": "/app/train.py",
        },
    }
    _apply(management, victim, job)

    placed = eventually(
        lambda: (
            (s := _ddpjob_status(management, victim, "train")).get("phase") in ("Scheduling", "Running") and s
        ),
        60,
    )
    assert (placed["colony"], placed["colonyNamespace"], placed["cluster"]) == ("pool", namespace, "onprem")
    assert placed["gpuRequest"] == "train-gpus"
    assert _gpr_status(management, victim, "train-gpus")["colony"] == f"{namespace}/pool"
    assert _reserved(shared_cluster, f"{victim}/train-gpus")

    selector = "training.exalsius.ai/job-name=train"

    def pods() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = shared_cluster.get_json("pods", "-n", victim, "-l", selector)["items"]
        return found

    (pod,) = eventually(pods, 30)
    assert pod["spec"]["nodeSelector"][placed["reservationLabel"]] == "2"
    eventually(lambda: _ddpjob_status(management, victim, "train").get("phase") == "Running", 60)
    assert eventually(lambda: all(p["spec"].get("nodeName") for p in pods()) and pods(), 30)

    management.kubectl("delete", "ddpjob", "train", "-n", victim, "--wait=true", "--timeout=60s")
    eventually(lambda: not pods(), 30)
    events = management.kubectl("get", "events", "-n", victim, "-o", "json").stdout
    assert "CleanupAbandoned" not in events


def test_a_ledger_entry_comes_off_even_when_no_request_wants_the_colony(
    management: LocalCluster,
    shared_cluster: LocalCluster,
    namespace: str,
    operator_process: ManagedProcess,
    cleanup: list[tuple[str, ...]],
) -> None:
    """A label whose removal failed is recorded in the colony's ledger; the scheduler reads that
    colony (no request needs to want it) and takes the label off, then clears the entry."""
    cleanup += [("colony", "pool", "-n", namespace)]
    _self_labelled_colony(management, shared_cluster, namespace)
    label = reservation_label(f"{namespace}/gone-request")
    shared_cluster.kubectl("label", "node", "h100-0", f"{label}=4")
    ledger = "stale." + label
    management.kubectl("annotate", "colony", "pool", "-n", namespace, f"{ledger}=onprem/h100-0")

    def node_labels() -> dict[str, str]:
        found: dict[str, str] = shared_cluster.get_json("node", "h100-0")["metadata"]["labels"]
        return found

    eventually(lambda: label not in node_labels(), 30)
    annotations = lambda: management.get_json("colony", "pool", "-n", namespace)["metadata"]["annotations"]  # noqa: E731
    eventually(lambda: ledger not in annotations(), 30)


def test_a_deleted_colony_takes_the_labels_of_its_requests_off_its_existing_cluster(
    management: LocalCluster,
    shared_cluster: LocalCluster,
    namespace: str,
    operator_process: ManagedProcess,
    cleanup: list[tuple[str, ...]],
) -> None:
    """The cluster outlives its colony: deleting the colony takes the reservation labels of the
    requests placed through it off the cluster's nodes (else a colony registered later on the same
    cluster would count those GPUs as occupied forever)."""
    cleanup += [("gpr", "--all", "-n", namespace), ("colony", "pool", "-n", namespace)]
    _self_labelled_colony(management, shared_cluster, namespace)
    request = {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "GPUProvisioningRequest",
        "metadata": {"name": "holder"},
        "spec": {"gpuShape": "H100", "numberOfGPUNodes": 1, "numberOfGPUs": 2},
    }
    _apply(management, namespace, request)
    eventually(lambda: _gpr_status(management, namespace, "holder").get("phase") == "Ready", 30)
    assert _reserved(shared_cluster, f"{namespace}/holder")

    management.kubectl("delete", "colony", "pool", "-n", namespace, "--wait=true", "--timeout=60s")
    assert not _reserved(shared_cluster, f"{namespace}/holder")
    events = management.kubectl("get", "events", "-n", namespace, "-o", "json").stdout
    assert "CleanupAbandoned" not in events
