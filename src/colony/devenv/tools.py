"""Where the control-plane binaries and upstream CRDs live, and how they get built.

Versions come from colony/versions.env (the one place where external versions are pinned). The
binaries and CRDs live in a cache outside the repository (COLONY_CACHE_DIR, default
~/.cache/colony-operator) and are built by the hack/ scripts when missing.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from colony.versions import PINNED_VERSIONS_FILE, read_pinned_versions

BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-scheduler",
    "kube-controller-manager",
    "kubectl",
    "kwok",
    "helm",
    "vc-scheduler",
)


class ToolsError(RuntimeError):
    """The control-plane tools are missing and could not be built."""


def repo_root() -> Path:
    """The repository root (this package is used from a source checkout in development)."""
    root = Path(os.environ.get("COLONY_REPO_ROOT", Path(__file__).resolve().parents[3]))
    if not (root / "hack" / "build-control-plane.sh").is_file():
        raise ToolsError(f"{root} is not a colony-operator checkout (no hack/build-control-plane.sh)")
    return root


def cache_dir() -> Path:
    """The cache directory for built binaries and downloaded CRDs."""
    return Path(os.environ.get("COLONY_CACHE_DIR", Path.home() / ".cache" / "colony-operator"))


def binary_dir() -> Path:
    """Directory of the binaries for the pinned versions (same naming as the build script)."""
    v = read_pinned_versions()
    name = (
        f"k8s-{v['KUBERNETES_VERSION']}-etcd-{v['ETCD_VERSION']}"
        f"-kwok-{v['KWOK_VERSION']}-helm-{v['HELM_VERSION']}-volcano-{v['VOLCANO_VERSION']}"
    )
    return cache_dir() / "bin" / name


def crd_dir() -> Path:
    """Directory of the upstream CRDs for the pinned versions (same key as hack/fetch-crds.sh)."""
    digest = hashlib.sha256(PINNED_VERSIONS_FILE.read_bytes()).hexdigest()[:12]
    return cache_dir() / "crds" / digest


@dataclass(frozen=True)
class Tools:
    """Absolute paths of the control-plane binaries and the upstream CRD directory."""

    bin_dir: Path
    upstream_crds: Path

    def binary(self, name: str) -> Path:
        """Path of one binary, e.g. `kube-apiserver`."""
        return self.bin_dir / name

    @property
    def kubectl(self) -> Path:
        return self.binary("kubectl")


def ensure_tools(build: bool = True) -> Tools:
    """Return the tools, building or downloading whatever is missing when `build` is true."""
    bins, crds = binary_dir(), crd_dir()
    missing = [name for name in BINARIES if not (bins / name).is_file()]
    if missing and build:
        _run_script("build-control-plane.sh")
    if not (crds / ".complete").is_file() and build:
        _run_script("fetch-crds.sh")
    missing = [name for name in BINARIES if not (bins / name).is_file()]
    if missing:
        raise ToolsError(f"missing binaries {missing} in {bins}; run hack/build-control-plane.sh")
    if not (crds / ".complete").is_file():
        raise ToolsError(f"upstream CRDs missing in {crds}; run hack/fetch-crds.sh")
    return Tools(bins, crds)


def torch_env_dir() -> Path:
    """The venv with the pinned PyTorch for the real DDP run (same naming as hack/torch-venv.sh)."""
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    return cache_dir() / f"torch-{read_pinned_versions()['TORCH_VERSION']}-py{python}"


def ensure_torch_env(build: bool = True) -> Path:
    """Return the PyTorch venv's bin directory (with `torchrun`), creating the venv when missing."""
    env = torch_env_dir()
    if not (env / ".complete").is_file() and build:
        _run_script("torch-venv.sh", {"PYTHON": sys.executable})
    if not (env / ".complete").is_file():
        raise ToolsError(f"no PyTorch environment in {env}; run hack/torch-venv.sh")
    return env / "bin"


def _run_script(name: str, env: dict[str, str] | None = None) -> None:
    script = repo_root() / "hack" / name
    result = subprocess.run(
        ["bash", str(script)], check=False, stdout=subprocess.DEVNULL, env={**os.environ, **(env or {})}
    )
    if result.returncode != 0:
        raise ToolsError(f"{script} failed with exit code {result.returncode}")
