"""The shipped artifact, proven: the operator image built by `make image` (buildah, no Docker) runs
its entrypoint as UID 65532 with chroot isolation on the host network against the local management
cluster, turns a Colony of an existing (kwok) cluster Ready, installs an add-on there with the helm
inside the image, and creates a DDPJob's pods on it. Its uncompressed size is printed and held
under a budget (SIZE_BUDGET_MB).

Runs when the image exists (`make image`; `make image-test` builds it and runs this file), or when
COLONY_TEST_IMAGE_BUILD=1 lets the test build it (about 6 minutes cold, seconds warm); otherwise it
is skipped with the command to run. COLONY_TEST_IMAGE names the image (default the Makefile's).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from colony.devenv.cluster import LocalCluster
from colony.devenv.process import ManagedProcess, free_port
from colony.labels import JOB_LABEL
from colony.versions import pinned
from tests.integration.conftest import chart_repo_tls, eventually
from tests.integration.test_colony_controller import _apply, _existing_colony, _kubeconfig_secret, _phase_is
from tests.integration.test_ddpjob_controller import _job
from tests.integration.test_existing_addons import _configmap, chart_repo  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_IMAGE = "localhost/colony-operator:dev"
BUILDAH = shutil.which("buildah")
# Uncompressed size budget of the image (465 MB on the Debian base in CI, December 2026): a
# regression, such as build tools or a second copy of the dependencies in the final stage, fails.
SIZE_BUDGET_MB = 600
# The decimal units of `buildah images --format {{.Size}}` (go-units' HumanSize, 3 significant digits).
SIZE_UNITS = {"B": 1, "kB": 10**3, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


def _buildah(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    assert BUILDAH is not None
    return subprocess.run([BUILDAH, *args], check=check, capture_output=True, text=True, timeout=600)


def _image_exists(image: str) -> bool:
    return _buildah("inspect", "--type", "image", image, check=False).returncode == 0


@pytest.fixture(scope="session")
def image() -> str:
    """The operator image in buildah's storage: existing, or built when COLONY_TEST_IMAGE_BUILD=1."""
    name = os.environ.get("COLONY_TEST_IMAGE", DEFAULT_IMAGE)
    build = os.environ.get("COLONY_TEST_IMAGE_BUILD") == "1"
    if BUILDAH is None and not build:
        pytest.skip("buildah is not installed: `make image-test` installs it, builds the image and runs this")
    if not (BUILDAH and _image_exists(name)):
        if not build:
            pytest.skip(
                f"no image {name}: `make image-test` builds it and runs this (COLONY_TEST_IMAGE_BUILD=1)"
            )
        tag = name.removeprefix("localhost/")
        subprocess.run(
            ["bash", str(ROOT / "hack/build-image.sh")], env={**os.environ, "IMAGE": tag}, check=True
        )
    return name


@pytest.fixture
def container(image: str) -> Iterator[str]:
    """A working container of the image (its root filesystem and config; nothing runs yet)."""
    name = f"colony-image-test-{uuid.uuid4().hex[:8]}"
    _buildah("from", "--quiet", "--name", name, image)
    try:
        yield name
    finally:
        _buildah("rm", name, check=False)


def _run_argv(
    container: str, *argv: str, volumes: tuple[str, ...] = (), env: tuple[str, ...] = ()
) -> list[str]:
    """`buildah run` of `argv` in the container as the image's user, chroot isolation, host network."""
    assert BUILDAH is not None
    options = [f"--volume={v}" for v in volumes] + [f"--env={e}" for e in env]
    return [BUILDAH, "run", "--isolation", "chroot", "--network", "host", *options, container, "--", *argv]


def _config(container: str) -> dict[str, Any]:
    """The OCI image config of the container (user, entrypoint, env)."""
    config: dict[str, Any] = json.loads(_buildah("inspect", container).stdout)["OCIv1"]["config"]
    return config


def _image_size(image: str) -> tuple[str, int]:
    """The image's uncompressed size as hack/build-image.sh reports it ("465 MB"), and in bytes."""
    out = _buildah("images", "--format", "{{.Size}}", "--filter", f"reference={image}").stdout
    text = out.splitlines()[0].strip()
    match = re.fullmatch(r"([0-9.]+)\s*([kKMGT]?B)", text)
    assert match, f"unexpected size {text!r} of {image}"
    return text, round(float(match[1]) * SIZE_UNITS[match[2]])


def _ddpjob_status(management: LocalCluster, namespace: str, phase: str) -> dict[str, Any] | None:
    status: dict[str, Any] = (
        management.get_json("ddpjob", "test-ddp-job", "-n", namespace).get("status") or {}
    )
    return status if status.get("phase") == phase else None


