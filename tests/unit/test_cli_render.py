"""`colony render` (offline) prints what the controllers' renderers produce; the shared helpers
the controllers now call (render.resources) behave as the controllers did; cluster commands
without a kubeconfig fail with a hint, not a stack trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from colony.api.colony import ColonySpec
from colony.api.ddpjob import DDPJobSpec
from colony.cli.main import app
from colony.controllers.colony_children import desired_objects
from colony.render.colony import render_colony
from colony.render.contract import ColonyRef, HostedControlPlanePorts
from colony.render.ddpjob import JobRef, render_ddpjob
from colony.render.ports import allocate_hosted_ports, hosted_ports_key
from colony.render.resources import (
    UNKNOWN_UID,
    hosted_ports,
    on_reservation,
    render_ddpjob_resource,
    wandb_reference,
)
from tests.conftest import REPO_ROOT

runner = CliRunner()
EXAMPLES = REPO_ROOT / "examples"


def _example(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return document


def _render(*args: str) -> Any:
    result = runner.invoke(app, ["render", *args])
    assert result.exit_code == 0, result.output
    return result


def test_ddpjob_render_is_the_controllers_render_with_the_moved_wandb_secret() -> None:
    result = _render("-f", str(EXAMPLES / "ddpjob.yaml"), "-n", "team", "-o", "json")
    items = json.loads(result.stdout)["items"]
    spec = DDPJobSpec.model_validate(_example("ddpjob.yaml")["spec"])
    expected = render_ddpjob(
        JobRef("test-ddp-job", "team", UNKNOWN_UID),
        spec,
        wandb_secret=wandb_reference("test-ddp-job", spec),
    ).manifests
    assert items == list(expected)
    assert [i["kind"] for i in items] == ["Service", "PodGroup", "Pod", "Pod"]
    env = {e["name"]: e for e in items[2]["spec"]["containers"][0]["env"]}
    assert env["WANDB_API_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "test-ddp-job-wandb", "key": "value"}
    assert "XXXXXXXXX" not in result.stdout  # the plain key never reaches a rendered object


def test_colony_render_yaml_is_every_object_the_controller_applies() -> None:
    result = _render("-f", str(EXAMPLES / "colony-docker-ray.yaml"), "-n", "team")
    documents = [d for d in yaml.safe_load_all(result.stdout) if d]
    colony = _example("colony-docker-ray.yaml")
    spec = ColonySpec.model_validate(colony["spec"])
    name = colony["metadata"]["name"]
    ports = hosted_ports("team", name, spec, {})
    expected = desired_objects(render_colony(ColonyRef(name, "team", UNKNOWN_UID), spec, ports))
    assert documents == expected
    assert result.stdout.startswith(f"# Colony team/{name}: {len(expected)} object(s)")


def test_an_object_read_back_renders_its_attempt_uid_and_reservation() -> None:
    job = _example("ddpjob.yaml")
    job["metadata"] |= {"namespace": "ns", "uid": "u-1"}
    job["status"] = {"attempt": 2, "reservationLabel": "colony.exalsius.ai/gpr-x"}
    pods = render_ddpjob_resource(job).pods
    assert pods[0]["metadata"]["name"] == "test-ddp-job-worker-0-a2"
    assert "--rdzv-id=u-1-2" in pods[0]["spec"]["containers"][0]["command"]
    assert pods[0]["spec"]["nodeSelector"] == {"colony.exalsius.ai/gpr-x": "1"}


def test_on_reservation_without_a_label_keeps_the_spec() -> None:
    spec = DDPJobSpec.model_validate(_example("ddpjob.yaml")["spec"])
    assert on_reservation(spec, {}) is spec


def test_hosted_ports_keep_recorded_ones_and_skip_ports_of_other_colonies() -> None:
    spec = ColonySpec.model_validate(
        {
            "k8sVersion": "v1.30.3",
            "hostedControlPlaneEnabled": True,
            "colonyClusters": [
                {"clusterName": "a", "docker": {"replicas": 1}},
                {"clusterName": "b", "docker": {"replicas": 1}},
            ],
        }
    )
    fresh = allocate_hosted_ports(hosted_ports_key("ns", "c", "b"), set())
    other = {
        "metadata": {"name": "other", "namespace": "ns"},
        "status": {"clusters": [{"hostedControlPlane": {"apiPort": fresh.api, "konnectivityPort": 1}}]},
    }
    itself = {
        "metadata": {"name": "c", "namespace": "ns"},
        "status": {"clusters": [{"hostedControlPlane": {"apiPort": 30001, "konnectivityPort": 30002}}]},
    }
    status = {
        "clusters": [{"name": "a", "hostedControlPlane": {"apiPort": 30010, "konnectivityPort": 30011}}]
    }
    ports = hosted_ports("ns", "c", spec, status, [other, itself])
    assert ports["a"] == HostedControlPlanePorts(30010, 30011)
    assert fresh.api not in (ports["b"].api, ports["b"].konnectivity)
    assert hosted_ports("ns", "c", spec.model_copy(update={"hosted_control_plane_enabled": False}), {}) == {}


@pytest.mark.parametrize(
    ("content", "message", "code"),
    [
        ("kind: GPUQueue\napiVersion: infra.exalsius.ai/v1\nmetadata: {name: q}\n", "render knows Colony", 2),
        (
            "kind: DDPJob\napiVersion: training.exalsius.ai/v1\nmetadata: {name: j}\n"
            "spec: {parallelism: 0}\n",
            "DDPJob j is invalid: spec.parallelism",
            1,
        ),
    ],
)
def test_render_errors_are_one_line_with_an_exit_code(
    tmp_path: Path, content: str, message: str, code: int
) -> None:
    path = tmp_path / "in.yaml"
    path.write_text(content)
    result = runner.invoke(app, ["render", "-f", str(path)])
    assert result.exit_code == code
    assert message in result.stderr and "Traceback" not in result.output


def test_render_warns_about_unknown_add_ons_on_stderr(tmp_path: Path) -> None:
    colony = _example("colony-docker-ray.yaml")
    colony["spec"]["workloadDependencies"] = [{"name": "no-such-addon"}]
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(colony))
    result = _render("-f", str(path))
    assert "warning: Colony" in result.stderr and "no-such-addon" in result.stderr


def test_cluster_commands_without_a_kubeconfig_say_what_to_do(tmp_path: Path) -> None:
    result = runner.invoke(app, ["jobs", "list"], env={"KUBECONFIG": str(tmp_path / "none")})
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "error: no kubeconfig: pass --kubeconfig or set KUBECONFIG; in this checkout `make dev` starts "
        "a local cluster (it prints the export to use)"
    )


def test_outside_a_checkout_the_hint_is_the_helm_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["jobs", "list"], env={"KUBECONFIG": str(tmp_path / "none")})
    assert result.exit_code == 1
    assert "helm install colony-operator" in result.stderr and "make dev" not in result.stderr


def test_render_warns_about_unknown_gpu_types_with_the_closest_names(tmp_path: Path) -> None:
    job = yaml.safe_load((EXAMPLES / "ddpjob.yaml").read_text())
    job["spec"]["gpuTypes"] = ["A1000", "h100", "*"]
    job["spec"].pop("targetColony", None)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    result = _render("-f", str(path))
    assert "warning: DDPJob" in result.stderr
    assert "GPU type A1000 is not in the offer catalog; did you mean A100" in result.stderr
    assert "h100" not in result.stderr  # a known type, in another spelling
    assert "GPU type *" not in result.stderr  # the wildcard: every type


def test_an_unreachable_api_server_is_an_error_not_a_stack_trace(tmp_path: Path) -> None:
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "team"}}],
        "current-context": "x",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig))
    result = runner.invoke(app, ["gpr", "get", "g"], env={"KUBECONFIG": str(path)})
    assert result.exit_code == 1, result.output
    assert "cannot reach the Kubernetes API server" in result.stderr and "Traceback" not in result.output


def test_submit_refuses_what_is_not_a_ddpjob(tmp_path: Path) -> None:
    result = runner.invoke(app, ["jobs", "submit", str(EXAMPLES / "colony-aws.yaml")])
    assert result.exit_code == 2
    assert "is not a DDPJob" in result.stderr
