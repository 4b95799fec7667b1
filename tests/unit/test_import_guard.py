"""The operator process never loads the synchronous Kubernetes client (colony.import_guard)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from colony.import_guard import keep_unused_clients_out
first = keep_unused_clients_out()
import kopf
import colony.operator
import colony.controllers
import colony.controllers.colony
import colony.controllers.ddpjob
import colony.controllers.gpr
import colony.controllers.placement
loaded = sorted(
    m for m, v in sys.modules.items() if v is not None and (m == "kubernetes" or m.startswith("kubernetes."))
)
print(first, sys.modules.get("kubernetes") is None, loaded)
"""


def test_the_operator_imports_kopf_and_its_controllers_without_the_sync_client() -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.split() == ["True", "True", "[]"], result.stdout + result.stderr


def test_the_guard_changes_nothing_once_the_client_is_loaded() -> None:
    probe = "import kubernetes, sys\nfrom colony.import_guard import keep_unused_clients_out\n"
    probe += "print(keep_unused_clients_out(), sys.modules['kubernetes'] is not None)"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.split() == ["False", "True"]
