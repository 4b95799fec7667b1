"""The Dockerfile against the pins of versions.env and the image's promises (non-root, no build
tools in the final stage); the image itself is built and run by tests/integration/test_image.py."""

from __future__ import annotations

import re
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
