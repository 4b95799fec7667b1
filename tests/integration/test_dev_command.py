"""End to end: `colony dev` (what `make dev` runs) serves a working environment; Ctrl-C stops all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from colony.devenv.tools import Tools
from tests.integration.conftest import EXAMPLES, eventually


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
            180,
            0.5,
        )
        assert dev.poll() is None, log.read_text()
        text = log.read_text()
        assert "export KUBECONFIG=" in text and "kubectl get colonies" in text
        management = tmp_path / "management.kubeconfig"
        colony = tmp_path / "dev-colony.kubeconfig"

        nodes = json.loads(_kubectl(tools, colony, "get", "nodes", "-o", "json"))["items"]
        assert len(nodes) == 2
        secret = json.loads(
            _kubectl(tools, management, "get", "secret", "dev-colony-kubeconfig", "-o", "json")
        )
        assert "value" in secret["data"]

        _kubectl(tools, management, "apply", "-f", str(EXAMPLES / "colony-aws.yaml"))

        def accepted() -> bool:
            colony_obj = json.loads(_kubectl(tools, management, "get", "colony", "test-colony", "-o", "json"))
            return colony_obj.get("status", {}).get("observedGeneration") == 1

        eventually(accepted, 30)
        # The demo colony (the seed's docker colony) becomes Ready with the colony cluster's GPUs.
        eventually(lambda: "demo colony docker-colony-ray is Ready" in log.read_text(), 90, 0.5)
        demo = json.loads(_kubectl(tools, management, "get", "colony", "docker-colony-ray", "-o", "json"))
        assert demo["status"]["gpus"] == 16  # 1 A100 node + 1 H100 node, 8 GPUs each
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
