"""GPRs across faults on real API servers (issue 17.3, 17.4): a colony whose API server stops
answering (a TCP fault proxy in front of it resets every connection) keeps its requests' GPUs and
says why, its idle timers pause, and on its return its reservation labels are reconciled with the
requests that still exist; an ephemeral colony whose request is gone is deleted; a phase change
that meets a newer version of its request is retried on fresh data, never written over it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from colony.api import GPR
from colony.controllers.context import OperatorContext, OperatorSettings
from colony.controllers.gpr.writes import moving, write_on_version
from colony.devenv.cluster import LocalCluster
from colony.devenv.environment import start_colony_cluster
from colony.devenv.process import ManagedProcess
from colony.devenv.tools import Tools
from colony.kube.config import api_client_from_kubeconfig
from colony.kube.resources import Kube
from colony.labels import FOR_GPR_LABEL
from colony.scheduling.fault_rules import STALE_RESERVATION_PREFIX, ledger_entry
from colony.scheduling.queueing.objects import reservation_label
from tests.faultproxy import FaultProxy
from tests.integration.conftest import eventually
from tests.integration.test_colony_controller import _apply, _existing_colony, _kubeconfig_secret, _phase_is
from tests.integration.test_gpr_scheduling import _gpr, _phase, _reserved, _status

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def faulty_cluster(tools: Tools) -> Iterator[LocalCluster]:
    cluster = start_colony_cluster(tools, "gpr-faults")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def proxy(faulty_cluster: LocalCluster) -> Iterator[FaultProxy]:
    target = urlparse(faulty_cluster.server)
    assert target.hostname is not None and target.port is not None
    with FaultProxy(target.hostname, target.port) as running:
        yield running


def _proxied_kubeconfig(cluster: LocalCluster, proxy: FaultProxy) -> str:
    config: dict[str, Any] = yaml.safe_load(cluster.kubeconfig())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    return yaml.safe_dump(config)


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), {})


def _ledger(management: LocalCluster, namespace: str) -> dict[str, str]:
    annotations = management.get_json("colony", "pool", "-n", namespace)["metadata"].get("annotations") or {}
    return {k: v for k, v in annotations.items() if k.startswith(STALE_RESERVATION_PREFIX)}


def test_an_unreachable_colony_keeps_its_gpus_and_its_labels_are_reconciled_on_return(
    management: LocalCluster,
    faulty_cluster: LocalCluster,
    proxy: FaultProxy,
    namespace: str,
    operator_process: ManagedProcess,
) -> None:
    _kubeconfig_secret(management, namespace, "gpu-kubeconfig", _proxied_kubeconfig(faulty_cluster, proxy))
    _apply(management, namespace, _existing_colony("pool", "gpu-kubeconfig"))
    eventually(lambda: _phase_is(management, namespace, "pool", "Ready"), 30)
    try:
        _apply(management, namespace, _gpr("kept", "A100-80GB", 1, 4, idleTimeOutDuration="3s"))
        _apply(management, namespace, _gpr("gone", "A100-80GB", 1, 4))
        kept = eventually(lambda: _phase(management, namespace, "kept", "Ready"), 30)
        gone = eventually(lambda: _phase(management, namespace, "gone", "Ready"), 30)
        gone_node = gone["nodes"][0]["node"]
        faulty_cluster.kubectl("create", "namespace", namespace)
        node = kept["nodes"][0]["node"]
        faulty_cluster.apply(
            [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "trainer", "namespace": namespace},
                    "spec": {
                        "nodeSelector": {kept["reservationLabel"]: "4"},
                        "containers": [
                            {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}
                        ],
                    },
                }
            ]
        )
        time.sleep(5)  # longer than idleTimeOutDuration: the pod keeps the reservation in use
        assert _status(management, namespace, "kept")["phase"] == "Ready"

        proxy.mode = "reset"
        proxy.reset_all()
        unreachable = eventually(
            lambda: (
                (s := _status(management, namespace, "kept"))
                and _condition(s, "ColonyReachable").get("reason") == "ColonyUnreachable"
                and s
            ),
            30,
        )
        assert _condition(unreachable, "ColonyReachable")["status"] == "False"
        assert "GPUs stay reserved" in unreachable["message"] and "onprem" in unreachable["message"]
        # the request deleted meanwhile cannot take its label off: it is recorded on the colony
        management.kubectl("delete", "gpr", "gone", "-n", namespace, "--wait=true", "--timeout=60s")
        gone_label = reservation_label(f"{namespace}/gone")
        ledger = eventually(lambda: _ledger(management, namespace), 15)
        assert ledger == dict([ledger_entry(gone_label, [f"onprem/{gone_node}"])])
        assert _reserved(faulty_cluster, namespace, "gone") == {gone_node: 4}  # read directly
        # someone takes the live request's label off behind the operator's back
        faulty_cluster.kubectl("label", "node", node, f"{kept['reservationLabel']}-")
        time.sleep(8)  # far past idleTimeOutDuration 3s: unreachable is not idle
        still = _status(management, namespace, "kept")
        assert still["phase"] == "Ready" and still["nodes"] == kept["nodes"] and not still.get("idleSince")
        events = management.kubectl("get", "events", "-n", namespace).stdout
        assert "ColonyUnreachable" in events

        proxy.mode = "pass"
        back = eventually(
            lambda: (
                (s := _status(management, namespace, "kept"))
                and _condition(s, "ColonyReachable").get("status") == "True"
                and s
            ),
            60,
        )
        assert _condition(back, "ColonyReachable")["reason"] == "ColonyReachable"
        eventually(lambda: _reserved(faulty_cluster, namespace, "kept") == {node: 4}, 20)
        eventually(lambda: not _reserved(faulty_cluster, namespace, "gone"), 20)
        eventually(lambda: not _ledger(management, namespace), 20)
        time.sleep(4)  # the pod is seen again: the idle timer does not release it
        assert _status(management, namespace, "kept")["phase"] == "Ready"
    finally:
        proxy.mode = "pass"
        management.kubectl(
            "delete", "gpr", "--all", "-n", namespace, "--wait=true", "--timeout=60s", check=False
        )
        faulty_cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def _owned_colony(name: str, owner: str) -> dict[str, Any]:
    colony = _existing_colony(name, "missing-kubeconfig")
    colony["metadata"]["labels"] = {"colony.exalsius.ai/ephemeral": "true", FOR_GPR_LABEL: owner}
    return colony


def test_an_ephemeral_colony_whose_request_is_gone_is_deleted_and_one_with_its_request_kept(
    management: LocalCluster, namespace: str, operator_process: ManagedProcess
) -> None:
    # a request that waits forever (no colony has a B200), and a colony provisioned for it
    _apply(management, namespace, _gpr("waiting", "B200", 1, 1))
    waiting = eventually(lambda: management.get_json("gpr", "waiting", "-n", namespace), 10)
    _apply(management, namespace, _owned_colony("for-waiting", waiting["metadata"]["uid"]))
    # ... and one whose request was deleted while the operator could not tear its colony down
    _apply(management, namespace, _owned_colony("orphan", str(uuid.uuid4())))

    def orphan_gone() -> bool:
        found = management.kubectl("get", "colony", "orphan", "-n", namespace, "-o", "json", check=False)
        return found.returncode != 0 or '"deletionTimestamp"' in found.stdout

    eventually(orphan_gone, 30)
    time.sleep(2)  # several passes later, the colony whose request exists is still there
    kept = management.get_json("colony", "for-waiting", "-n", namespace)
    assert not kept["metadata"].get("deletionTimestamp")
    events = management.kubectl("get", "events", "-n", namespace).stdout
    assert "OrphanDeleted" in events
    management.kubectl("delete", "gpr", "waiting", "-n", namespace, "--wait=true", "--timeout=60s")
    management.kubectl("delete", "colony", "for-waiting", "-n", namespace, "--wait=false", check=False)


@pytest.fixture
async def kube(management: LocalCluster) -> AsyncIterator[Kube]:
    api = await api_client_from_kubeconfig(yaml.safe_load(management.kubeconfig()))
    try:
        yield Kube(api)
    finally:
        await api.close()


async def test_a_phase_change_meeting_a_newer_version_is_retried_on_fresh_data_or_dropped(
    management: LocalCluster, unwatched_namespace: str, kube: Kube
) -> None:
    """No operator watches this namespace: the loop's write function runs here, against the real
    API server's resourceVersion preconditions."""
    namespace = unwatched_namespace
    _apply(management, namespace, _gpr("r", "H100", 1, 1))
    unused: Any = None  # the writes use only the management client
    context = OperatorContext((), OperatorSettings(), kube, unused, (), unused, unused)
    read = await kube.patch_status(GPR.api_version, GPR.kind, "r", namespace, {"phase": "Queued"})
    management.kubectl("annotate", "gpr", "r", "-n", namespace, "touched=yes")  # a newer version
    admitted = {"phase": "Admitted", "message": "admitted"}
    patched, _ = await write_on_version(
        context, read, moving(read, admitted, (None, "Queued"), same_spec=True)
    )
    assert patched is not None and patched["status"]["phase"] == "Admitted"
    assert patched["metadata"]["annotations"]["touched"] == "yes"  # written onto the fresh version

    # the fresh version is no longer Queued: an admission decided on the stale one is dropped
    stale = dict(read)
    evicted = {"phase": "Queued", "message": "evicted"}
    dropped, seen = await write_on_version(context, stale, moving(stale, admitted, (None, "Queued")))
    assert dropped is None and seen is not None and seen["status"]["phase"] == "Admitted"
    # and a spec edit drops one that depends on the spec
    running = dict(patched)
    management.kubectl(
        "patch", "gpr", "r", "-n", namespace, "--type=merge", "-p", '{"spec":{"priority":150}}'
    )
    dropped, _ = await write_on_version(
        context, running, moving(running, evicted, ("Admitted",), same_spec=True)
    )
    assert dropped is None
    assert (await kube.get(GPR.api_version, GPR.kind, "r", namespace) or {})["status"]["phase"] == "Admitted"
