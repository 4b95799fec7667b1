"""The operator, started as a real process, reacts to applies by writing status."""

from __future__ import annotations

import json
from typing import Any

from colony.devenv.cluster import LocalCluster
from colony.devenv.process import ManagedProcess
from tests.integration.conftest import EXAMPLES, eventually


def _accepted(obj: dict[str, Any]) -> dict[str, Any] | None:
    status = obj.get("status") or {}
    if status.get("observedGeneration") != obj["metadata"]["generation"]:
        return None
    return next((c for c in status.get("conditions", []) if c["type"] == "Accepted"), None)


def _phase(obj: dict[str, Any]) -> str | None:
    return (obj.get("status") or {}).get("phase")


def test_colony_apply_gets_observed_generation_and_condition(
    management: LocalCluster, namespace: str, operator_process: ManagedProcess
) -> None:
    management.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "colony-docker-ray.yaml"))
    condition = eventually(
        lambda: _accepted(management.get_json("colony", "docker-colony-ray", "-n", namespace)), 15
    )
    assert condition["status"] == "True" and condition["reason"] == "SpecValid"
    colony = management.get_json("colony", "docker-colony-ray", "-n", namespace)
    status = colony["status"]
    assert status["phase"] in ("Pending", "Provisioning", "Ready")
    assert status["phase"] != "Ready" or status["readyClusters"] == status["totalClusters"] == 1
    assert colony["status"]["totalClusters"] == 1

    # A spec edit bumps the generation; the operator catches up.
    management.kubectl(
        "patch",
        "colony",
        "docker-colony-ray",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec": {"colonyClusters": [{"clusterName": "docker-1", "dockerEnabled": true,'
        ' "docker": {"replicas": 3}}, {"clusterName": "docker-2", "docker": {"replicas": 1}}]}}',
    )
    eventually(lambda: _accepted(management.get_json("colony", "docker-colony-ray", "-n", namespace)), 15)
    colony = management.get_json("colony", "docker-colony-ray", "-n", namespace)
    assert colony["metadata"]["generation"] == 2
    assert colony["status"]["totalClusters"] == 2
    assert operator_process.running()


def test_ddpjob_and_gpr_get_status(
    management: LocalCluster, namespace: str, operator_process: ManagedProcess
) -> None:
    management.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "ddpjob.yaml"))
    gpr = {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "GPUProvisioningRequest",
        "metadata": {"name": "two-h100"},
        "spec": {"gpuShape": "H100", "numberOfGPUs": 2},
    }
    management.kubectl("apply", "-n", namespace, "-f", "-", input_text=json.dumps(gpr))
    eventually(lambda: _accepted(management.get_json("ddpjob", "test-ddp-job", "-n", namespace)), 15)
    job = management.get_json("ddpjob", "test-ddp-job", "-n", namespace)
    assert job["status"]["workersTotal"] == 2
    eventually(lambda: _accepted(management.get_json("gpr", "two-h100", "-n", namespace)), 15)
    eventually(lambda: _phase(management.get_json("gpr", "two-h100", "-n", namespace)) == "Queued", 15)
    request = management.get_json("gpr", "two-h100", "-n", namespace)
    assert request["spec"]["priority"] == 101  # defaulted at admission
