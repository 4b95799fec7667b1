"""Chaos: a storm of requests and jobs on one colony while the operator is SIGKILLed at random
(seeded) moments and started again (issue 17, point 7b), on real API servers.

A watch on the colony's nodes checks every node version for over-reservation throughout; at the
end every GPR and DDPJob finished, no reservation label is left and no pod of a finished job holds
GPUs. The CI size (tests/storm.py CI_STORM) keeps this under two minutes; `python -m bench --only
storm` runs a larger seeded one.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from colony.devenv.cluster import LocalCluster
from colony.devenv.environment import start_colony_cluster
from colony.devenv.kwok import GPUNodeSpec
from colony.devenv.process import ManagedProcess
from colony.devenv.tools import Tools
from tests.integration.conftest import start_operator
from tests.storm import CI_STORM, Storm, colony_manifests, plan_storm, summary

pytestmark = pytest.mark.integration

NODES = (GPUNodeSpec("a100", product="NVIDIA-A100-SXM4-80GB", gpus=8, gpu_memory_mib=81920, count=2),)
SEED = int(os.environ.get("COLONY_STORM_SEED", "1717"))


@pytest.fixture(scope="module")
def storm_colony(tools: Tools) -> Iterator[LocalCluster]:
    """This module's own colony: 2 kwok nodes x 8 A100-80GB, Volcano for the DDPJobs' gangs."""
    cluster = start_colony_cluster(tools, "storm-colony", NODES, upstream=())
    try:
        yield cluster
    finally:
        cluster.stop()


def test_no_gpu_is_over_reserved_or_leaked_while_the_operator_is_killed_during_a_storm(
    management: LocalCluster, storm_colony: LocalCluster, tmp_path: Path
) -> None:
    namespace = f"k-storm-{uuid.uuid4().hex[:6]}"
    management.kubectl("create", "namespace", namespace)

    def operator(log: Path) -> ManagedProcess:
        return start_operator(management, log, namespace)

    storm = Storm(management, storm_colony, namespace, operator, tmp_path)
    try:
        storm.start(*colony_manifests(namespace, storm_colony.kubeconfig()))
        result = storm.run(plan_storm(SEED, CI_STORM), CI_STORM.converge_limit_s)
    finally:
        storm.clean_up()
    print(summary(result))
    assert not result.watch_errors, result.watch_errors
    assert not result.violations, result.violations[:10]
    assert result.kills == CI_STORM.kills
    assert result.node_versions > CI_STORM.gprs and result.most_reserved >= 4  # the watch saw the storm
    assert not result.unfinished, result.unfinished
    assert not result.labels_left, result.labels_left
    assert not result.pods_left, result.pods_left
    assert result.converge_s is not None
