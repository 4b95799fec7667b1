"""The Dockerfile against the pins of versions.env and the image's promises (non-root, no build
tools in the final stage); the image itself is built and run by tests/integration/test_image.py."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from colony.versions import pinned

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def _arg_defaults() -> dict[str, str]:
    """ARG NAME=default lines (quotes stripped)."""
    return {m[1]: m[2].strip('"') for m in re.finditer(r"^ARG (\w+)=(.*)$", DOCKERFILE, re.M)}


def _stages() -> list[str]:
    """The text of each build stage, from its FROM line on."""
    parts = re.split(r"^(?=FROM )", DOCKERFILE, flags=re.M)
    return [p for p in parts if p.startswith("FROM ")]


def test_arg_defaults_are_the_pinned_versions() -> None:
    args = _arg_defaults()
    minor = pinned("KUBERNETES_VERSION").split(".")[1]
    assert args["PYTHON_IMAGE"] == pinned("PYTHON_IMAGE")
    assert (
        args["GOLANG_IMAGE"]
        == f"golang:{pinned('GO_TOOLCHAIN').removeprefix('go')}-{pinned('IMAGE_DEBIAN_SUITE')}"
    )
    assert args["HELM_VERSION"] == pinned("HELM_VERSION")
    assert args["HELM_K8S_MINOR"] == minor
    # the official base is of the same Debian release as the base hack/image-base.sh makes
    assert pinned("PYTHON_IMAGE").endswith(f"-{pinned('IMAGE_DEBIAN_SUITE')}")


def test_final_stage_is_non_root_and_has_no_build_tools() -> None:
    *builders, final = _stages()
    assert [s.split()[1:4] for s in builders] == [
        ["${GOLANG_IMAGE}", "AS", "helm"],
        ["${PYTHON_IMAGE}", "AS", "build"],
    ]
    assert final.splitlines()[0] == "FROM ${PYTHON_IMAGE}"  # the build stage's python, for its venv
    assert re.search(r"^USER 65532:65532$", final, re.M)
    assert "apt-get" not in final and "pip" not in final
    # Only the venv and helm come from the builders; the wheels are built from requirements.lock.
    assert re.findall(r"^COPY --from=(\S+) (\S+)", final, re.M) == [
        ("build", "/opt/colony"),
        ("helm", "/helm"),
    ]
    assert "-c requirements.lock" in builders[1] and "--without-pip /opt/colony" in builders[1]


def test_dockerignore_keeps_the_context_small() -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    ignored = [line for line in lines if line and not line.startswith("#")]
    assert {".git", ".venv", "tests"} <= set(ignored)
    copied = re.findall(r"^COPY (?!--from)(.+) \S+$", DOCKERFILE, re.M)
    assert all(not any(part.startswith(i) for i in ignored) for line in copied for part in line.split())


@pytest.mark.parametrize(
    "script", ["hack/build-image.sh", "hack/image-base.sh", "hack/install-image-tools.sh"]
)
def test_image_scripts_parse(script: str) -> None:
    subprocess.run(["bash", "-n", str(ROOT / script)], check=True)


# -- hack/build-image.sh's choice of base, against a stand-in buildah ---------------------------------

FAKE_BUILDAH = """#!/usr/bin/env bash
echo "buildah $*" >>"$CALLS"
case "$1" in
  inspect) [[ "${FAKE_IN_STORAGE:-0}" == 1 ]]; exit ;;
  pull)
    case "$FAKE_PULL" in
      ok) exit 0 ;;
      hang) exec sleep 30 ;;
      *) echo 'Error: initializing source: lookup registry-1.docker.io: no such host' >&2; exit 125 ;;
    esac ;;
  images) echo "465 MB" ;;
