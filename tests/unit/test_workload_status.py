"""Standard phases of framework custom resources from synthetic status blocks, per shipped definition."""

from __future__ import annotations

from typing import Any

import pytest

from colony.workloads.definition import EvaluationError, definition_from_manifest
from colony.workloads.status import workload_phase
from tests.unit.workload_examples import builtin, example


def _conditions(**statuses: str) -> dict[str, Any]:
    return {
        "conditions": [{"type": t, "status": s, "reason": "R", "message": "m"} for t, s in statuses.items()]
    }


def _with_status(relative: str, status: dict[str, Any] | None) -> dict[str, Any]:
    obj = example(relative)
    if status is not None:
        obj["status"] = status
    return obj


@pytest.mark.parametrize(
    ("status", "phase"),
    [
        (None, "Pending"),
        ({}, "Pending"),
        (_conditions(Created="True"), "Pending"),
        (_conditions(Created="True", Running="True"), "Running"),
        (_conditions(Created="True", Running="False", Succeeded="True"), "Succeeded"),
        (_conditions(Created="True", Running="False", Failed="True"), "Failed"),
        (_conditions(Created="True", Restarting="True"), "Pending"),
        # Failed is checked first: a Running condition left True does not hide a failure
        (_conditions(Running="True", Failed="True"), "Failed"),
        (_conditions(Running="Unknown"), "Pending"),
    ],
)
def test_pytorchjob(status: dict[str, Any] | None, phase: str) -> None:
    obj = _with_status("pytorchjob/pytorch_job_mnist_nccl.yaml", status)
    assert workload_phase(builtin("PyTorchJob"), obj) == phase


@pytest.mark.parametrize(
    ("status", "phase"),
    [
        (None, "Pending"),
        ({"jobDeploymentStatus": "Initializing"}, "Pending"),
        ({"jobDeploymentStatus": "Waiting"}, "Pending"),
        ({"jobDeploymentStatus": "Running", "jobStatus": "PENDING"}, "Running"),
        ({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}, "Running"),
        ({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}, "Succeeded"),
        # KubeRay before 1.2 reported a failed job as Complete with jobStatus FAILED
        ({"jobDeploymentStatus": "Complete", "jobStatus": "FAILED"}, "Failed"),
        ({"jobDeploymentStatus": "Failed", "reason": "DeadlineExceeded"}, "Failed"),
        ({"jobDeploymentStatus": "ValidationFailed"}, "Failed"),
        ({"jobDeploymentStatus": "Complete", "jobStatus": "STOPPED"}, "Failed"),
        ({"jobDeploymentStatus": "Suspended"}, "Pending"),
    ],
)
def test_rayjob(status: dict[str, Any] | None, phase: str) -> None:
    obj = _with_status("rayjob/ray-job.pytorch-image-classifier.yaml", status)
    assert workload_phase(builtin("RayJob"), obj) == phase


@pytest.mark.parametrize(
    ("status", "phase"),
    [
        (None, "Pending"),
        ({"state": "ready", "readyWorkerReplicas": 1}, "Running"),
        ({"state": "failed"}, "Failed"),
        ({"state": "suspended"}, "Pending"),
        ({"conditions": [{"type": "HeadPodReady", "status": "False"}]}, "Pending"),
    ],
)
def test_raycluster(status: dict[str, Any] | None, phase: str) -> None:
    obj = _with_status("raycluster/ray-cluster.verl.yaml", status)
    assert workload_phase(builtin("RayCluster"), obj) == phase


def _jobs(**ready: int) -> list[dict[str, Any]]:
    return [{"name": n, "ready": r, "active": r, "succeeded": 0, "failed": 0} for n, r in ready.items()]


@pytest.mark.parametrize(
    ("status", "phase"),
    [
        (None, "Pending"),
        ({"replicatedJobsStatus": _jobs(workers=0, driver=0)}, "Pending"),
        ({"replicatedJobsStatus": _jobs(workers=1, driver=0)}, "Running"),
        (_conditions(Suspended="True"), "Pending"),
        ({**_conditions(Completed="True"), "replicatedJobsStatus": _jobs(workers=1)}, "Succeeded"),
        ({**_conditions(Failed="True"), "terminalState": "Failed"}, "Failed"),
        ({**_conditions(StartupPolicyInProgress="True")}, "Pending"),
    ],
)
def test_jobset(status: dict[str, Any] | None, phase: str) -> None:
    obj = _with_status("jobset/paralleljobs.yaml", status)
    assert workload_phase(builtin("JobSet"), obj) == phase


@pytest.mark.parametrize(
    ("status", "phase"),
    [
        (None, "Pending"),
        (_conditions(Progressing="True", Available="False"), "Pending"),
        (_conditions(Available="True", Progressing="False"), "Running"),
        (_conditions(Available="True", UpdateInProgress="True"), "Running"),
    ],
)
def test_leaderworkerset(status: dict[str, Any] | None, phase: str) -> None:
    obj = _with_status("leaderworkerset/vllm-gpu-lws.yaml", status)
    assert workload_phase(builtin("LeaderWorkerSet"), obj) == phase


def _definition(status: dict[str, Any]) -> Any:
    return definition_from_manifest(
        {
            "apiVersion": "infra.exalsius.ai/v1",
            "kind": "WorkloadDefinition",
            "metadata": {"name": "things.example.com"},
            "spec": {
                "target": {"group": "example.com", "version": "v1", "kind": "Thing", "plural": "things"},
                "components": [{"name": "main", "podTemplatePath": ".spec.template"}],
                "status": status,
            },
        }
    )


def test_matchers_of_every_kind_and_the_phase_order() -> None:
    definition = _definition(
        {
            "phasePath": ".status.phase",
            "mappings": {
                "pending": [{"phase": "Queued"}],
                "running": [{"conditions": [{"type": "Ready"}, {"type": "Degraded", "status": "False"}]}],
                "succeeded": [{"expression": ".status.done", "expected": 3}],
                "failed": [{"expression": ".status.errors | length > 0"}],
            },
        }
    )
    phase = workload_phase
    assert phase(definition, {"status": {"phase": "Queued"}}) == "Pending"
    ready = [{"type": "Ready", "status": "True"}, {"type": "Degraded", "status": "False"}]
    assert phase(definition, {"status": {"conditions": ready}}) == "Running"
    assert phase(definition, {"status": {"conditions": ready[:1]}}) == "Pending"  # all must hold
    assert phase(definition, {"status": {"conditions": ready, "done": 3}}) == "Succeeded"
    assert phase(definition, {"status": {"done": 2}}) == "Pending"
    assert phase(definition, {"status": {"done": 3, "errors": ["x"]}}) == "Failed"
    assert phase(definition, {"status": {"conditions": "not a list"}}) == "Pending"


def test_expression_failing_on_an_object_raises_evaluation_error() -> None:
    definition = _definition({"mappings": {"failed": [{"expression": ".status.errors | length > 0"}]}})
    with pytest.raises(EvaluationError, match=r"spec.status.mappings.failed\[0\].expression .* Thing x"):
        workload_phase(definition, {"kind": "Thing", "metadata": {"name": "x"}, "status": {"errors": True}})
