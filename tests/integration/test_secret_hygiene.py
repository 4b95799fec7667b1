"""A plain W&B key given in a DDPJob is moved into a Secret, and then found nowhere else.

A management API server of this test's own (scheduler, controller-manager, a kwok GPU node) writes
an audit log of every request at RequestResponse level (request and response bodies), Secrets at
Metadata level (as every production audit policy has it). The operator runs as a real process
(`colony operator --verbose`, the highest verbosity: kopf's debug lines included) under a
ServiceAccount of its own. A user creates a DDPJob with `kubectl apply` (client-side: kubectl's
last-applied-configuration annotation holds the key too) and a unique planted key; the job runs on
the management cluster, its worker succeeds, the user deletes the job.

What the test proves (the plain value and its base64 form alike):
1. every object of every listable kind, taken while the job runs and after it succeeded
   (annotations, kopf's and kubectl's included, status, Events, pods), contains neither, except the
   Secret the operator moved it into, whose data holds the base64 form; worker pods read it through
   a secretKeyRef and mount no ServiceAccount token;
2. the operator's log (text, --verbose) contains neither;
3. in the audit log, no request of the operator carries either in its body, and outside Secrets the
   value appears only in the user's own kubectl requests on the DDPJob and, in responses to the
   operator, only where the user's apply put it (`spec.wandbApiKey` and kubectl's last-applied
   annotation: the object as it was before the operator moved the key, e.g. in the response to
   kopf's finalizer PATCH). Nothing the operator wrote ever holds it again.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from colony.devenv.cluster import LocalCluster
from colony.devenv.environment import MANAGEMENT_UPSTREAM, own_crd_files, upstream_crd_files
from colony.devenv.kwok import EXIT_CODE_ANNOTATION, OUTCOME_ANNOTATION, GPUNodeSpec
from colony.devenv.process import ManagedProcess
from colony.devenv.tools import Tools
from colony.render.resources import LAST_APPLIED_ANNOTATION, without_plain_wandb_key
from tests.integration.conftest import eventually

AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    resources: [{group: "", resources: [secrets]}]
  - level: None
    resources: [{group: coordination.k8s.io, resources: [leases]}]
  - level: RequestResponse
"""
OPERATOR_SA = ("kube-system", "hygiene-operator")
NAMESPACE = "team-hygiene"
JOB = "leaky"
MOVED_SECRET = f"{JOB}-wandb"


@pytest.fixture(scope="module")
def cluster(tools: Tools) -> Iterator[LocalCluster]:
    """The audited management cluster, with every CRD and one kwok GPU node."""
    cluster = LocalCluster(
        "hygiene", tools, scheduler=True, controller_manager=True, kwok=True, audit_policy=AUDIT_POLICY
    )
    cluster.start()
    try:
        cluster.install_crds(own_crd_files() + upstream_crd_files(tools, MANAGEMENT_UPSTREAM))
        cluster.add_gpu_nodes([GPUNodeSpec("hygiene-gpu")])
        yield cluster
    finally:
        cluster.stop()


def _operator(cluster: LocalCluster, tmp_path: Path) -> ManagedProcess:
    """`colony operator --verbose` as a ServiceAccount of its own (cluster-admin: RBAC is another
    test's subject), so the audit log tells its requests from the user's."""
    namespace, name = OPERATOR_SA
    cluster.kubectl("create", "serviceaccount", name, "-n", namespace)
    cluster.kubectl(
        "create",
        "clusterrolebinding",
        name,
        "--clusterrole=cluster-admin",
        f"--serviceaccount={namespace}:{name}",
    )
    token = cluster.kubectl("create", "token", name, "-n", namespace, "--duration=1h").stdout.strip()
    config = yaml.safe_load(cluster.kubeconfig())
    config["users"] = [{"name": "operator", "user": {"token": token}}]
    config["contexts"][0]["context"]["user"] = "operator"
    kubeconfig = tmp_path / "operator.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    log = tmp_path / "operator.log"
    argv = [sys.executable, "-m", "colony", "operator", "--verbose", f"--namespace={NAMESPACE}"]
    process = ManagedProcess("operator", argv, log, env={**os.environ, "KUBECONFIG": str(kubeconfig)})
    process.start()
    try:
        process.wait_until(
            lambda: "client is configured" in log.read_text().lower(), 60, "a configured client"
        )
    except BaseException:
        process.stop()
        raise
    return process


def _every_object(cluster: LocalCluster) -> list[dict[str, Any]]:
    """Every object of every listable kind, in every namespace."""
    kinds = cluster.kubectl("api-resources", "--verbs=list", "-o", "name").stdout.split()
    items: list[dict[str, Any]] = cluster.get_json(",".join(kinds), "-A")["items"]
    return items


def _is_moved_secret(obj: dict[str, Any]) -> bool:
    meta = obj["metadata"]
    return obj["kind"] == "Secret" and (meta.get("namespace"), meta["name"]) == (NAMESPACE, MOVED_SECRET)


def _leaks(cluster: LocalCluster, forms: tuple[str, ...]) -> list[str]:
    """`kind namespace/name` of every object holding one of `forms`, the moved Secret aside."""
    return [
        f"{obj['kind']} {obj['metadata'].get('namespace')}/{obj['metadata']['name']}"
        for obj in _every_object(cluster)
        if not _is_moved_secret(obj) and any(form in json.dumps(obj) for form in forms)
    ]


def _phase(cluster: LocalCluster) -> str | None:
    found = cluster.kubectl("get", "ddpjob", JOB, "-n", NAMESPACE, "-o", "json", check=False)
    return (json.loads(found.stdout).get("status") or {}).get("phase") if found.returncode == 0 else None


