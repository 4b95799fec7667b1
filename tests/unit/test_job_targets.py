"""JobTargets: colony cluster clients kept a few seconds (expired ones dropped) and one GPU count in
flight per cluster for a burst of placements."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from colony.controllers import job_targets
from colony.controllers.job_targets import JobTargets
from colony.kube.resources import Kube


async def test_clients_are_kept_for_their_ttl_and_expired_ones_are_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[tuple[str, str, str]] = []

    async def cluster_client(context: Any, namespace: str, colony: str, cluster: str) -> Any:
        made.append((namespace, colony, cluster))
        return object()

    monkeypatch.setattr(job_targets, "cluster_client", cluster_client)
    clock = [100.0]
    monkeypatch.setattr(job_targets.time, "monotonic", lambda: clock[0])
    targets = JobTargets(ttl_s=5.0)
    first = await targets.client(cast(Any, None), "team", "pool", "a")
    assert await targets.client(cast(Any, None), "team", "pool", "a") is first
    await targets.client(cast(Any, None), "team", "gone", "a")
    assert made == [("team", "pool", "a"), ("team", "gone", "a")] and len(targets) == 2
    clock[0] += 6.0  # both expired: the next client made drops them
    assert await targets.client(cast(Any, None), "team", "pool", "a") is not first
    assert len(targets) == 1


class _Cluster:
    def __init__(self) -> None:
        self.lists = 0
        self.gate = asyncio.Event()

    async def list(self, api_version: str, kind: str, **kw: Any) -> list[dict[str, Any]]:
        self.lists += 1
        await self.gate.wait()
        gpus = {"resources": {"limits": {"nvidia.com/gpu": "4"}}}
        return [
            {"spec": {"nodeName": "n1", "containers": [gpus]}, "status": {"phase": "Running"}},
            {"spec": {"nodeName": "n1", "containers": [gpus]}, "status": {"phase": "Succeeded"}},
        ]


async def test_a_burst_of_placements_shares_one_gpu_count_per_cluster() -> None:
    targets, cluster = JobTargets(), _Cluster()
    kube = cast(Kube, cluster)
    counts = [asyncio.create_task(targets.used_gpus(kube)) for _ in range(5)]
    await asyncio.sleep(0)
    cluster.gate.set()
    assert await asyncio.gather(*counts) == [4] * 5 and cluster.lists == 1
    assert await targets.used_gpus(kube) == 4 and cluster.lists == 2  # a later placement counts again
