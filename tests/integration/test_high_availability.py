"""High availability on the real API server: leader election on a Lease (colony.kube.leader), and two
operator processes of which only the leader acts, with the leader SIGKILLed during a GPR storm.

- Candidates (in this process): exactly one of several wins a fresh Lease; a released Lease is taken
  at once; an abandoned one (its holder stops renewing) after its duration.
- Operators: the follower runs no handler while the leader lives; the leader is killed while dozens
  of GPRs wait for the 16 A100 GPUs of a kwok colony; a watch on the colony's nodes checks every
  version of every node (no sampling) for over-reservation (reserved GPUs from the reservation labels
  above the node's capacity); the follower takes over within 15 s (its first admission) and every
  request is admitted in the end.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from colony.devenv.cluster import LocalCluster
from colony.devenv.environment import start_colony_cluster
from colony.devenv.kwok import GPUNodeSpec
from colony.devenv.process import ManagedProcess
from colony.devenv.tools import Tools
from colony.kube.config import api_client_from_kubeconfig
from colony.kube.leader import LEASE_API_VERSION, LEASE_KIND, ElectionTimings, LeaderElector
from colony.kube.resources import Kube
from tests.integration.conftest import eventually, start_operator
from tests.integration.test_colony_controller import _apply, _existing_colony, _kubeconfig_secret, _phase_is
from tests.storm import ReservationWatch

TIMINGS = ElectionTimings(lease_duration_s=4.0, renew_deadline_s=3.0, retry_period_s=0.5)
"""Short timings for the candidates test (the operators run with the defaults, as the chart's)."""
TAKEOVER_LIMIT_S = 15.0
STORM = 36
"""GPRs of 1 to 4 GPUs (90 in all) for 16 GPUs: several waves of admissions, each expiring after
EXIT_DURATION, so that requests still wait when the leader is killed and long after."""
EXIT_DURATION = "4s"
NODES = (GPUNodeSpec("a100", product="NVIDIA-A100-SXM4-80GB", gpus=8, gpu_memory_mib=81920, count=2),)


# -- candidates --------------------------------------------------------------------------------------


@pytest.fixture
async def kube(management: LocalCluster) -> AsyncIterator[Kube]:
    api = await api_client_from_kubeconfig(yaml.safe_load(management.kubeconfig()))
    try:
        yield Kube(api)
    finally:
        await api.close()


@pytest.fixture
def lease_namespace(management: LocalCluster) -> str:
    name = f"k-lease-{uuid.uuid4().hex[:6]}"
    management.kubectl("create", "namespace", name)
    return name


def _elector(kube: Kube, namespace: str, identity: str) -> LeaderElector:
    return LeaderElector(kube, namespace, "leader", identity=identity, timings=TIMINGS)


async def test_one_of_many_candidates_wins_a_fresh_lease(kube: Kube, lease_namespace: str) -> None:
    candidates = [_elector(kube, lease_namespace, f"c{i}") for i in range(5)]
    tasks = [asyncio.create_task(c.acquire()) for c in candidates]
    done, pending = await asyncio.wait(tasks, timeout=10, return_when=asyncio.FIRST_COMPLETED)
    await asyncio.sleep(2 * TIMINGS.retry_period_s)  # the others keep trying, and keep failing
    assert len(done) == 1 and sum(t.done() for t in tasks) == 1
    (winner,) = [c for c, t in zip(candidates, tasks, strict=True) if t.done()]
    lease = await kube.get(LEASE_API_VERSION, LEASE_KIND, "leader", lease_namespace)
    assert lease is not None and lease["spec"]["holderIdentity"] == winner.identity
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


async def test_a_released_lease_is_taken_at_once_an_abandoned_one_after_its_duration(
    kube: Kube, lease_namespace: str
) -> None:
    first, second = _elector(kube, lease_namespace, "first"), _elector(kube, lease_namespace, "second")
    await first.acquire()
    holding = asyncio.create_task(first.hold())
    waiting = asyncio.create_task(second.acquire())
    await asyncio.sleep(TIMINGS.lease_duration_s + 1)  # renewed all along: never expires
    assert not waiting.done() and not holding.done()

    holding.cancel()
    await asyncio.gather(holding, return_exceptions=True)
    released = time.monotonic()
    await first.step_down()
    await asyncio.wait_for(waiting, 3 * TIMINGS.retry_period_s)
    assert time.monotonic() - released < 3 * TIMINGS.retry_period_s

    holding = asyncio.create_task(second.hold())
    first.leading = False
    waiting = asyncio.create_task(first.acquire())
    await asyncio.sleep(2)
    holding.cancel()  # the leader dies: no more renewals, no release
    await asyncio.gather(holding, return_exceptions=True)
    abandoned = time.monotonic()
    await asyncio.wait_for(waiting, TIMINGS.lease_duration_s + 3)
    waited = time.monotonic() - abandoned
    assert TIMINGS.lease_duration_s - TIMINGS.retry_period_s - 0.5 <= waited
    assert waited <= TIMINGS.lease_duration_s + 3 * TIMINGS.retry_period_s
    lease = await kube.get(LEASE_API_VERSION, LEASE_KIND, "leader", lease_namespace)
    assert lease is not None and lease["spec"]["holderIdentity"] == "first"
    assert lease["spec"]["leaseTransitions"] == 2


# -- two operators, the leader killed during a storm ---------------------------------------------------


@pytest.fixture(scope="module")
def ha_colony(tools: Tools) -> Iterator[LocalCluster]:
    """This module's own colony: 2 kwok nodes x 8 A100-80GB, nothing else reserving them."""
    cluster = start_colony_cluster(tools, "ha-colony", NODES, upstream=(), volcano=False)
    try:
        yield cluster
    finally:
        cluster.stop()


def _gprs(management: LocalCluster, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = management.get_json("gpr", "-n", namespace)["items"]
    return items


def _admitted(gprs: list[dict[str, Any]]) -> set[str]:
    """Requests admitted at some point (admittedAt stays through Ready and Expired)."""
    return {g["metadata"]["name"] for g in gprs if (g.get("status") or {}).get("admittedAt")}


def _leading(process: ManagedProcess) -> bool:
    return "is the leader (Lease" in process.log_path.read_text()


def test_follower_takes_over_a_killed_leader_during_a_gpr_storm(
    management: LocalCluster, ha_colony: LocalCluster, tools: Tools, tmp_path: Path
) -> None:
    namespace = f"k-ha-{uuid.uuid4().hex[:6]}"
    management.kubectl("create", "namespace", namespace)
    election = [f"--leader-election-namespace={namespace}", "--leader-election-lease=colony-operator-leader"]
    leader = start_operator(management, tmp_path / "first.log", namespace, extra_args=election)
    follower: ManagedProcess | None = None
    watch = ReservationWatch(ha_colony.kubeconfig_path)
    watcher = threading.Thread(target=watch.run, daemon=True)
    try:
        leader.wait_until(lambda: _leading(leader), 30, "the first operator leading")
        follower = start_operator(management, tmp_path / "second.log", namespace, extra_args=election)
        standby = follower
        follower.wait_until(lambda: "waits for Lease" in standby.log_path.read_text(), 30, "a follower")

        _kubeconfig_secret(management, namespace, "gpu-kubeconfig", ha_colony.kubeconfig())
        _apply(management, namespace, _existing_colony("pool", "gpu-kubeconfig"))
        eventually(lambda: _phase_is(management, namespace, "pool", "Ready"), 60)
        watcher.start()

        storm = [
            {
                "apiVersion": "infra.exalsius.ai/v1",
                "kind": "GPUProvisioningRequest",
                "metadata": {"name": f"storm-{i:02d}", "namespace": namespace},
                "spec": {
                    "gpuShape": "A100-80GB",
                    "numberOfGPUNodes": 1,
                    "numberOfGPUs": 1 + i % 4,
                    "exitDuration": EXIT_DURATION,
                },
            }
            for i in range(STORM)
        ]
        management.kubectl(
            "apply", "-f", "-", input_text=json.dumps({"apiVersion": "v1", "kind": "List", "items": storm})
        )
        eventually(lambda: len(_admitted(_gprs(management, namespace))) >= 6, 60)
        before = _admitted(_gprs(management, namespace))
        assert len(before) < STORM, "the storm was over before the kill"
        assert not _leading(follower) and "Handler '" not in follower.log_path.read_text()

        leader.kill()
        killed = time.monotonic()
        follower.wait_until(lambda: _leading(standby), TAKEOVER_LIMIT_S + 10, "the follower leading")
        lease_taken = time.monotonic() - killed
        eventually(lambda: _admitted(_gprs(management, namespace)) - before, TAKEOVER_LIMIT_S + 10, 0.1)
        first_admission = time.monotonic() - killed
        print(
            f"takeover after SIGKILL: Lease in {lease_taken:.1f} s,"
            f" first admission in {first_admission:.1f} s"
        )
        assert first_admission <= TAKEOVER_LIMIT_S, (lease_taken, first_admission)

        eventually(lambda: len(_admitted(_gprs(management, namespace))) == STORM, 180, 1.0)
    finally:
        watch.stop()
        if watcher.is_alive():
            watcher.join(10)
        if follower is not None:
            management.kubectl(
                "delete", "gpr", "--all", "-n", namespace, "--wait=true", "--timeout=60s", check=False
            )
            follower.stop()
        leader.stop()
    assert not watch.errors, watch.errors
    assert not watch.violations, watch.violations[:10]
    assert watch.versions > STORM and watch.most_reserved == 8  # the watch saw nodes filled up
