"""Fixtures that start real control planes: one management cluster and one colony cluster per test
session, a fresh namespace per test, and the operator as a real process."""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from colony.devenv.capi_harness import CapiHarness
from colony.devenv.cluster import LocalCluster
from colony.devenv.environment import start_colony_cluster, start_management_cluster
from colony.devenv.process import ManagedProcess
from colony.devenv.tools import Tools, ensure_tools


@pytest.fixture(scope="session")
def tools() -> Tools:
    return ensure_tools(build=True)


@pytest.fixture(scope="session")
def management(tools: Tools) -> Iterator[LocalCluster]:
    cluster = start_management_cluster(tools)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def colony_cluster(tools: Tools) -> Iterator[LocalCluster]:
    cluster = start_colony_cluster(tools, "colony-a")
    try:
        yield cluster
    finally:
        cluster.stop()


# The session operator watches only namespaces matching this pattern; tests that run an operator
# of their own (e.g. to kill it) use other namespaces.
SHARED_OPERATOR_NAMESPACES = "t-*"


@pytest.fixture
def namespace(management: LocalCluster) -> str:
    """A fresh namespace in the management cluster, watched by the session operator."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    management.kubectl("create", "namespace", name)
    return name


@pytest.fixture
def unwatched_namespace(management: LocalCluster) -> str:
    """A fresh namespace no operator watches: objects there stay exactly as a test made them."""
    name = f"u-{uuid.uuid4().hex[:8]}"
    management.kubectl("create", "namespace", name)
    return name


@pytest.fixture(scope="session")
def capi(management: LocalCluster, colony_cluster: LocalCluster) -> Iterator[CapiHarness]:
    """Plays Cluster API: every colony Cluster becomes the `colony_cluster` (kwok GPU nodes)."""
    kubeconfig = colony_cluster.kubeconfig()
    with CapiHarness(str(management.kubeconfig_path), lambda _ns, _name: kubeconfig) as harness:
        yield harness


class KillableOperator:
    """An operator process of a test's own, watching only that test's namespace."""

    def __init__(self, management: LocalCluster, namespace: str, log_dir: Path) -> None:
        self.management = management
        self.namespace = namespace
        self._logs = (log_dir / f"operator-{i}.log" for i in range(1000))
        self.process = start_operator(management, next(self._logs), namespace)

    def crash_and_restart(self) -> None:
        """SIGKILL the operator (no chance to clean up) and start a fresh one."""
        self.process.kill()
        self.process = start_operator(self.management, next(self._logs), self.namespace)


@pytest.fixture
def killable_operator(management: LocalCluster, tmp_path: Path) -> Iterator[KillableOperator]:
    """A fresh `k-` namespace (not watched by the session operator) with its own operator."""
    namespace = f"k-{uuid.uuid4().hex[:8]}"
    management.kubectl("create", "namespace", namespace)
    operator = KillableOperator(management, namespace, tmp_path)
    try:
        yield operator
    finally:
        operator.process.stop()


def _wait_until_serving(management: LocalCluster, process: ManagedProcess) -> None:
    """Logging in is not watching: wait until the operator handled a probe object, so a test's
    first object does not wait for the watch streams to start."""
    name = f"t-probe-{uuid.uuid4().hex[:6]}"
    management.kubectl("create", "namespace", name)
    probe = {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "GPUProvisioningRequest",
        "metadata": {"name": "probe", "namespace": name},
        "spec": {"gpuShape": "A100", "numberOfGPUs": 1},
    }
    management.apply([probe])

    def handled() -> bool:
        status = management.get_json("gpr", "probe", "-n", name).get("status") or {}
        return status.get("phase") == "Queued"

    process.wait_until(handled, 120, "the probe GPR handled")
    management.kubectl("delete", "namespace", name, "--wait=false")  # it would queue ahead of tests' GPRs


def start_operator(
    management: LocalCluster,
    log: Path,
    namespace: str,
    metrics_port: int | None = None,
    extra_env: dict[str, str] | None = None,
    extra_args: Sequence[str] = (),
) -> ManagedProcess:
    """`python -m colony operator -n <namespace> [extra_args]` as a real process; returns once it has
    logged in (a follower of leader election too: it logs in for its webhook and liveness)."""
    # Accrued colony cost is brought forward every 2 s instead of every minute, so tests see it move.
    env = {
        **os.environ,
        "KUBECONFIG": str(management.kubeconfig_path),
        "COLONY_COST_REFRESH_SECONDS": "2",
        **(extra_env or {}),
    }
    argv = [sys.executable, "-m", "colony", "operator", "--verbose", f"--namespace={namespace}"]
    if metrics_port is not None:
        argv.append(f"--metrics-port={metrics_port}")
    argv += extra_args
    process = ManagedProcess("operator", argv, log, env=env)
    process.start()
    try:
        process.wait_until(
            lambda: "client is configured" in log.read_text().lower(), 60, "a configured client"
        )
    except BaseException:
        process.stop()
        raise
    return process


@functools.cache
def chart_repo_tls() -> Path:
    """A directory with a CA (ca.crt, world-readable for the image test's container) and a serving
    certificate for 127.0.0.1 (tls.crt, tls.key), for the tests' local Helm chart repository:
    repoURL must be https:// or oci:// (issue 16, G1). The session operator's helm trusts the CA
    through SSL_CERT_FILE."""
    from tests.integration.test_expression_bounds import webhook_certificates

    directory = Path(tempfile.mkdtemp(prefix="colony-chart-tls-"))
    directory.chmod(0o755)
    (directory / "ca.crt").write_bytes(webhook_certificates(directory))
    (directory / "ca.crt").chmod(0o644)
    return directory


@functools.cache
def session_metrics_port() -> int:
    """The port the session operator serves /metrics on (free when first asked)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def operator_process(
    management: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ManagedProcess]:
    """`python -m colony operator` as a real process against the management cluster."""
    process = start_operator(
        management,
        tmp_path_factory.mktemp("operator") / "operator.log",
        SHARED_OPERATOR_NAMESPACES,
        metrics_port=session_metrics_port(),
        extra_env={"SSL_CERT_FILE": str(chart_repo_tls() / "ca.crt")},
    )
    try:
        _wait_until_serving(management, process)
        yield process
    finally:
        process.stop()


OPERATOR_LOG_TAIL_LINES = 400
"""How much of the session operator's log a failed test's report shows (its last lines)."""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """A failed test that used the session operator gets the operator's log lines written during it
    in its report: in CI that log is the only trace of what the operator decided."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    funcargs = getattr(item, "funcargs", {})
    process = funcargs.get("operator_process")
    start = item.stash.get(_OPERATOR_LOG_START, None)
    if not isinstance(process, ManagedProcess) or start is None:
        return
    try:
        with open(process.log_path, "rb") as log:
            log.seek(start)
            lines = log.read().decode(errors="replace").splitlines()
    except OSError as error:
        report.sections.append(("operator log", f"(not readable: {error})"))
        return
    shown = lines[-OPERATOR_LOG_TAIL_LINES:]
    left_out = len(lines) - len(shown)
    skipped = f"({left_out} earlier lines of this test left out)\n" if left_out else ""
    report.sections.append(("operator log during this test", skipped + "\n".join(shown)))


_OPERATOR_LOG_START = pytest.StashKey[int]()


@pytest.fixture(autouse=True)
def _mark_operator_log(request: pytest.FixtureRequest) -> None:
    """Remember where the session operator's log stood when a test using it began."""
    if "operator_process" not in request.fixturenames:
        return
    process = request.getfixturevalue("operator_process")
    with contextlib.suppress(OSError):
        request.node.stash[_OPERATOR_LOG_START] = os.path.getsize(process.log_path)


def eventually(check: Callable[[], Any], timeout: float = 20, interval: float = 0.25) -> Any:
    """Call `check` until it returns a truthy value or stops raising; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except AssertionError as error:
            last_error = error
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s: {last_error}")


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
