"""SIGKILL the operator while a DDPJob is Scheduling, Running and Restarting: never duplicate
pods, never a stuck job."""

from __future__ import annotations

from colony.devenv.cluster import LocalCluster
from tests.integration.conftest import KillableOperator, eventually
from tests.integration.test_colony_controller import _apply
from tests.integration.test_ddpjob_controller import _finish, _job, _pods, _ready_colony, _status


def _only_current_attempt(cluster: LocalCluster, namespace: str, attempt: int, workers: int) -> bool:
    selector = "training.exalsius.ai/job-name=test-ddp-job"
    pods = cluster.get_json("pods", "-n", namespace, "-l", selector)["items"]
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    attempts = {p["metadata"]["labels"]["training.exalsius.ai/attempt"] for p in live}
    return len(live) == workers and attempts == {str(attempt)}


def test_sigkill_while_scheduling_running_and_restarting(
    management: LocalCluster, colony_cluster: LocalCluster, killable_operator: KillableOperator
) -> None:
    namespace = killable_operator.namespace
    _ready_colony(management, colony_cluster, namespace)
    _apply(management, namespace, _job(backoffLimit=2))

    eventually(lambda: _status(management, namespace).get("phase") == "Scheduling", 40, 0.05)
    killable_operator.crash_and_restart()
    eventually(lambda: _status(management, namespace).get("phase") == "Running", 40)
    assert _only_current_attempt(colony_cluster, namespace, 0, 2)

    killable_operator.crash_and_restart()
    first = sorted(p["metadata"]["name"] for p in _pods(colony_cluster, namespace, 0))
    _finish(colony_cluster, namespace, first[0], "Failed", 9)
    eventually(lambda: _pods(colony_cluster, namespace, 1), 40, 0.05)  # the restart began
    killable_operator.crash_and_restart()

    # The status written before the crash may still say attempt 0 for a moment: wait for the new
    # operator to read the newer attempt from the pods.
    eventually(lambda: _status(management, namespace).get("restarts") == 1, 40)
    eventually(lambda: _status(management, namespace).get("phase") == "Running", 40)
    eventually(lambda: _only_current_attempt(colony_cluster, namespace, 1, 2), 30)
    for pod in _pods(colony_cluster, namespace, 1):
        _finish(colony_cluster, namespace, pod["metadata"]["name"], "Succeeded")
    eventually(lambda: _status(management, namespace).get("phase") == "Succeeded", 30)
