"""SIGKILL the operator at three points of a colony's life; a restarted one converges with no
duplicate or orphaned objects."""

from __future__ import annotations

from colony.devenv.capi_harness import CapiHarness
from colony.devenv.cluster import LocalCluster
from tests.integration.conftest import KillableOperator, eventually
from tests.integration.test_colony_controller import _apply, _colony, _example, _owned, _phase_is


def _expected(name: str) -> dict[str, list[str]]:
    clusters = [f"{name}-docker-1", f"{name}-docker-2"]
    return {
        "Cluster": clusters,
        "DockerCluster": clusters,
        "DockerMachineTemplate": sorted(f"{c}-mt" for c in clusters),
        "HelmChartProxy": sorted([f"{name}-kuberay", f"{name}-volcano-sh"]),
        "K0sWorkerConfigTemplate": sorted(f"{c}-worker" for c in clusters),
        "K0smotronControlPlane": sorted(f"{c}-cp" for c in clusters),
        "MachineDeployment": sorted(f"{c}-md" for c in clusters),
    }


def test_sigkill_at_three_points_converges(
    management: LocalCluster, capi: CapiHarness, killable_operator: KillableOperator
) -> None:
    namespace = killable_operator.namespace
    colony = _example("colony-docker-ray.yaml")
    colony["spec"]["colonyClusters"].append({"clusterName": "docker-2", "docker": {"replicas": 1}})
    name = colony["metadata"]["name"]
    first = f"{name}-docker-1"
    capi.hold(namespace, first)
    _apply(management, namespace, colony)

    # 1: in the middle of the first reconcile, as soon as the first object exists.
    eventually(lambda: _owned(management, namespace, name), 30, 0.02)
    killable_operator.crash_and_restart()

    # 2: while a cluster is provisioning.
    eventually(lambda: _phase_is(management, namespace, name, "Provisioning"), 30)
    killable_operator.crash_and_restart()
    capi.release(namespace, first)
    eventually(lambda: _phase_is(management, namespace, name, "Ready"), 40)
    assert _owned(management, namespace, name) == _expected(name)

    # 3: during deletion, while Cluster API still holds a Cluster.
    capi.hold(namespace, first)
    management.kubectl("delete", "colony", name, "-n", namespace, "--wait=false")
    eventually(lambda: _phase_is(management, namespace, name, "Deleting"), 30)
    killable_operator.crash_and_restart()
    assert _colony(management, namespace, name)["metadata"]["deletionTimestamp"]
    capi.release(namespace, first)
    eventually(
        lambda: management.kubectl("get", "colony", name, "-n", namespace, check=False).returncode != 0, 60
    )
    assert _owned(management, namespace, name) == {}
