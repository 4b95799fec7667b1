"""hack/install-via-helm.sh and hack/start-dev-env.sh need Docker, a cluster and the internet, so they
cannot run here for real: they are checked for syntax (bash -n, shellcheck when installed), for
taking every version from src/colony/versions.env, and run end to end against stand-ins for helm,
kubectl, kind and docker that record what they were asked to do."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from colony.versions import read_pinned_versions

ROOT = Path(__file__).resolve().parents[2]
HACK = ROOT / "hack"
SCRIPTS = ("install-via-helm.sh", "start-dev-env.sh")
VERSION_VARIABLE = re.compile(r"\$\{?([A-Z][A-Z0-9_]*_(?:VERSION|IMAGE))\b")
LITERAL_VERSION = re.compile(r"\bv?\d+\.\d+\.\d+\b|sha256:[0-9a-f]{12}")


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_is_executable_bash_without_syntax_errors(script: str) -> None:
    path = HACK / script
    assert path.stat().st_mode & stat.S_IXUSR, f"{script} is not executable"
    assert path.read_text().startswith("#!/usr/bin/env bash\n")
    result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_is_shellcheck_clean(script: str) -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed")
    result = subprocess.run(
        [shellcheck, "-x", "--source-path=SCRIPTDIR", str(HACK / script)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_takes_every_version_from_versions_env(script: str) -> None:
    text = (HACK / script).read_text()
    assert 'source "$root/src/colony/versions.env"' in text
    pinned = read_pinned_versions()
    used = set(VERSION_VARIABLE.findall(text))
    assert used, f"{script} uses no pinned version"
    assert used <= set(pinned), f"{script} uses versions not pinned in versions.env: {used - set(pinned)}"
    code = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    literals = [line for line in code if LITERAL_VERSION.search(line)]
    assert not literals, (
        f"{script} spells versions itself instead of taking them from versions.env: {literals}"
    )


def test_kind_node_image_is_pinned_by_digest() -> None:
    assert re.fullmatch(
        r"kindest/node:v1\.\d+\.\d+@sha256:[0-9a-f]{64}", read_pinned_versions()["KIND_NODE_IMAGE"]
    )


# -- end to end against recording stand-ins -----------------------------------------------------------------

RECORDER = """#!/usr/bin/env bash
# Records its command line (and the content of every --values file and of stdin for `-f -` and
# `--config -`) into $CALLS, then answers like the real tool would on success.
{
  printf '%s' "$(basename "$0")"
  printf ' %q' "$@"
  printf '\\n'
  previous=""
  for arg in "$@"; do
    if [[ "$previous" == --values && -f "$arg" ]]; then
      sed 's/^/    | /' "$arg"
    fi
    previous="$arg"
  done
} >>"$CALLS"
case "$(basename "$0") $1" in
  "kind version") echo "$FAKE_KIND_VERSION" ;;
  "kind create") sed 's/^/    | /' >>"$CALLS" ;;
  "kubectl apply") cat >/dev/null ;;
esac
exit 0
"""


def _stand_ins(tmp_path: Path, *tools: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in tools:
        path = bin_dir / tool
        path.write_text(RECORDER)
        path.chmod(0o755)
    return {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "CALLS": str(tmp_path / "calls.log"),
        "FAKE_KIND_VERSION": read_pinned_versions()["KIND_VERSION"].removeprefix("v"),
    }


def _run(script: str, env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        ["bash", str(HACK / script), *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return Path(env["CALLS"]).read_text()


def test_install_via_helm_installs_the_pinned_stack_then_the_chart(tmp_path: Path) -> None:
    v = read_pinned_versions()
    values = tmp_path / "values.yaml"
    values.write_text("watchNamespaces: [team-a]\n")
    env = _stand_ins(tmp_path, "helm", "kubectl")
    env |= {"INFRA_PROVIDERS": "docker,aws", "AWS_B64ENCODED_CREDENTIALS": "c2VjcmV0"}
    calls = _run("install-via-helm.sh", env, str(values))

    helm = [line for line in calls.splitlines() if line.startswith("helm upgrade --install")]
    assert [line.split()[3] for line in helm] == ["cert-manager", "capi-operator", "colony-operator"]
    assert f"--version {v['CERT_MANAGER_VERSION']}" in helm[0]
    assert f"--version {v['CAPI_OPERATOR_VERSION'].removeprefix('v')}" in helm[1]
    assert f"{ROOT}/charts/colony-operator" in helm[2] and f"--values {values}" in helm[2]
    providers = calls.split(helm[1], 1)[1].split("\nhelm ", 1)[0]
    for line in (
        f"cluster-api: {{version: {v['CLUSTER_API_VERSION']}}}",
        f"k0sproject-k0smotron: {{version: {v['K0SMOTRON_VERSION']}}}",
        f"helm: {{version: {v['CAAPH_VERSION']}}}",
        f"docker: {{version: {v['CLUSTER_API_VERSION']}}}",
        f"aws: {{version: {v['CAPA_VERSION']}}}",
        "configSecret: {name: capi-provider-variables, namespace: capi-operator-system}",
    ):
        assert line in providers, providers
    waited = [line for line in calls.splitlines() if line.startswith("kubectl wait")]
    assert any("infrastructureprovider/aws" in line for line in waited)
    assert any("coreprovider/cluster-api" in line for line in waited)
    # The AWS credentials go into the operator's variables Secret, never onto a command line of helm.
    assert "c2VjcmV0" not in "\n".join(helm)


def test_install_via_helm_refuses_aws_without_credentials(tmp_path: Path) -> None:
    env = _stand_ins(tmp_path, "helm", "kubectl") | {"INFRA_PROVIDERS": "aws"}
    result = subprocess.run(
        ["bash", str(HACK / "install-via-helm.sh")], capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 1 and "AWS_B64ENCODED_CREDENTIALS" in result.stderr


def test_start_dev_env_creates_the_pinned_kind_cluster_and_installs(tmp_path: Path) -> None:
    v = read_pinned_versions()
    env = _stand_ins(tmp_path, "helm", "kubectl", "kind", "docker")
    calls = _run("start-dev-env.sh", env)

    create = next(line for line in calls.splitlines() if line.startswith("kind create cluster"))
    assert f"--image {v['KIND_NODE_IMAGE']}" in create.replace("\\", "")
    assert "containerPath: /var/run/docker.sock" in calls
    assert "docker build --tag colony-operator:dev" in calls
    assert "kind load docker-image colony-operator:dev --name colony-dev" in calls
    chart = next(line for line in calls.splitlines() if "charts/colony-operator" in line)
    dev_values = calls.split(chart, 1)[1]
    assert "pullPolicy: Never" in dev_values and "docker: {version:" in calls
    assert os.path.basename(chart.split()[3]) == "colony-operator"
