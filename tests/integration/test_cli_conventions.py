"""kubectl conventions of the installed `colony` command against the real management cluster, run
as a user runs it (a subprocess): -A, --context/--kubeconfig, -o name, -w (a change shows within
2 s, from the watch), `colonies create --wait` (exit 0 on Ready, 1 with the reason on Failed) and
`colony queue`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from colony.devenv.capi_harness import CapiHarness
from colony.devenv.cluster import LocalCluster
from colony.devenv.process import ManagedProcess
from tests.integration.conftest import eventually
from tests.integration.test_colony_controller import _example, _existing_colony, _kubeconfig_secret

COLONY_BIN = Path(sys.executable).parent / "colony"


def colony(kubeconfig: Path | None, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`.venv/bin/colony ARGS` with KUBECONFIG set (or unset with None), stdout not a terminal."""
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return subprocess.run([str(COLONY_BIN), *args], env=env, capture_output=True, text=True, timeout=timeout)


def _registered(name: str, namespace: str) -> dict[str, Any]:
    document = _existing_colony(name, "no-such-secret")
    document["metadata"]["namespace"] = namespace
    return document


def test_all_namespaces_output_name_and_context(
    management: LocalCluster, unwatched_namespace: str, tmp_path: Path
) -> None:
    other = f"u-{uuid.uuid4().hex[:8]}"
    management.kubectl("create", "namespace", other)
    management.apply([_registered("alpha", unwatched_namespace), _registered("beta", other)])
    kubeconfig = management.kubeconfig_path

    everywhere = colony(kubeconfig, "colonies", "list", "-A")
    assert everywhere.returncode == 0, everywhere.stderr
    lines = everywhere.stdout.splitlines()
    assert lines[0].split()[:3] == ["NAMESPACE", "NAME", "PHASE"]
    rows = {tuple(line.split()[:2]) for line in lines[1:]}
    assert {(unwatched_namespace, "alpha"), (other, "beta")} <= rows

    names = colony(kubeconfig, "colonies", "list", "-n", unwatched_namespace, "-o", "name")
    assert names.returncode == 0, names.stderr
    assert names.stdout == "colony.infra.exalsius.ai/alpha\n"

    # --context picks a context of the file --kubeconfig names; its namespace is the default -n.
    config = yaml.safe_load(kubeconfig.read_text())
    good = config["contexts"][0]
    config["contexts"] = [
        {"name": "broken", "context": {**good["context"], "cluster": "nowhere"}},
        {"name": "mine", "context": {**good["context"], "namespace": other}},
    ]
    config["clusters"].append({"name": "nowhere", "cluster": {"server": "https://127.0.0.1:1"}})
    config["current-context"] = "broken"
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    chosen = colony(None, "colonies", "list", "--kubeconfig", str(path), "--context", "mine", "-o", "name")
    assert chosen.returncode == 0, chosen.stderr
    assert chosen.stdout == "colony.infra.exalsius.ai/beta\n"
    before = colony(
        None, "--kubeconfig", str(path), "--context", "mine", "colonies", "get", "beta", "-o", "json"
    )
    assert before.returncode == 0 and json.loads(before.stdout)["metadata"]["namespace"] == other
    current = colony(None, "colonies", "list", "--kubeconfig", str(path))
    assert current.returncode == 1
    assert current.stderr.startswith("error: cannot reach the Kubernetes API server")
    assert len(current.stderr.splitlines()) == 1


def test_jsonpath_output_of_list_and_get(management: LocalCluster, unwatched_namespace: str) -> None:
    ns = unwatched_namespace
    management.apply([_registered("alpha", ns), _registered("beta", ns)])
    status = json.dumps({"status": {"phase": "Ready"}})
    management.kubectl(
        "patch", "colony", "alpha", "-n", ns, "--subresource=status", "--type=merge", "-p", status
    )
    kubeconfig = management.kubeconfig_path

    names = colony(kubeconfig, "colonies", "list", "-n", ns, "-o", "jsonpath={.items[*].metadata.name}")
    assert (names.returncode, names.stdout, names.stderr) == (0, "alpha beta", "")

    template = r'{range .items[*]}{.metadata.name}{"\t"}{.status.phase}{"\n"}{end}'
    rows = colony(kubeconfig, "colonies", "list", "-A", "-o", f"jsonpath={template}")
    assert rows.returncode == 0, rows.stderr
    assert {"alpha\tReady", "beta\t"} <= set(rows.stdout.splitlines())

    one = colony(kubeconfig, "colonies", "get", "alpha", "-n", ns, "-o", "jsonpath=ns={.metadata.namespace}")
    assert (one.returncode, one.stdout) == (0, f"ns={ns}"), one.stderr
    clusters = "jsonpath={.spec.colonyClusters[*].clusterName}/{.status.phase}"
    assert colony(kubeconfig, "colonies", "get", "alpha", "-n", ns, "-o", clusters).stdout == "onprem/Ready"

    bad = colony(kubeconfig, "colonies", "list", "-n", ns, "-o", "jsonpath={.items[*")
    assert bad.returncode == 2 and bad.stdout == ""
    assert len(bad.stderr.splitlines()) == 1 and bad.stderr.startswith("error: "), bad.stderr
    assert "bad jsonpath template" in bad.stderr


