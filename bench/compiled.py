"""The environment that runs the operator with its scheduler core compiled by mypyc, as it ships."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def compiled_core_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) with PYTHONPATH led by the compiled build of
    the current sources (hack/build-compiled.sh: cached, rebuilt when the sources changed)."""
    built = subprocess.run(
        ["bash", str(ROOT / "hack/build-compiled.sh")], check=True, capture_output=True, text=True
    )
    tree = built.stdout.strip().splitlines()[-1]
    return {**(base if base is not None else dict(os.environ)), "PYTHONPATH": f"{tree}{os.pathsep}{ROOT}"}
