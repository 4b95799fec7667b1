"""Pure cost rules: cluster prices, colony cost accrual, job GPU-hours and cost."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from colony.api.colony import ColonyCluster
from colony.scheduling.offers.model import Offer
from colony.status.cost import (
    ClusterPrice,
    cluster_price,
    colony_cost,
    job_usage,
    price_per_gpu_hour,
    priced_colony_status,
)

T0 = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)
P4D = Offer("aws", "us-east-1", "us-east-1a", "p4d.24xlarge", "A100", 8, 96, 1152, 32.77, 9.5)


def _cluster(**fields: Any) -> ColonyCluster:
    return ColonyCluster.model_validate({"clusterName": "c", **fields})


def test_aws_cluster_is_priced_from_the_catalog_times_replicas() -> None:
    cluster = _cluster(aws={"region": "us-east-1", "instanceType": "p4d.24xlarge", "replicas": 2})
    assert cluster_price(cluster, [P4D]) == ClusterPrice(
        65.54, "catalog: aws us-east-1 p4d.24xlarge x2 on-demand"
    )


def test_spot_aws_cluster_uses_the_spot_price() -> None:
    cluster = _cluster(
        aws={"region": "us-east-1", "instanceType": "p4d.24xlarge", "replicas": 1, "spot": True}
    )
    assert cluster_price(cluster, [P4D]).price_per_hour == 9.5


def test_declared_price_wins_and_unknowns_say_why() -> None:
    existing = {"existing": {"kubeconfigSecretRef": {"name": "k", "key": "value"}}}
    assert cluster_price(_cluster(pricePerHour=12.5, **existing), []).price_per_hour == 12.5
    unknown = cluster_price(_cluster(**existing), [])
    assert unknown.price_per_hour is None and "no pricePerHour declared" in unknown.source
    missing = cluster_price(
        _cluster(aws={"region": "mars-1", "instanceType": "p4d.24xlarge", "replicas": 1}), [P4D]
    )
    assert missing.price_per_hour is None and "mars-1" in missing.source
    assert cluster_price(_cluster(docker={"replicas": 2}), []).price_per_hour == 0.0


def test_colony_cost_accrues_the_previous_rate_over_the_elapsed_time() -> None:
    clusters = [{"name": "a", "phase": "Ready", "pricePerHour": 10.0}]
    first = colony_cost({}, clusters, T0)
    assert first == {"pricePerHour": 10.0, "costAccrued": 0.0, "costAccruedAt": "2026-12-02T12:00:00Z"}
    # Within the refresh interval nothing moves (no status write for a counter) ...
    assert colony_cost(first, clusters, T0 + timedelta(seconds=30)) == first
    # ... after it, 90 minutes at $10/h is $15.
    later = colony_cost(first, clusters, T0 + timedelta(minutes=90))
    assert later["costAccrued"] == 15.0 and later["costAccruedAt"] == "2026-12-02T13:30:00Z"


def test_a_rate_change_is_accrued_at_once_and_unbilled_phases_cost_nothing() -> None:
    billed = colony_cost({}, [{"name": "a", "phase": "Ready", "pricePerHour": 6.0}], T0)
    pending = [
        {"name": "a", "phase": "Pending", "pricePerHour": 6.0},
        {"name": "b", "phase": "Failed", "pricePerHour": 3.0},
    ]
    changed = colony_cost(billed, pending, T0 + timedelta(seconds=10))
    assert changed["pricePerHour"] == 0.0
    assert changed["costAccrued"] == pytest.approx(6.0 * 10 / 3600, abs=1e-4)
    idle = colony_cost(changed, pending, T0 + timedelta(hours=5))
    assert idle["costAccrued"] == changed["costAccrued"]


def test_priced_status_adds_per_cluster_prices_and_sources() -> None:
    status = {
        "phase": "Ready",
        "gpus": 16,
        "clusters": [{"name": "a", "phase": "Ready"}, {"name": "b", "phase": "Ready"}],
    }
    prices = {"a": ClusterPrice(8.0, "declared in spec"), "b": ClusterPrice(None, "unknown")}
    priced = priced_colony_status(status, prices, {}, T0)
    assert priced["clusters"][0] == {
        "name": "a",
        "phase": "Ready",
        "pricePerHour": 8.0,
        "priceSource": "declared in spec",
    }
    assert "pricePerHour" not in priced["clusters"][1]
    assert priced["pricePerHour"] == 8.0
    assert price_per_gpu_hour(priced) == 0.5


def test_job_usage_is_gpus_times_wall_time_priced_per_gpu_hour() -> None:
    usage = job_usage(4, T0, T0 + timedelta(minutes=30), 2.5)
    assert usage == {"gpuHours": 2.0, "cost": 5.0}
    assert job_usage(4, T0, T0 + timedelta(minutes=30), None) == {"gpuHours": 2.0, "cost": None}
    assert job_usage(0, T0, T0 + timedelta(hours=1), 2.5) == {"gpuHours": 0.0, "cost": 0.0}
    assert price_per_gpu_hour({"pricePerHour": 10.0, "gpus": 0}) is None