def test_image_runs_as_non_root_without_build_tools(container: str) -> None:
    config = _config(container)
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["colony", "operator"]
    script = (
        'echo "uid=$(id -u)"; echo "gid=$(id -g)"; '
        "for t in gcc cc c++ make pip pip3 python3 helm colony; do "
        '  p=$(command -v "$t") && echo "$t=$p" || echo "$t=-"; done; '
        "h=$(ls /usr/include/python3*/Python.h /usr/local/include/python3*/Python.h 2>/dev/null); "
        'echo "headers=${h:--}"; '
        "echo \"helm-version=$(helm version --template '{{.Version}}')\"; "
        "echo \"core=$(python3 -c 'import colony.scheduling.queueing.core as c; print(c.__file__)')\""
    )
    out = subprocess.run(_run_argv(container, "sh", "-c", script), check=True, capture_output=True, text=True)
    found = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    assert (found["uid"], found["gid"]) == ("65532", "65532")
    # no compiler, no pip (the venv was made without it), no Python headers
    tools = ("gcc", "cc", "c++", "make", "pip", "pip3", "headers")
    assert {t: found[t] for t in tools} == dict.fromkeys(tools, "-")
    assert found["colony"] == "/opt/colony/bin/colony" and found["helm"] == "/usr/local/bin/helm"
    assert found["python3"] != "-"
    assert found["helm-version"] == pinned("HELM_VERSION")
    assert found["core"].endswith(".so")  # the scheduler core as compiled by mypyc


def test_image_size_is_reported_and_within_budget(image: str, capsys: pytest.CaptureFixture[str]) -> None:
    text, size = _image_size(image)
    with capsys.disabled():  # into the test log (CI's too), not only on failure
        print(f"\n[test_image] {image}: size {text} (uncompressed), budget {SIZE_BUDGET_MB} MB")
    assert size > 50 * 10**6, f"{image} is {text}: not a whole image?"
    assert size < SIZE_BUDGET_MB * 10**6, f"{image} is {text}, over the {SIZE_BUDGET_MB} MB budget"


def test_image_operator_makes_existing_colony_ready_and_runs_a_ddpjob(
    image: str,  # first (session scope, like the clusters): without an image, skip before they start
    management: LocalCluster,
    colony_cluster: LocalCluster,
    container: str,
    chart_repo: str,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    # A namespace no other operator of the test session watches (they watch t-* and k-*).
    namespace = f"i-{uuid.uuid4().hex[:8]}"
    management.kubectl("create", "namespace", namespace)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(management.kubeconfig_path.read_text())
    kubeconfig.chmod(0o644)  # readable by UID 65532 inside the container
    health = free_port()
    config = _config(container)
    argv = _run_argv(
        container,
        *config["Entrypoint"],
        "--verbose",
        f"--namespace={namespace}",
        f"--liveness=http://127.0.0.1:{health}/healthz",
        # The local chart repository is https with a test CA (repoURL must be https:// or oci://).
        volumes=(
            f"{kubeconfig}:/run/colony/kubeconfig:ro",
            f"{chart_repo_tls() / 'ca.crt'}:/run/colony/chart-ca.crt:ro",
        ),
        env=("KUBECONFIG=/run/colony/kubeconfig", "SSL_CERT_FILE=/run/colony/chart-ca.crt"),
    )
    process = ManagedProcess("image-operator", argv, tmp_path / "operator.log")
    process.start()
    try:
        process.wait_until(
            lambda: "client is configured" in process.log_tail(200).lower(), 120, "a configured client"
        )
        process.wait_until(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{health}/healthz", timeout=2).status == 200,
            60,
            "a liveness answer",
        )

        # A Colony of an existing cluster (the kwok colony cluster) with one add-on from the local
        # chart repository, installed by the helm inside the image.
        _kubeconfig_secret(management, namespace, "gpu-kubeconfig", colony_cluster.kubeconfig())
        colony = _existing_colony("test-colony", "gpu-kubeconfig")
        target = f"img-addons-{uuid.uuid4().hex[:6]}"
        colony["spec"]["additionalDependencies"] = [
            {
                "name": "demo",
                "spec": {
                    "repoURL": chart_repo,
                    "chartName": "demo",
                    "version": "0.1.0",
                    "releaseName": "demo",
                    "namespace": target,
                    "valuesTemplate": "greeting: from-the-image\n",
                },
            }
        ]
        _apply(management, namespace, colony)
        ready = eventually(lambda: _phase_is(management, namespace, "test-colony", "Ready"), 60)
        assert ready["status"]["gpus"] > 0
        installed = eventually(lambda: _configmap(colony_cluster, target, "demo-settings"), 120)
        assert installed["data"] == {"chartVersion": "0.1.0", "greeting": "from-the-image"}

        # The seed DDPJob: its worker pods appear on the colony cluster, one per node.
        _apply(management, namespace, _job())

        def pods() -> list[dict[str, Any]]:
            selector = f"{JOB_LABEL}=test-ddp-job"
            items: list[dict[str, Any]] = colony_cluster.get_json("pods", "-n", namespace, "-l", selector)[
                "items"
            ]
            return items if len(items) == 2 else []

        created = eventually(pods, 60)
        commands = sorted(p["spec"]["containers"][0]["command"][:4] for p in created)
        assert [c[3] for c in commands] == ["--node-rank=0", "--node-rank=1"]
        # placed on the colony's cluster; gang-scheduled by Volcano there, the job runs
        status = eventually(lambda: _ddpjob_status(management, namespace, "Running"), 60)
        assert (status["colony"], status["cluster"]) == ("test-colony", "onprem")
        assert process.running(), process.log_tail()
    finally:
        process.stop()
    log = (tmp_path / "operator.log").read_text(errors="replace")
    assert "Traceback" not in log, log[-4000:]
