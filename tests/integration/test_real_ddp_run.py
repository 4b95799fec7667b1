"""A real PyTorch DDP run from the exact pods the operator rendered.

The operator renders a 2-node x 2-process DDPJob into the colony cluster (kwok nodes, Volcano). The
test then plays kubelet for those pods on this machine: each pod's command runs with exactly the
pod's environment as a local process, in a mount namespace whose /etc/hosts resolves the rank-0
worker's DNS name to 127.0.0.1 (all the cluster DNS would do). torchrun rendezvouses over c10d, the
4 ranks form one gloo process group on CPU, and examples/ddp_smoke_train.py checks all_reduce and
DDP training. The real exit codes are then reported on the kwok pods, and the job must succeed.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from colony.devenv.cluster import LocalCluster
from colony.devenv.process import ManagedProcess
from colony.devenv.tools import ensure_torch_env
from tests.integration.conftest import EXAMPLES, eventually
from tests.integration.test_colony_controller import _apply
from tests.integration.test_ddpjob_controller import _finish, _job, _pods, _ready_colony, _status

SCRIPT = EXAMPLES / "ddp_smoke_train.py"
WORKER_TIMEOUT_S = 240
STORE_WAIT_S = 60


@pytest.fixture(scope="module")
def torch_bin() -> Path:
    """bin/ of the venv with the pinned PyTorch (created by hack/torch-venv.sh when missing)."""
    return ensure_torch_env(build=True)


def _container(pod: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = pod["spec"]["containers"][0]
    return container


def _pod_env(pod: dict[str, Any]) -> dict[str, str]:
    """The pod's environment as kubelet would set it (this job has only literal values)."""
    env = {}
    for var in _container(pod)["env"]:
        assert "value" in var, f"{var['name']} is not a literal; this test resolves none"
        env[var["name"]] = var["value"]
    return env


def _hosts_file(tmp: Path, names: list[str]) -> Path:
    """/etc/hosts of this machine plus `names` -> 127.0.0.1."""
    hosts = tmp / "hosts"
    hosts.write_text(Path("/etc/hosts").read_text() + "".join(f"127.0.0.1 {name}\n" for name in names))
    return hosts


def _run_as_kubelet(pod: dict[str, Any], torch_bin: Path, hosts: Path, log: Path) -> subprocess.Popen[bytes]:
    """Start the pod's command with the pod's environment, `torchrun` from the PyTorch venv."""
    env = {"PATH": f"{torch_bin}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), **_pod_env(pod)}
    # A private mount namespace, so the name mapping is seen by this process tree only.
    in_namespace = ["unshare", "--mount", "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"', str(hosts)]
    with log.open("wb") as out:
        return subprocess.Popen(
            [*in_namespace, *_container(pod)["command"]],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def _wait_for_port(host: str, port: int, worker: subprocess.Popen[bytes], log: Path) -> None:
    """Until the rank-0 worker's rendezvous store listens: in a cluster only that pod's address
    matches the endpoint, so it alone hosts the store; here every worker is on 127.0.0.1, and the
    first to bind would host it."""
    deadline = time.monotonic() + STORE_WAIT_S
    while time.monotonic() < deadline:
        assert worker.poll() is None, f"rank-0 worker exited early:\n{log.read_text()[-3000:]}"
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1):
            return
        time.sleep(0.2)
    tail = log.read_text()[-3000:]
    raise AssertionError(f"rank-0 store not listening on {port} after {STORE_WAIT_S}s:\n{tail}")


def _wait_all(workers: list[subprocess.Popen[bytes]], logs: list[Path]) -> list[int]:
    deadline = time.monotonic() + WORKER_TIMEOUT_S
    try:
        return [worker.wait(timeout=max(1.0, deadline - time.monotonic())) for worker in workers]
    except subprocess.TimeoutExpired:
        tails = "\n".join(f"--- {log.name}\n{log.read_text()[-3000:]}" for log in logs)
        raise AssertionError(f"workers still running after {WORKER_TIMEOUT_S}s:\n{tails}") from None
    finally:
        for worker in workers:
            if worker.poll() is None:
                os.killpg(worker.pid, 9)
                worker.wait()


def test_rendered_pods_train_together_with_real_torchrun(
    management: LocalCluster,
    colony_cluster: LocalCluster,
    namespace: str,
    operator_process: ManagedProcess,
    torch_bin: Path,
    tmp_path: Path,
) -> None:
    results = tmp_path / "results"
    job = _job(parallelism=2, nprocPerNode=2, scriptPath=str(SCRIPT), args=["--out-dir", str(results)])
    del job["spec"]["wandbApiKey"]
    _ready_colony(management, colony_cluster, namespace)
    _apply(management, namespace, job)
    eventually(lambda: _status(management, namespace).get("phase") == "Running", 40)
    pods = sorted(_pods(colony_cluster, namespace, 0), key=lambda p: p["metadata"]["name"])
    assert len(pods) == 2

    rank0_host = _pod_env(pods[0])["PET_MASTER_ADDR"]
    assert rank0_host == f"test-ddp-job-worker-0.test-ddp-job.{namespace}.svc"
    hosts = _hosts_file(tmp_path, [rank0_host])
    logs = [tmp_path / f"{pod['metadata']['name']}.log" for pod in pods]
    started = time.monotonic()
    workers = [_run_as_kubelet(pods[0], torch_bin, hosts, logs[0])]
    _wait_for_port("127.0.0.1", int(_pod_env(pods[0])["PET_MASTER_PORT"]), workers[0], logs[0])
    workers.append(_run_as_kubelet(pods[1], torch_bin, hosts, logs[1]))
    exit_codes = _wait_all(workers, logs)
    elapsed = time.monotonic() - started
    output = "\n".join(f"--- {log.name}\n{log.read_text()[-3000:]}" for log in logs)
    assert exit_codes == [0, 0], output

    reports = [json.loads(path.read_text()) for path in sorted(results.glob("rank-*.json"))]
    assert sorted(r["rank"] for r in reports) == [0, 1, 2, 3], output
    assert {r["world_size"] for r in reports} == {4}
    assert {r["all_reduce"] for r in reports} == {10.0}  # 1 + 2 + 3 + 4
    assert sorted((r["node_rank"], r["local_rank"]) for r in reports) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    # One model, trained together: identical parameters on every rank, close to y = 3x + 1.
    assert len({(r["weight"], r["bias"]) for r in reports}) == 1
    assert abs(reports[0]["weight"] - 3) < 0.05 and abs(reports[0]["bias"] - 1) < 0.05
    print(f"real DDP run: 2 nodes x 2 processes, {elapsed:.1f}s wall")

    # Report the real outcomes on the kwok pods: the job completes on them.
    for pod, code in zip(pods, exit_codes, strict=True):
        _finish(colony_cluster, namespace, pod["metadata"]["name"], "Succeeded", code)
    eventually(lambda: _status(management, namespace).get("phase") == "Succeeded", 30)