def _audit_events(cluster: LocalCluster) -> list[dict[str, Any]]:
    assert cluster.audit_log_path is not None and cluster.audit_log_path.exists()
    return [json.loads(line) for line in cluster.audit_log_path.read_text().splitlines() if line.strip()]


def _without_what_the_user_wrote(response: Any) -> Any:
    """A DDPJob response (or list of them) without the key where the user's apply put it:
    `spec.wandbApiKey` and kubectl's last-applied-configuration annotation."""
    if not isinstance(response, dict):
        return response
    response = json.loads(json.dumps(response))
    for obj in [response, *(response.get("items") or [])]:
        if not isinstance(obj, dict):
            continue
        if isinstance(obj.get("spec"), dict):
            obj["spec"].pop("wandbApiKey", None)
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        applied = without_plain_wandb_key(annotations.get(LAST_APPLIED_ANNOTATION, ""))
        if applied is not None:
            annotations[LAST_APPLIED_ANNOTATION] = applied
    return response


def test_a_planted_wandb_key_is_found_only_in_its_secret(cluster: LocalCluster, tmp_path: Path) -> None:
    key = f"wb-planted-{uuid.uuid4().hex}"
    forms = (key, base64.b64encode(key.encode()).decode())
    cluster.kubectl("create", "namespace", NAMESPACE)
    eventually(
        lambda: cluster.kubectl("get", "sa", "default", "-n", NAMESPACE, check=False).returncode == 0, 60
    )
    operator = _operator(cluster, tmp_path)
    job = {
        "apiVersion": "training.exalsius.ai/v1",
        "kind": "DDPJob",
        "metadata": {"name": JOB, "namespace": NAMESPACE},
        "spec": {
            "parallelism": 1,
            "nprocPerNode": 1,
            "image": "busybox",
            "scriptPath": "/train.py",
            "gangScheduler": "default",
            "wandbApiKey": key,
        },
    }
    try:
        cluster.apply([job], server_side=False)  # kubectl's client-side apply: last-applied holds the key
        eventually(lambda: _phase(cluster) == "Running", 90)
        pods = cluster.get_json("pods", "-n", NAMESPACE, "-l", f"training.exalsius.ai/job-name={JOB}")[
            "items"
        ]
        assert pods
        for pod in pods:
            (container,) = pod["spec"]["containers"]
            env = {e["name"]: e for e in container["env"]}
            assert env["WANDB_API_KEY"]["valueFrom"] == {
                "secretKeyRef": {"name": MOVED_SECRET, "key": "value"}
            }
            assert pod["spec"]["automountServiceAccountToken"] is False
            assert not any("projected" in v for v in pod["spec"].get("volumes") or []), pod["spec"]["volumes"]
        moved = cluster.get_json("secret", MOVED_SECRET, "-n", NAMESPACE)
        assert moved["data"]["value"] == forms[1]  # the grep below would see it: it is looked for
        assert not _leaks(cluster, forms), "while running"

        for pod in pods:
            cluster.kubectl(
                "annotate",
                "pod",
                pod["metadata"]["name"],
                "-n",
                NAMESPACE,
                f"{OUTCOME_ANNOTATION}=Succeeded",
                f"{EXIT_CODE_ANNOTATION}=0",
            )
        eventually(lambda: _phase(cluster) == "Succeeded", 60)
        ddpjob = cluster.get_json("ddpjob", JOB, "-n", NAMESPACE)
        annotations = ddpjob["metadata"]["annotations"]
        assert "colony.exalsius.ai/last-handled-configuration" in annotations
        assert "kubectl.kubernetes.io/last-applied-configuration" in annotations
        assert not _leaks(cluster, forms), "after success"

        cluster.kubectl("delete", "ddpjob", JOB, "-n", NAMESPACE, "--wait=false")
        eventually(
            lambda: _phase(cluster) is None and not cluster.get_json("pods", "-n", NAMESPACE)["items"], 60
        )
        eventually(
            lambda: cluster.kubectl("get", "secret", MOVED_SECRET, "-n", NAMESPACE, check=False).returncode,
            60,
        )
        assert not _leaks(cluster, forms), "after deletion"
    finally:
        operator.stop()

    log = (tmp_path / "operator.log").read_text()
    assert "Creation is in progress" in log and "Merge-patching" in log  # debug lines were written
    assert not [line for line in log.splitlines() if any(form in line for form in forms)]

    events = _audit_events(cluster)
    operator_user = "system:serviceaccount:{}:{}".format(*OPERATOR_SA)
    user_writes = [
        e
        for e in events
        if (e.get("objectRef") or {}).get("resource") == "ddpjobs"
        and e["verb"] == "create"
        and key in json.dumps(e.get("requestObject"))
    ]
    assert user_writes, "the audit log holds request bodies: the user's create carries the key"
    assert any(e["user"]["username"] == operator_user for e in events)
    leaking: list[str] = []
    for event in events:
        ref = event.get("objectRef") or {}
        where = f"{event['user']['username']} {event['verb']} {event['requestURI']}"
        if ref.get("resource") == "secrets":
            assert "requestObject" not in event and "responseObject" not in event, where
            continue
        users_own = ref.get("resource") == "ddpjobs" and event.get("userAgent", "").startswith("kubectl")
        request = json.dumps(event.get("requestObject"))
        response = event.get("responseObject")
        if ref.get("resource") == "ddpjobs":
            response = _without_what_the_user_wrote(response)
        if event["user"]["username"] == operator_user and any(form in request for form in forms):
            leaking.append(f"operator request body: {where}")
        elif not users_own and any(form in request for form in forms):
            leaking.append(f"request body: {where}")
        if any(form in json.dumps(response) for form in forms) and not users_own:
            leaking.append(f"response body: {where}")
    assert not leaking, "\n".join(leaking)