esac
exit 0
"""
DEBIAN_BASE = "localhost/colony-operator-base:bookworm-stub"
OFFICIAL_BASE = f"docker.io/library/{pinned('PYTHON_IMAGE')}"


def _build_image(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """hack/build-image.sh in a copy of the tree whose other scripts are stand-ins, with a buildah
    that records its calls: the result and the calls."""
    root = tmp_path / "tree"
    (root / "hack").mkdir(parents=True)
    (root / "src" / "colony").mkdir(parents=True)
    shutil.copy(ROOT / "hack" / "build-image.sh", root / "hack")
    shutil.copy(ROOT / "src" / "colony" / "versions.env", root / "src" / "colony")
    (root / "hack" / "install-image-tools.sh").write_text("exit 0\n")
    (root / "hack" / "image-base.sh").write_text(f'echo "image-base" >>"$CALLS"; echo {DEBIAN_BASE}\n')
    (root / "hack" / "build-control-plane.sh").write_text(
        'mkdir -p "$HOME/bin" && touch "$HOME/bin/helm" && echo "$HOME/bin"\n'
    )
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    (bin_dir / "buildah").write_text(FAKE_BUILDAH)
    (bin_dir / "buildah").chmod(0o755)
    calls = tmp_path / "calls.log"
    calls.touch()
    full_env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "CALLS": str(calls),
        "IMAGE": "colony-operator:unit",
        "CA_BUNDLE": "/nonexistent",
        **env,
    }
    result = subprocess.run(
        ["bash", str(root / "hack" / "build-image.sh")],
        capture_output=True,
        text=True,
        env=full_env,
        check=False,
        timeout=60,
    )
    return result, calls.read_text().splitlines()


def _build_args(calls: list[str]) -> list[str]:
    (build,) = [c for c in calls if c.startswith("buildah build ")]
    return re.findall(r"--build-arg (\S+)", build)


def test_build_image_falls_back_to_the_debian_base_when_the_official_one_cannot_be_pulled(
    tmp_path: Path,
) -> None:
    result, calls = _build_image(tmp_path, FAKE_PULL="fail")
    assert result.returncode == 0, result.stderr
    assert f"buildah pull --quiet docker://{OFFICIAL_BASE}" in calls
    assert "image-base" in calls
    args = _build_args(calls)
    assert f"PYTHON_IMAGE={DEBIAN_BASE}" in args
    assert "BUILD_PACKAGES=gcc" in args  # Debian's python3 needs python3-dev and python3-venv (split)
    assert f"could not pull {OFFICIAL_BASE}: Error: initializing source" in result.stderr
    assert f"base: {DEBIAN_BASE} (Debian bookworm packages, mmdebstrap)" in result.stderr
    assert f"built colony-operator:unit on {DEBIAN_BASE}" in result.stderr
    assert result.stdout.splitlines()[-1] == "localhost/colony-operator:unit"


def test_build_image_gives_up_a_hanging_pull_after_its_timeout(tmp_path: Path) -> None:
    result, calls = _build_image(tmp_path, FAKE_PULL="hang", IMAGE_PULL_TIMEOUT="1")
    assert result.returncode == 0, result.stderr
    assert "timed out after 1 s" in result.stderr
    assert f"PYTHON_IMAGE={DEBIAN_BASE}" in _build_args(calls)


@pytest.mark.parametrize("stored", [False, True])
def test_build_image_uses_the_pinned_official_base_when_it_is_available(tmp_path: Path, stored: bool) -> None:
    result, calls = _build_image(tmp_path, FAKE_PULL="ok", FAKE_IN_STORAGE="1" if stored else "0")
    assert result.returncode == 0, result.stderr
    assert any(c.startswith("buildah pull") for c in calls) is not stored
    assert "image-base" not in calls
    args = _build_args(calls)
    assert f"PYTHON_IMAGE={OFFICIAL_BASE}" in args and not any(a.startswith("BUILD_PACKAGES") for a in args)
    assert f"base: {OFFICIAL_BASE} (official python image, " in result.stderr


def test_build_image_honours_an_explicit_base_and_image_base_modes(tmp_path: Path) -> None:
    result, calls = _build_image(tmp_path / "explicit", PYTHON_IMAGE="registry.example.com/python:3.11")
    assert result.returncode == 0, result.stderr
    assert not any(c.startswith("buildah pull") for c in calls) and "image-base" not in calls
    assert "PYTHON_IMAGE=registry.example.com/python:3.11" in _build_args(calls)

    result, calls = _build_image(tmp_path / "debian", IMAGE_BASE="debian", FAKE_PULL="ok")
    assert result.returncode == 0, result.stderr
    assert not any(c.startswith("buildah pull") for c in calls)
    assert f"PYTHON_IMAGE={DEBIAN_BASE}" in _build_args(calls)

    result, calls = _build_image(tmp_path / "official", IMAGE_BASE="official", FAKE_PULL="fail")
    assert result.returncode != 0 and "IMAGE_BASE=official" in result.stderr
    assert not any(c.startswith("buildah build") for c in calls)
