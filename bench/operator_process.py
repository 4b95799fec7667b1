"""The operator as a real process for the benchmarks that restart or churn it (soak, storm)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from colony.devenv.cluster import LocalCluster
from colony.devenv.process import ManagedProcess

READY_LINE = "Initial authentication has finished"
"""What the operator logs once its client is configured (it logs no client line without --verbose)."""


def start_operator(management: LocalCluster, log: Path, namespace: str) -> ManagedProcess:
    """`python -m colony operator --namespace=NAMESPACE` as a process, once it has logged in."""
    env = {**os.environ, "KUBECONFIG": str(management.kubeconfig_path)}
    argv = [sys.executable, "-m", "colony", "operator", f"--namespace={namespace}"]
    operator = ManagedProcess("operator", argv, log, env=env)
    operator.start()
    operator.wait_until(lambda: log.exists() and READY_LINE in log.read_text(), 120, "a configured client")
    return operator
