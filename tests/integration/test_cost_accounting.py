"""Cost accounting on real API servers: a priced colony accrues cost, a job on it records GPU-hours
and cost, `kubectl get` shows both, and the operator exports them as Prometheus metrics."""

from __future__ import annotations

import urllib.request
from datetime import datetime
from pathlib import Path

import pytest

from colony.devenv.cluster import LocalCluster
from colony.devenv.process import ManagedProcess
from colony.pricing.operator_catalog import CONFIGMAP_SETTING
from colony.scheduling.offers.catalog import COLUMNS
from tests.integration.conftest import eventually, session_metrics_port, start_operator
from tests.integration.test_colony_controller import _apply, _existing_colony, _kubeconfig_secret, _phase_is
from tests.integration.test_ddpjob_controller import _finish, _job, _pods, _status

COLONY_PRICE = 48.0  # USD/h for the colony cluster's 24 GPUs: 2 USD per GPU-hour


def _metrics() -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{session_metrics_port()}/metrics", timeout=5) as answer:
        text: str = answer.read().decode()
        return text


def _seconds(start: str, end: str) -> float:
    parse = datetime.fromisoformat
    return (parse(end.replace("Z", "+00:00")) - parse(start.replace("Z", "+00:00"))).total_seconds()


def test_priced_colony_and_job_report_cost_in_status_columns_and_metrics(
    management: LocalCluster, colony_cluster: LocalCluster, namespace: str, operator_process: ManagedProcess
) -> None:
    _kubeconfig_secret(management, namespace, "gpu-kubeconfig", colony_cluster.kubeconfig())
    colony = _existing_colony("test-colony", "gpu-kubeconfig")
    colony["spec"]["colonyClusters"][0]["pricePerHour"] = COLONY_PRICE
    _apply(management, namespace, colony)
    ready = eventually(lambda: _phase_is(management, namespace, "test-colony", "Ready"), 30)
    assert ready["status"]["pricePerHour"] == COLONY_PRICE
    assert ready["status"]["clusters"][0]["priceSource"] == "declared in spec"
    first = ready["status"]

    # The accrued cost moves forward (the session operator brings it forward every 2 s).
    def accrued() -> dict[str, object] | None:
        status = management.get_json("colony", "test-colony", "-n", namespace)["status"]
        return status if float(status["costAccrued"]) > float(first["costAccrued"]) else None

    later = eventually(accrued, 20)
    elapsed = _seconds(first["costAccruedAt"], later["costAccruedAt"])
    assert float(later["costAccrued"]) == pytest.approx(
        float(first["costAccrued"]) + COLONY_PRICE * elapsed / 3600, abs=1e-3
    )
    header, row = management.kubectl("get", "colonies", "-n", namespace).stdout.splitlines()[:2]
    assert "$/H" in header and "COST" in header and "48" in row.split()

    _apply(management, namespace, _job())
    eventually(lambda: _status(management, namespace).get("phase") == "Running", 40)
    assert _status(management, namespace)["pricePerGpuHour"] == 2.0
    for pod in _pods(colony_cluster, namespace, 0):
        _finish(colony_cluster, namespace, pod["metadata"]["name"], "Succeeded")
    eventually(lambda: _status(management, namespace).get("phase") == "Succeeded", 30)
    status = _status(management, namespace)
    gpus = 2  # the seed job: 2 workers x 1 GPU
    expected_gpu_hours = gpus * _seconds(status["startTime"], status["completionTime"]) / 3600
    assert status["gpuHours"] == pytest.approx(expected_gpu_hours, abs=1e-4)
    assert status["cost"] == pytest.approx(status["gpuHours"] * 2.0, abs=1e-4)
    header = management.kubectl("get", "ddpjobs", "-n", namespace).stdout.splitlines()[0]
    assert "GPU-H" in header and "COST" in header

    metrics = _metrics()
    labels = f'colony="test-colony",namespace="{namespace}"'
    assert f"colony_price_per_hour_usd{{{labels}}} 48.0" in metrics
    assert f"colony_cost_accrued_usd{{{labels}}}" in metrics
    assert f'colony_job_gpu_hours{{job="test-ddp-job",kind="DDPJob",namespace="{namespace}"}}' in metrics


def test_operator_prices_aws_colonies_from_a_catalog_configmap(
    management: LocalCluster, unwatched_namespace: str, tmp_path: Path
) -> None:
    namespace = unwatched_namespace
    catalog = "\n".join(
        [
            ",".join(COLUMNS),
            "aws,p4d.24xlarge,A100,8.0,96.0,1152.0,10.5,3.25,us-east-1,use1-az2",
        ]
    )
    management.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "offers", "namespace": namespace},
                "data": {"gpu-offers.csv": catalog + "\n"},
            }
        ]
    )
    operator = start_operator(
        management, tmp_path / "operator.log", namespace, extra_env={CONFIGMAP_SETTING: f"{namespace}/offers"}
    )
    try:
        colony = {
            "apiVersion": "infra.exalsius.ai/v1",
            "kind": "Colony",
            "metadata": {"name": "aws-colony"},
            "spec": {
                "k8sVersion": "v1.36.3",
                "colonyClusters": [
                    {
                        "clusterName": "a",
                        "aws": {"region": "us-east-1", "instanceType": "p4d.24xlarge", "replicas": 2},
                    },
                    {
                        "clusterName": "b",
                        "aws": {
                            "region": "us-east-1",
                            "instanceType": "p4d.24xlarge",
                            "replicas": 1,
                            "spot": True,
                        },
                    },
                ],
            },
        }
        _apply(management, namespace, colony)

        def priced() -> list[dict[str, object]] | None:
            status = management.get_json("colony", "aws-colony", "-n", namespace).get("status") or {}
            clusters: list[dict[str, object]] = status.get("clusters") or []
            return clusters if len(clusters) == 2 and all("priceSource" in c for c in clusters) else None

        a, b = eventually(priced, 30)
        assert (a["pricePerHour"], a["priceSource"]) == (
            21.0,
            "catalog: aws us-east-1 p4d.24xlarge x2 on-demand",
        )
        assert (b["pricePerHour"], b["priceSource"]) == (3.25, "catalog: aws us-east-1 p4d.24xlarge x1 spot")
        assert "offer catalog: 1 offers from ConfigMap" in (tmp_path / "operator.log").read_text()
    finally:
        operator.stop()