def test_create_from_stdin_and_a_wait_that_times_out(
    management: LocalCluster, unwatched_namespace: str
) -> None:
    """No operator watches the namespace: the colony never gets Ready, --wait gives up with the state."""
    manifest = yaml.safe_dump(_existing_colony("stalled", "no-such-secret"))
    env = {**os.environ, "KUBECONFIG": str(management.kubeconfig_path), "NO_COLOR": "1"}
    args = ["colonies", "create", "-f", "-", "-n", unwatched_namespace, "--wait", "--timeout", "2s"]
    started = time.monotonic()
    waited = subprocess.run(
        [str(COLONY_BIN), *args], env=env, input=manifest, capture_output=True, text=True, timeout=60
    )
    assert waited.returncode == 1, waited.stdout + waited.stderr
    assert time.monotonic() - started < 30
    assert f"colony stalled created in namespace {unwatched_namespace}" in waited.stderr
    assert waited.stdout.splitlines() == ["[ 0:00] stalled  Pending  nodes 0/0  gpus 0"]
    assert (
        waited.stderr.splitlines()[-1]
        == "error: timed out after 2s before Ready: stalled Pending nodes 0/0 gpus 0"
    )
    listed = colony(management.kubeconfig_path, "colonies", "list", "-n", unwatched_namespace, "-o", "name")
    assert listed.stdout == "colony.infra.exalsius.ai/stalled\n"


def test_version_reads_the_operator_deployment(management: LocalCluster, unwatched_namespace: str) -> None:
    labels = {"app.kubernetes.io/name": "colony-operator", "app.kubernetes.io/version": "9.8.7"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "colony-operator", "namespace": unwatched_namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"app": "colony-operator"}},
            "template": {
                "metadata": {"labels": {"app": "colony-operator"}},
                "spec": {"containers": [{"name": "operator", "image": "example/colony-operator:9.8.7"}]},
            },
        },
    }
    management.apply([deployment])
    try:
        shown = colony(management.kubeconfig_path, "version")
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.splitlines()[1].split() == ["Operator", "version:", "9.8.7"]
        assert colony(management.kubeconfig_path, "--version").stdout == shown.stdout
    finally:
        management.kubectl("delete", "deployment", "colony-operator", "-n", unwatched_namespace)


