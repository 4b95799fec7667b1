"""End to end: `colony dev` (what `make dev` runs) serves a working environment, runs the demo to its
summary; Ctrl-C stops all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from colony.devenv.tools import Tools
from tests.integration.conftest import eventually


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _kubectl(tools: Tools, kubeconfig: Path, *args: str) -> str:
    result = subprocess.run(
        [str(tools.kubectl), f"--kubeconfig={kubeconfig}", *args], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_dev_environment_serves_and_stops_cleanly(tools: Tools, tmp_path: Path) -> None:
    log = tmp_path / "dev.log"
    with log.open("w") as out:
        dev = subprocess.Popen(
            [sys.executable, "-m", "colony", "dev", "--gpu-nodes=1", f"--state-dir={tmp_path}"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        eventually(
            lambda: "Initial authentication has finished" in log.read_text() or dev.poll() is not None,
            # two control planes start first: minutes on a loaded 2-core machine
            420,
            0.5,
        )
        assert dev.poll() is None, log.read_text()
        management = tmp_path / "management.kubeconfig"
        colony = tmp_path / "dev-colony.kubeconfig"
        nodes = json.loads(_kubectl(tools, colony, "get", "nodes", "-o", "json"))["items"]
        assert len(nodes) == 2  # 1 A100 node + 1 H100 node
        secret = json.loads(
            _kubectl(tools, management, "get", "secret", "dev-colony-kubeconfig", "-o", "json")
        )
        assert "value" in secret["data"]

        # the scripted demo: colony Ready, seed job Succeeded, GPRs admitted in priority order
        eventually(lambda: "demo summary" in log.read_text() or "demo failed" in log.read_text(), 240, 1)
        text = log.read_text()
        assert "demo summary" in text, text
        assert "export KUBECONFIG=" in text and "kubectl get colonies" in text
        colony_obj = json.loads(_kubectl(tools, management, "get", "colony", "test-colony", "-o", "json"))
        assert colony_obj["status"]["phase"] == "Ready"
        assert colony_obj["status"]["gpus"] == 16
        job = json.loads(_kubectl(tools, management, "get", "ddpjob", "test-ddp-job", "-o", "json"))
        assert job["status"]["phase"] == "Succeeded"
        admitted = {
            name: json.loads(_kubectl(tools, management, "get", "gpr", name, "-o", "json"))["status"][
                "admittedAt"
            ]
            for name in ("demo-hold", "demo-high", "demo-low")
        }
        assert admitted["demo-hold"] < admitted["demo-high"] < admitted["demo-low"]
        children = _descendants(dev.pid)
        assert len(children) >= 7  # 2x etcd, 2x apiserver, 2x scheduler, 2x kwok, controller-manager
    finally:
        dev.send_signal(signal.SIGINT)
        try:
            dev.wait(60)
        except subprocess.TimeoutExpired:
            dev.kill()
            raise
    assert dev.returncode == 0, log.read_text()
    time.sleep(0.5)
    assert not [pid for pid in children if Path(f"/proc/{pid}").exists()]
    assert not (tmp_path / "management.kubeconfig").exists()
