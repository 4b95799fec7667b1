"""Fixtures that start real control planes: one management cluster and one colony cluster per test
session, a fresh namespace per test, and the operator as a real process."""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

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


@pytest.fixture
def namespace(management: LocalCluster) -> str:
    """A fresh namespace in the management cluster (left behind: deletion is not awaited)."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    management.kubectl("create", "namespace", name)
    return name


@pytest.fixture(scope="session")
def operator_process(
    management: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ManagedProcess]:
    """`python -m colony operator` as a real process against the management cluster."""
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    env = {**os.environ, "KUBECONFIG": str(management.kubeconfig_path)}
    argv = [sys.executable, "-m", "colony", "operator", "--verbose"]
    process = ManagedProcess("operator", argv, log, env=env)
    try:
        process.start()
        process.wait_until(lambda: "Client is configured" in log.read_text(), 60, "a configured client")
        yield process
    finally:
        process.stop()


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
