"""Every object rendered for a DDPJob passes the colony cluster's real API server (dry run)."""

from __future__ import annotations

import json

import pytest
import yaml

from colony.api.base import SecretKeyReference
from colony.api.ddpjob import DDPJobSpec
from colony.devenv.cluster import LocalCluster
from colony.render.ddpjob import JobRef, render_ddpjob
from tests.integration.conftest import EXAMPLES


@pytest.mark.parametrize("gang", ["volcano", "default"])
def test_rendered_job_is_valid(colony_cluster: LocalCluster, gang: str) -> None:
    namespace = f"render-{gang}"
    colony_cluster.kubectl("create", "namespace", namespace)
    seed = yaml.safe_load((EXAMPLES / "ddpjob.yaml").read_text())["spec"]
    spec = DDPJobSpec.model_validate(
        seed | {"gangScheduler": gang, "resources": {"requests": {"cpu": 2, "memory": "8Gi"}}}
    )
    rendered = render_ddpjob(
        JobRef("test-ddp-job", namespace, "uid-1"), spec, wandb_secret=SecretKeyReference(name="wandb")
    )
    items = list(rendered.manifests)
    result = colony_cluster.kubectl(
        "apply",
        "--server-side",
        "--dry-run=server",
        "-o",
        "json",
        "-f",
        "-",
        input_text=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
    )
    stored = json.loads(result.stdout)["items"]
    assert [s["kind"] for s in stored] == [i["kind"] for i in items]
    pods = [s for s in stored if s["kind"] == "Pod"]
    assert pods[0]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert colony_cluster.kubectl("get", "pods", "-n", namespace, "-o", "name").stdout == ""
