"""The `colony` user CLI against the real management cluster and the session operator: in-process
(typer's CliRunner) and as the installed `.venv/bin/colony` with KUBECONFIG set, as a user runs it.

Workers finish when a test annotates their pods (kwok outcome stages), as in the controller tests.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from colony.cli.main import app
from colony.devenv.capi_harness import CapiHarness
from colony.devenv.cluster import LocalCluster
from colony.devenv.process import ManagedProcess
from tests.integration.conftest import eventually
from tests.integration.test_colony_controller import _example, _existing_colony
from tests.integration.test_ddpjob_controller import _finish, _job, _ready_colony, _status

COLONY_BIN = Path(sys.executable).parent / "colony"
runner = CliRunner()


def cli(management: LocalCluster, *args: str) -> Result:
    """`colony ARGS` in this process, with KUBECONFIG pointing at the management cluster."""
    return runner.invoke(app, list(args), env={"KUBECONFIG": str(management.kubeconfig_path)})


def cli_process(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`.venv/bin/colony ARGS` as a separate process."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    return subprocess.run([str(COLONY_BIN), *args], env=env, capture_output=True, text=True, timeout=60)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Submission:
    """`colony jobs submit FILE --wait` running in the background, its stdout in a file or, with
    `tty`, on a pseudo-terminal (rich's live view), its stderr in a file."""

    def __init__(
        self, management: LocalCluster, tmp_path: Path, job: dict[str, Any], namespace: str, tty: bool = False
    ) -> None:
        path = tmp_path / f"{job['metadata']['name']}.yaml"
        path.write_text(json.dumps(job))  # JSON is YAML, and keeps strings such as 1e-3 strings
        self.out, self.err = tmp_path / "stdout", tmp_path / "stderr"
        env = {**os.environ, "KUBECONFIG": str(management.kubeconfig_path), "COLUMNS": "160"}
        argv = [str(COLONY_BIN), "jobs", "submit", str(path), "--wait", "-n", namespace]
        self._terminal: list[bytes] | None = None
        with self.out.open("w") as out, self.err.open("w") as err:
            if not tty:
                self.process = subprocess.Popen(argv, env=env, stdout=out, stderr=err)
                return
            leader, follower = pty.openpty()
            # as from a terminal: Ctrl-C reaches it even when these tests run as a background job
            # (whose children inherit SIGINT ignored, and Python then never raises KeyboardInterrupt)
            self.process = subprocess.Popen(
                argv, env=env, stdout=follower, stderr=err, preexec_fn=_default_sigint
            )
            os.close(follower)
            self._terminal = []
            threading.Thread(target=self._drain, args=(leader,), daemon=True).start()

    def _drain(self, fd: int) -> None:
        assert self._terminal is not None
        with contextlib.suppress(OSError):  # EIO once the process has gone
            while chunk := os.read(fd, 4096):
                self._terminal.append(chunk)
        os.close(fd)

    def stdout(self) -> str:
        if self._terminal is not None:
            return b"".join(self._terminal).decode(errors="replace")
        return self.out.read_text()

    def wait(self, timeout: float = 60) -> tuple[int, str, str]:
        code = self.process.wait(timeout)
        return code, self.stdout(), self.err.read_text()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture
def submissions() -> Iterator[list[Submission]]:
    started: list[Submission] = []
    yield started
    for submission in started:
        submission.stop()


def _named(name: str, **changes: Any) -> dict[str, Any]:
    job = _job(**changes)
    job["metadata"]["name"] = name
    return job


def _pods(cluster: LocalCluster, namespace: str, job: str) -> list[dict[str, Any]]:
    selector = f"training.exalsius.ai/job-name={job}"
    pods: list[dict[str, Any]] = cluster.get_json("pods", "-n", namespace, "-l", selector)["items"]
    return pods


def _contains(actual: Any, expected: Any, path: str = "") -> None:
    """`expected` (rendered) is part of `actual` (stored): the API server only adds defaults."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), path
        for key, value in expected.items():
            assert key in actual, f"{path}.{key} missing"
            _contains(actual[key], value, f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), path
        for index, (a, e) in enumerate(zip(actual, expected, strict=True)):
            _contains(a, e, f"{path}[{index}]")
    else:  # quantities come back as strings ("1" for 1)
        assert str(actual) == str(expected), f"{path}: {actual!r} != {expected!r}"


def _assert_created_as_rendered(cluster: LocalCluster, rendered: list[dict[str, Any]]) -> None:
    for manifest in rendered:
        meta = manifest["metadata"]
        group = manifest["apiVersion"].split("/")[0] if "/" in manifest["apiVersion"] else ""
        resource = f"{manifest['kind'].lower()}.{group}" if group else manifest["kind"].lower()
        stored = cluster.get_json(resource, meta["name"], "-n", meta["namespace"])
        assert (stored["apiVersion"], stored["kind"]) == (manifest["apiVersion"], manifest["kind"])
        _contains(stored["metadata"].get("labels") or {}, meta.get("labels") or {}, f"{meta['name']}.labels")
        _contains(stored["spec"], manifest["spec"], f"{manifest['kind']}/{meta['name']}.spec")


def _render_live(management: LocalCluster, tmp_path: Path, resource: str, name: str, ns: str) -> list[Any]:
    """`colony render -o json` of the object as it is stored (uid, status) in the cluster."""
    path = tmp_path / f"{name}-live.json"
    path.write_text(json.dumps(management.get_json(resource, name, "-n", ns)))
    result = cli(management, "render", "-f", str(path), "-o", "json")
    assert result.exit_code == 0, result.output
    items: list[Any] = json.loads(result.stdout)["items"]
    return items


def test_submit_wait_follows_a_job_to_success_and_render_matches_its_objects(
    management: LocalCluster,
    colony_cluster: LocalCluster,
    namespace: str,
    operator_process: ManagedProcess,
    tmp_path: Path,
    submissions: list[Submission],
) -> None:
    _ready_colony(management, colony_cluster, namespace)
    submission = Submission(management, tmp_path, _named("cli-ok"), namespace)
    submissions.append(submission)
    eventually(lambda: " cli-ok  running " in submission.stdout(), 40)
    assert len(_pods(colony_cluster, namespace, "cli-ok")) == 2

    rendered = _render_live(management, tmp_path, "ddpjob", "cli-ok", namespace)
    assert [m["kind"] for m in rendered] == ["Service", "PodGroup", "Pod", "Pod"]
    _assert_created_as_rendered(colony_cluster, rendered)
    created = {p["metadata"]["name"] for p in _pods(colony_cluster, namespace, "cli-ok")}
    assert created == {m["metadata"]["name"] for m in rendered if m["kind"] == "Pod"}

    # kwok plays no kubelet log endpoint: the CLI found rank 0's pod in the colony cluster (through
    # the colony's kubeconfig Secret) and says why it cannot read its logs.
    logs = cli(management, "jobs", "logs", "cli-ok", "--rank", "0", "-n", namespace)
    assert logs.exit_code == 1 and "Traceback" not in logs.output
    assert logs.stderr.startswith("error: cannot read the logs of pod cli-ok-worker-0-a0: 500 no preferred")
    wrong_rank = cli(management, "jobs", "logs", "cli-ok", "--rank", "5", "-n", namespace)
    assert wrong_rank.exit_code == 1
    assert "DDPJob cli-ok has no worker of rank 5 in attempt 0: ranks 0, 1 exist" in wrong_rank.stderr

    for pod in _pods(colony_cluster, namespace, "cli-ok"):
        _finish(colony_cluster, namespace, pod["metadata"]["name"], "Succeeded")
    code, out, err = submission.wait()
    assert code == 0, out + err
    lines = out.splitlines()
    assert re.match(r"^\[\s*\d+:\d\d\] cli-ok  (pending|scheduling|running) ", lines[0]), out
    assert any(
        re.match(r"^\[\s*\d+:\d\d\] cli-ok  running\s+2/2 workers running on test-colony/onprem", x)
        for x in lines
    )
    assert any(" cli-ok  finished     Succeeded" in line for line in lines), out
    assert lines[-1].startswith("DDPJob cli-ok: Succeeded")
    assert f"ddpjob cli-ok created in namespace {namespace}" in err


def test_submit_wait_exits_1_when_the_job_fails(
    management: LocalCluster,
    colony_cluster: LocalCluster,
    namespace: str,
    operator_process: ManagedProcess,
    tmp_path: Path,
    submissions: list[Submission],
) -> None:
    _ready_colony(management, colony_cluster, namespace)
    submission = Submission(management, tmp_path, _named("cli-bad", parallelism=1, backoffLimit=0), namespace)
    submissions.append(submission)
    eventually(lambda: " cli-bad  running " in submission.stdout(), 40)
    (pod,) = _pods(colony_cluster, namespace, "cli-bad")
    _finish(colony_cluster, namespace, pod["metadata"]["name"], "Failed", 7)
    code, out, err = submission.wait()
    assert code == 1, out + err
    assert "finished     Failed" in out and "exit code 7" in out
    assert out.splitlines()[-1].startswith("DDPJob cli-bad: Failed")


def test_submit_wait_shows_the_queue_and_ctrl_c_leaves_the_job(
    management: LocalCluster,
    namespace: str,
    operator_process: ManagedProcess,
    tmp_path: Path,
    submissions: list[Submission],
) -> None:
    job = _named("cli-waits", gpuTypes=["NO-SUCH-GPU"])
    del job["spec"]["targetColony"]
    submission = Submission(management, tmp_path, job, namespace, tty=True)
    submissions.append(submission)
    eventually(lambda: " cli-waits  queued       GPR cli-waits-gpus" in submission.stdout(), 30)
    assert "Ctrl-C stops watching" in submission.stdout()  # the live view's footer
    submission.process.send_signal(signal.SIGINT)
    code, out, err = submission.wait(20)
    assert code == 130, out + err
    assert f"the job(s) keep running: `colony jobs get cli-waits -n {namespace}`" in err
    assert "Traceback" not in err
    assert _status(management, namespace, "cli-waits")["phase"] == "Pending"


def test_list_get_outputs_not_found_and_the_kubeconfig_namespace(
    management: LocalCluster,
    colony_cluster: LocalCluster,
    namespace: str,
    operator_process: ManagedProcess,
    tmp_path: Path,
) -> None:
    _ready_colony(management, colony_cluster, namespace)
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps(_named("waiting", targetColony="nowhere")))
    created = cli(management, "jobs", "submit", str(path), "-n", namespace)
    assert created.exit_code == 0, created.output
    jobs_dir = tmp_path / "jobs"  # -f DIR, as kubectl
    jobs_dir.mkdir()
    (jobs_dir / "job.yaml").write_text(path.read_text())
    again = cli(management, "jobs", "submit", "-f", str(jobs_dir), "-n", namespace)
    assert again.exit_code == 1
    assert f"DDPJob waiting already exists in namespace {namespace}" in again.stderr
    eventually(lambda: _status(management, namespace, "waiting").get("phase") == "Pending", 20)

    table = cli(management, "jobs", "list", "-n", namespace)
    assert table.exit_code == 0, table.output
    header, row = table.stdout.splitlines()[:2]
    assert header.split()[:5] == ["NAME", "PHASE", "COLONY", "CLUSTER", "WORKERS"]
    assert row.split()[:5] == ["waiting", "Pending", "nowhere", "-", "0/2"]
    listed = json.loads(cli(management, "jobs", "list", "-n", namespace, "-o", "json").stdout)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["waiting"]
    as_yaml = yaml.safe_load(cli(management, "jobs", "get", "waiting", "-n", namespace, "-o", "yaml").stdout)
    assert as_yaml["spec"]["targetColony"] == "nowhere" and "managedFields" not in as_yaml["metadata"]
    details = cli(management, "jobs", "get", "waiting", "-n", namespace).stdout
    assert "Phase:" in details and "colony nowhere does not exist" in details

    missing = cli(management, "jobs", "get", "nope", "-n", namespace)
    assert missing.exit_code == 1
    assert missing.stderr.strip() == (
        f"error: DDPJob nope not found in namespace {namespace}: `colony jobs list -n {namespace}`"
    )

    colonies = cli(management, "colonies", "list", "-n", namespace).stdout.splitlines()
    assert colonies[1].split()[:4] == ["test-colony", "Ready", "1/1", "24"]
    colony = cli(management, "colonies", "get", "test-colony", "-n", namespace)
    assert "onprem" in colony.stdout and "24" in colony.stdout
    kubeconfig = cli(management, "colonies", "kubeconfig", "test-colony", "-n", namespace)
    assert kubeconfig.exit_code == 0, kubeconfig.output
    assert yaml.safe_load(kubeconfig.stdout) == yaml.safe_load(colony_cluster.kubeconfig())

    second = tmp_path / "colony.yaml"
    second.write_text(json.dumps(_existing_colony("second", "gpu-kubeconfig")))
    assert cli(management, "colonies", "create", "-f", str(second), "-n", namespace).exit_code == 0
    assert management.get_json("colony", "second", "-n", namespace)["metadata"]["name"] == "second"
    assert cli(management, "colonies", "delete", "second", "-n", namespace).exit_code == 0
    gone = cli(management, "colonies", "delete", "no-colony", "-n", namespace)
    assert gone.exit_code == 1 and f"`colony colonies list -n {namespace}`" in gone.stderr

    gpr = {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "GPUProvisioningRequest",
        "metadata": {"name": "too-big", "namespace": namespace},
        "spec": {"gpuShape": "B200", "numberOfGPUs": 8, "numberOfGPUNodes": 64},
    }
    management.apply([gpr])
    eventually(
        lambda: (management.get_json("gpr", "too-big", "-n", namespace).get("status") or {}).get("phase")
    )
    gprs = cli(management, "gpr", "list", "-n", namespace).stdout.splitlines()
    assert gprs[0].split()[:4] == ["NAME", "PHASE", "QUEUE", "POSITION"]
    assert gprs[1].split()[:2] == ["too-big", "Queued"] and "64 x 8 B200" in gprs[1]
    got = json.loads(cli(management, "gpr", "get", "too-big", "-n", namespace, "-o", "json").stdout)
    assert got["status"]["phase"] == "Queued"

    # As a user runs it: the installed command, namespace from the kubeconfig context.
    config = yaml.safe_load(management.kubeconfig_path.read_text())
    config["contexts"][0]["context"]["namespace"] = namespace
    with_namespace = tmp_path / "kubeconfig"
    with_namespace.write_text(yaml.safe_dump(config))
    listed_there = cli_process(with_namespace, "jobs", "list", "-o", "json")
    assert listed_there.returncode == 0, listed_there.stderr
    assert [i["metadata"]["name"] for i in json.loads(listed_there.stdout)["items"]] == ["waiting"]
    absent = cli_process(with_namespace, "gpr", "get", "nope")
    assert absent.returncode == 1 and "Traceback" not in absent.stderr
    assert f"GPUProvisioningRequest nope not found in namespace {namespace}" in absent.stderr
    usage = cli_process(with_namespace, "jobs", "get")
    assert usage.returncode == 2

    deleted = cli_process(with_namespace, "jobs", "delete", "waiting")
    assert deleted.returncode == 0, deleted.stderr
    eventually(lambda: cli(management, "jobs", "get", "waiting", "-n", namespace).exit_code == 1, 20)


def test_colony_render_equals_what_the_operator_applies(
    management: LocalCluster,
    namespace: str,
    capi: CapiHarness,
    operator_process: ManagedProcess,
    tmp_path: Path,
) -> None:
    colony = _example("colony-docker-ray.yaml")
    name = colony["metadata"]["name"]
    capi.hold(namespace, f"{name}-docker-1", phase="Provisioning")
    path = tmp_path / "colony.yaml"
    path.write_text(yaml.safe_dump(colony))
    created = cli(management, "colonies", "create", "-f", str(path), "-n", namespace)
    assert created.exit_code == 0, created.output

    def ports_recorded() -> bool:
        clusters = (management.get_json("colony", name, "-n", namespace).get("status") or {}).get("clusters")
        return bool(clusters and clusters[0].get("hostedControlPlane"))

    eventually(ports_recorded, 30)
    rendered = _render_live(management, tmp_path, "colony", name, namespace)
    kinds = {m["kind"] for m in rendered}
    assert {
        "Cluster",
        "K0smotronControlPlane",
        "DockerCluster",
        "MachineDeployment",
        "HelmChartProxy",
    } <= kinds
    _assert_created_as_rendered(management, rendered)
    capi.release(namespace, f"{name}-docker-1")
    management.kubectl("delete", "colony", name, "-n", namespace, "--wait=false")