def test_watch_prints_a_change_within_two_seconds(
    management: LocalCluster, unwatched_namespace: str, tmp_path: Path
) -> None:
    management.apply([_registered("first", unwatched_namespace)])
    out = tmp_path / "watch.out"
    env = {**os.environ, "KUBECONFIG": str(management.kubeconfig_path)}
    with out.open("w") as sink:
        process = subprocess.Popen(
            [str(COLONY_BIN), "colonies", "list", "-n", unwatched_namespace, "-w", "-o", "name"],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        eventually(lambda: "colony.infra.exalsius.ai/first" in out.read_text(), 30)
        time.sleep(0.5)  # the watch request follows the list
        started = time.monotonic()
        management.apply([_registered("second", unwatched_namespace)])
        eventually(lambda: "colony.infra.exalsius.ai/second" in out.read_text(), 2, 0.05)
        assert time.monotonic() - started < 2
        assert process.poll() is None  # still watching
    finally:
        process.kill()
        process.wait(10)


def test_create_wait_exits_0_when_ready_and_1_with_the_reason_when_failed(
    management: LocalCluster,
    colony_cluster: LocalCluster,
    namespace: str,
    capi: CapiHarness,
    operator_process: ManagedProcess,
    tmp_path: Path,
) -> None:
    kubeconfig = management.kubeconfig_path
    _kubeconfig_secret(management, namespace, "good-kubeconfig", colony_cluster.kubeconfig())
    ready_file = tmp_path / "ready.yaml"
    ready_file.write_text(yaml.safe_dump(_existing_colony("waited", "good-kubeconfig")))
    ready = colony(
        kubeconfig, "colonies", "create", "-f", str(ready_file), "-n", namespace, "--wait", timeout=90
    )
    assert ready.returncode == 0, ready.stdout + ready.stderr
    lines = ready.stdout.splitlines()
    assert any("waited/onprem  Ready  nodes " in line for line in lines), ready.stdout
    assert lines[-1] == "waited Ready (24 GPUs)"
    assert f"colony waited created in namespace {namespace}" in ready.stderr

    failing = _example("colony-docker-ray.yaml")
    name = failing["metadata"]["name"]
    capi.fail(namespace, f"{name}-docker-1", "DockerMachine failed: no space left on device")
    failing_dir = tmp_path / "failing"
    failing_dir.mkdir()
    (failing_dir / "colony.yaml").write_text(yaml.safe_dump(failing))
    failed = colony(
        kubeconfig,
        "colonies",
        "create",
        "-f",
        str(failing_dir),
        "-n",
        namespace,
        "--wait",
        "--timeout",
        "60s",
        timeout=90,
    )
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert failed.stderr.splitlines()[-1].startswith(f"error: colony {name} Failed: ")
    assert "no space left on device" in failed.stderr

    timed_out = colony(
        kubeconfig, "colonies", "delete", "waited", "-n", namespace, "--wait", "--timeout", "60s", timeout=90
    )
    assert timed_out.returncode == 0, timed_out.stdout + timed_out.stderr
    assert timed_out.stdout.splitlines()[-1] == "waited deleted"
    management.kubectl("delete", "colony", name, "-n", namespace, "--wait=false")


def test_queue_shows_pending_and_admitted_requests_with_quota(
    management: LocalCluster,
    colony_cluster: LocalCluster,
    namespace: str,
    operator_process: ManagedProcess,
    tmp_path: Path,
) -> None:
    from tests.integration.test_ddpjob_controller import _ready_colony

    _ready_colony(management, colony_cluster, namespace)  # 24 GPUs: A100-80GB x 16 (kwok) and others
    queue_name = f"q-{namespace}"
    management.apply(
        [
            {
                "apiVersion": "infra.exalsius.ai/v1",
                "kind": "GPUQueue",
                "metadata": {"name": queue_name},
                "spec": {"namespaces": [namespace], "quotas": [{"gpuType": "A100-80GB", "nominal": 8}]},
            }
        ]
    )

    def gpr(name: str, nodes: int, priority: int) -> dict[str, Any]:
        return {
            "apiVersion": "infra.exalsius.ai/v1",
            "kind": "GPUProvisioningRequest",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "gpuShape": "A100-80GB",
                "numberOfGPUs": 8,
                "numberOfGPUNodes": nodes,
                "priority": priority,
            },
        }

    try:
        management.apply([gpr("runs", 1, 101), gpr("waits", 8, 200)])

        def phases() -> dict[str, str]:
            items = management.get_json("gpr", "-n", namespace)["items"]
            return {i["metadata"]["name"]: (i.get("status") or {}).get("phase") for i in items}

        eventually(lambda: phases()["runs"] in ("Admitted", "Ready") and phases()["waits"] == "Queued", 40)

        def shown() -> str | None:
            result = colony(management.kubeconfig_path, "queue", "-n", namespace)
            assert result.returncode == 0, result.stderr
            header = next(line for line in result.stdout.splitlines() if line.startswith(queue_name))
            ok = "A100-80GB 8/8" in header and "pending 1, admitted 1" in header
            return result.stdout if ok else None

        lines = eventually(shown, 30).splitlines()
        rows = {line.split()[1]: line.split() for line in lines if line.split()[:1] in (["1"], ["-"])}
        assert rows["waits"][:6] == ["1", "waits", "200", "8x8", "A100-80GB", "Queued"], lines
        assert rows["runs"][:2] == ["-", "runs"] and rows["runs"][-1].endswith("test-colony"), lines

        # -w: the view is redrawn when the watch reports a change (a new request, queued).
        out = tmp_path / "queue.out"
        env = {**os.environ, "KUBECONFIG": str(management.kubeconfig_path)}
        with out.open("w") as sink:
            live = subprocess.Popen(
                [str(COLONY_BIN), "queue", "-n", namespace, "-w"],
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        try:
            eventually(lambda: "waits" in out.read_text(), 30)
            assert "later" not in out.read_text()
            management.apply([gpr("later", 1, 50)])
            eventually(lambda: " later " in out.read_text(), 30)
            assert live.poll() is None
        finally:
            live.kill()
            live.wait(10)
    finally:
        management.kubectl("delete", "gpr", "--all", "-n", namespace, "--wait=false")
        management.kubectl("delete", "gpuqueue", queue_name, "--wait=false")
