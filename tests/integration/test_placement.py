"""Framework custom resources placed from the management cluster onto colonies, on real API servers.

Two colony clusters of this module's own (kwok nodes, no Volcano), each registered as a Colony of
the test's namespace with a declared price:

- `rich` ($40/h, 24 GPUs): 2 nodes x 8 A100-80GB and 1 node x 8 H100; serves PyTorchJob, RayJob,
  JobSet and the test's made-up Widget kind;
- `bare` ($1/h, 8 GPUs, far cheaper per GPU): 1 node x 8 H100; serves PyTorchJob only.

No framework controller runs anywhere: the tests play it, writing the copies' status in the colony.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from colony.devenv.cluster import LocalCluster
from colony.devenv.environment import start_colony_cluster
from colony.devenv.kwok import GPUNodeSpec
from colony.devenv.process import ManagedProcess
from colony.devenv.tools import Tools
from colony.placement.names import COLONY_ANNOTATION, COPIES_ANNOTATION, MESSAGE_ANNOTATION, PHASE_ANNOTATION
from tests.integration.conftest import eventually
from tests.integration.test_colony_controller import _apply, _kubeconfig_secret, _phase_is

A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"
WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                        },
                    }
                },
            }
        ],
    },
}
WIDGET_DEFINITION: dict[str, Any] = {
    "apiVersion": "infra.exalsius.ai/v1",
    "kind": "WorkloadDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "target": {"group": "example.com", "version": "v1", "kind": "Widget", "plural": "widgets"},
        "components": [
            {"name": "worker", "podTemplatePath": ".spec.template", "replicasPath": ".spec.replicas // 1"}
        ],
        "status": {
            "phasePath": ".status.state",
            "mappings": {"running": [{"phase": "Spinning"}], "succeeded": [{"phase": "Done"}]},
        },
    },
}


@pytest.fixture(scope="module")
def widget_crd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("crds") / "widgets.yaml"
    path.write_text(json.dumps(WIDGET_CRD))
    return path


@pytest.fixture(scope="module")
def rich(tools: Tools, widget_crd: Path) -> Iterator[LocalCluster]:
    cluster = start_colony_cluster(tools, "rich", upstream=("kubeflow", "kuberay", "jobset"), volcano=False)
    try:
        cluster.install_crds([widget_crd])
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def bare(tools: Tools) -> Iterator[LocalCluster]:
    nodes = (GPUNodeSpec("h100", product=H100, gpus=8, gpu_memory_mib=81559, count=1),)
    cluster = start_colony_cluster(tools, "bare", nodes, upstream=("kubeflow",), volcano=False)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def widgets(management: LocalCluster, widget_crd: Path) -> Iterator[None]:
    """The made-up Widget kind served by the management cluster."""
    management.install_crds([widget_crd])
    try:
        yield
    finally:
        management.kubectl("delete", "crd", "widgets.example.com", "--wait=false", check=False)


def _colonies(management: LocalCluster, namespace: str, rich: LocalCluster, bare: LocalCluster) -> None:
    for name, cluster, price in (("rich", rich, 40.0), ("bare", bare, 1.0)):
        _kubeconfig_secret(management, namespace, f"{name}-kubeconfig", cluster.kubeconfig())
        colony = {
            "apiVersion": "infra.exalsius.ai/v1",
            "kind": "Colony",
            "metadata": {"name": name},
            "spec": {
                "k8sVersion": "v1.36.3",
                "colonyClusters": [
                    {
                        "clusterName": "onprem",
                        "existing": {"kubeconfigSecretRef": {"name": f"{name}-kubeconfig"}},
                        "pricePerHour": price,
                    }
                ],
            },
        }
        _apply(management, namespace, colony)
    eventually(lambda: all(_phase_is(management, namespace, n, "Ready") for n in ("rich", "bare")), 60)


def _pod(gpus: int, product: str | None = None, name: str = "pytorch") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {"name": name, "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
        ]
    }
    if product:
        spec["nodeSelector"] = {"nvidia.com/gpu.product": product}
    return {"spec": spec}


def _pytorchjob(
    name: str, workers: int, gpus: int, product: str | None, labels: dict[str, str]
) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "pytorchReplicaSpecs": {
                "Worker": {"replicas": workers, "restartPolicy": "OnFailure", "template": _pod(gpus, product)}
            }
        },
    }


ENABLED = {"placement.exalsius.ai/enabled": "true"}


def _annotations(cluster: LocalCluster, kind: str, name: str, namespace: str) -> dict[str, str]:
    found = cluster.kubectl("get", kind, name, "-n", namespace, "-o", "json", check=False)
    if found.returncode != 0:
        return {}
    annotations: dict[str, str] = json.loads(found.stdout)["metadata"].get("annotations") or {}
    return annotations


def _placed_on(management: LocalCluster, kind: str, name: str, namespace: str) -> str | None:
    return _annotations(management, kind, name, namespace).get(COLONY_ANNOTATION)


def _exists(cluster: LocalCluster, kind: str, name: str, namespace: str) -> bool:
    return cluster.kubectl("get", kind, name, "-n", namespace, check=False).returncode == 0


def _set_status(cluster: LocalCluster, kind: str, name: str, namespace: str, status: dict[str, Any]) -> None:
    cluster.kubectl(
        "patch",
        kind,
        name,
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )


@pytest.fixture
def cleanup(management: LocalCluster) -> Iterator[list[tuple[str, ...]]]:
    """kubectl delete arguments run after the test (placed objects first: their GPU requests go)."""
    objects: list[tuple[str, ...]] = []
    yield objects
    for args in objects:
        management.kubectl("delete", *args, "--ignore-not-found", "--wait=true", "--timeout=60s", check=False)


def test_pytorchjob_and_rayjob_land_where_gpus_and_crd_are_status_mirrors_and_deletion_follows(
    management: LocalCluster,
    rich: LocalCluster,
    bare: LocalCluster,
    namespace: str,
    operator_process: ManagedProcess,
    cleanup: list[tuple[str, ...]],
) -> None:
    cleanup += [("pytorchjobs,rayjobs", "--all", "-n", namespace)]
    _colonies(management, namespace, rich, bare)
    # 2 x 8 A100-80GB: only rich has them (bare, cheaper, serves PyTorchJob but has only H100s).
    _apply(management, namespace, _pytorchjob("train", 2, 8, A100, ENABLED))
    # Any GPU type: bare would be cheaper, but it lacks the RayJob CRD.
    rayjob = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "tune", "labels": ENABLED},
        "spec": {
            "entrypoint": "python tune.py",
            "rayClusterSpec": {
                "headGroupSpec": {"rayStartParams": {}, "template": _pod(0, name="ray-head")},
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu",
                        "replicas": 1,
                        "rayStartParams": {},
                        "template": _pod(1, name="ray-worker"),
                    }
                ],
            },
        },
    }
    _apply(management, namespace, rayjob)

    assert (
        eventually(lambda: _placed_on(management, "pytorchjob", "train", namespace), 60)
        == f"{namespace}/rich"
    )
    assert eventually(lambda: _placed_on(management, "rayjob", "tune", namespace), 60) == f"{namespace}/rich"
    message = _annotations(management, "rayjob", "tune", namespace)[MESSAGE_ANNOTATION]
    assert f"colony {namespace}/bare lacks rayjobs.ray.io: enable add-on kuberay" in message, message

    # The copy runs on the GPUs its GPU request reserved.
    copy = rich.get_json("pytorchjob", "train", "-n", namespace)
    gpr = management.get_json("gpr", "pytorchjob-train", "-n", namespace)
    # bare serves PyTorchJob (a candidate), but has no A100.
    assert gpr["status"]["phase"] == "Ready"
    assert gpr["spec"]["colonies"] == [f"{namespace}/bare", f"{namespace}/rich"]
    selector = copy["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"]
    assert selector[gpr["status"]["reservationLabel"]] == "8"
    assert not _exists(bare, "pytorchjob", "train", namespace)

    # The framework (played here) runs the copy: its status comes back to the original.
    conditions = [{"type": "Running", "status": "True", "reason": "Started", "message": "running"}]
    _set_status(rich, "pytorchjob", "train", namespace, {"conditions": conditions})
    mirrored = eventually(
        lambda: (management.get_json("pytorchjob", "train", "-n", namespace).get("status") or {}).get(
            "conditions"
        ),
        30,
    )
    assert mirrored[0]["type"] == "Running"
    eventually(
        lambda: _annotations(management, "pytorchjob", "train", namespace).get(PHASE_ANNOTATION) == "Running",
        20,
    )
    events = management.kubectl("get", "events", "-n", namespace).stdout
    assert "Placed" in events and "WorkloadRunning" in events

    # The RayJob succeeds: its GPUs are released (its GPU request deleted).
    _set_status(
        rich, "rayjob", "tune", namespace, {"jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Complete"}
    )
    eventually(
        lambda: _annotations(management, "rayjob", "tune", namespace).get(PHASE_ANNOTATION) == "Succeeded", 30
    )
    eventually(lambda: not _exists(management, "gpr", "rayjob-tune", namespace), 30)

    # Deleting the original deletes the copy and the GPU request.
    management.kubectl("delete", "pytorchjob", "train", "-n", namespace, "--wait=true", "--timeout=60s")
    eventually(lambda: not _exists(rich, "pytorchjob", "train", namespace), 30)
    # The request goes once the scheduling loop has released its GPUs and let its finalizer go.
    eventually(lambda: not _exists(management, "gpr", "pytorchjob-train", namespace), 30)


def test_a_user_workload_definition_places_a_made_up_kind(
    management: LocalCluster,
    rich: LocalCluster,
    bare: LocalCluster,
    widgets: None,
    namespace: str,
    operator_process: ManagedProcess,
    cleanup: list[tuple[str, ...]],
) -> None:
    cleanup += [("widgets", "--all", "-n", namespace), ("workloaddefinition", "widgets.example.com")]
    _colonies(management, namespace, rich, bare)
    management.apply([WIDGET_DEFINITION])
    accepted = eventually(
        lambda: (management.get_json("workloaddefinition", "widgets.example.com").get("status") or {}).get(
            "conditions"
        ),
        30,
    )
    assert accepted[0]["status"] == "True"
    widget = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w1", "labels": ENABLED},
        "spec": {"replicas": 2, "template": _pod(2, name="spin")},
    }
    _apply(management, namespace, widget)
    # bare is cheaper and has room, but does not serve widgets.example.com.
    assert eventually(lambda: _placed_on(management, "widget", "w1", namespace), 60) == f"{namespace}/rich"
    gpr = management.get_json("gpr", "widget-w1", "-n", namespace)
    assert gpr["spec"]["numberOfGPUNodes"] == 2 and gpr["spec"]["numberOfGPUs"] == 2
    copy = rich.get_json("widget", "w1", "-n", namespace)
    assert gpr["status"]["reservationLabel"] in copy["spec"]["template"]["spec"]["nodeSelector"]

    _set_status(rich, "widget", "w1", namespace, {"state": "Done"})
    eventually(
        lambda: (
            (management.get_json("widget", "w1", "-n", namespace).get("status") or {}).get("state") == "Done"
        ),
        30,
    )
    eventually(
        lambda: _annotations(management, "widget", "w1", namespace).get(PHASE_ANNOTATION) == "Succeeded", 30
    )
    eventually(lambda: not _exists(management, "gpr", "widget-w1", namespace), 30)


def _policy(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "PlacementPolicy",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "kinds": [{"group": "kubeflow.org", "kind": "PyTorchJob"}],
            **spec,
        },
    }


def test_fill_and_spill_and_group_placement(
    management: LocalCluster,
    rich: LocalCluster,
    bare: LocalCluster,
    namespace: str,
    operator_process: ManagedProcess,
    cleanup: list[tuple[str, ...]],
) -> None:
    fill, group = f"fill-{namespace}", f"group-{namespace}"
    cleanup += [
        ("pytorchjobs", "--all", "-n", namespace),
        ("placementpolicy", fill),
        ("placementpolicy", group),
    ]
    _colonies(management, namespace, rich, bare)
    management.apply(
        [
            _policy(
                fill,
                namespace,
                resourceSelector={"matchLabels": {"app": "fill"}},
                orderedColonies=["rich", "bare"],
            ),
            _policy(
                group,
                namespace,
                resourceSelector={"matchLabels": {"app": "grp"}},
                groupBy={"labelKey": "exp"},
            ),
        ]
    )
    # Fill and spill: rich first although bare is cheaper; its one H100 node full, the next spills.
    _apply(management, namespace, _pytorchjob("f1", 1, 8, H100, {"app": "fill"}))
    assert (
        eventually(lambda: _placed_on(management, "pytorchjob", "f1", namespace), 60) == f"{namespace}/rich"
    )
    _apply(management, namespace, _pytorchjob("f2", 1, 8, H100, {"app": "fill"}))
    assert (
        eventually(lambda: _placed_on(management, "pytorchjob", "f2", namespace), 60) == f"{namespace}/bare"
    )

    # A group: one GPU request for both; g2 alone (any type) would go to cheap bare, but g1 needs an
    # A100 and they go together.
    _apply(management, namespace, _pytorchjob("g1", 1, 1, A100, {"app": "grp", "exp": "e1"}))
    _apply(management, namespace, _pytorchjob("g2", 1, 1, None, {"app": "grp", "exp": "e1"}))
    placed = eventually(
        lambda: all(_placed_on(management, "pytorchjob", n, namespace) for n in ("g1", "g2")), 60
    )
    assert placed
    assert {_placed_on(management, "pytorchjob", n, namespace) for n in ("g1", "g2")} == {f"{namespace}/rich"}
    request = management.get_json("gpr", "group-e1", "-n", namespace)
    assert request["spec"]["numberOfGPUNodes"] == 2 and request["spec"]["gpuShapes"] == ["A100-80GB"]
    assert {o["name"] for o in request["metadata"]["ownerReferences"]} == {"g1", "g2"}
    status = eventually(lambda: management.get_json("placementpolicy", group).get("status"), 20)
    assert status["selected"] == 2


def test_spread_duplicate_places_a_copy_on_every_colony_and_deleting_the_original_removes_them(
    management: LocalCluster,
    rich: LocalCluster,
    bare: LocalCluster,
    namespace: str,
    operator_process: ManagedProcess,
    cleanup: list[tuple[str, ...]],
) -> None:
    spread = f"spread-{namespace}"
    cleanup += [
        ("pytorchjobs", "--all", "-n", namespace),
        ("placementpolicy", spread),
        ("placementpolicy", f"divide-{namespace}"),
    ]
    _colonies(management, namespace, rich, bare)
    # Only Duplicate is supported: the API server rejects Divide, saying so.
    divide = _policy(f"divide-{namespace}", namespace, spread={"mode": "Divide"})
    rejected = management.kubectl("apply", "-f", "-", input_text=json.dumps(divide), check=False)
    assert rejected.returncode != 0 and "Divide is not supported" in rejected.stderr, rejected.stderr
    selector = {"matchLabels": {"app": "dup"}}
    management.apply([_policy(spread, namespace, resourceSelector=selector, spread={"mode": "Duplicate"})])
    # 1 GPU of any type: both colonies serve PyTorchJob and have room; one copy on each.
    _apply(management, namespace, _pytorchjob("everywhere", 1, 1, None, {"app": "dup"}))
    colonies = {"rich": rich, "bare": bare}
    eventually(lambda: all(_exists(c, "pytorchjob", "everywhere", namespace) for c in colonies.values()), 90)
    for name, cluster in colonies.items():
        gpr = management.get_json("gpr", f"pytorchjob-everywhere--{name}", "-n", namespace)
        assert gpr["spec"]["colonies"] == [f"{namespace}/{name}"]
        assert gpr["status"]["phase"] == "Ready" and gpr["status"]["colony"] == f"{namespace}/{name}"
        copy = cluster.get_json("pytorchjob", "everywhere", "-n", namespace)
        selector_of = copy["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"]
        assert selector_of[gpr["status"]["reservationLabel"]] == "1"
    copies = eventually(
        lambda: _annotations(management, "pytorchjob", "everywhere", namespace).get(COPIES_ANNOTATION), 20
    )
    assert set(json.loads(copies)) == {f"{namespace}/rich", f"{namespace}/bare"}

    # Both copies run (the framework played here): the original's phase is the worst, Running.
    conditions = [{"type": "Running", "status": "True", "reason": "Started", "message": "running"}]
    _set_status(rich, "pytorchjob", "everywhere", namespace, {"conditions": conditions})
    _set_status(bare, "pytorchjob", "everywhere", namespace, {"conditions": conditions})
    eventually(
        lambda: (
            _annotations(management, "pytorchjob", "everywhere", namespace).get(PHASE_ANNOTATION) == "Running"
        ),
        30,
    )

    # Deleting the original deletes both copies and both GPU requests.
    management.kubectl("delete", "pytorchjob", "everywhere", "-n", namespace, "--wait=true", "--timeout=60s")
    eventually(
        lambda: not any(_exists(c, "pytorchjob", "everywhere", namespace) for c in colonies.values()), 30
    )
    for name in colonies:
        eventually(
            lambda n=name: not _exists(management, "gpr", f"pytorchjob-everywhere--{n}", namespace), 30
        )


def _events_of(management: LocalCluster, name: str, namespace: str) -> list[dict[str, Any]]:
    found = management.get_json("events", "-n", namespace, "--field-selector", f"involvedObject.name={name}")
    items: list[dict[str, Any]] = found.get("items") or []
    return items


def test_hostile_objects_are_marked_with_the_reason_and_the_healthy_one_next_to_them_is_placed(
    management: LocalCluster,
    rich: LocalCluster,
    bare: LocalCluster,
    namespace: str,
    operator_process: ManagedProcess,
    cleanup: list[tuple[str, ...]],
) -> None:
    """Issue 17, per-object isolation: quantities the PyTorchJob schema admits but no cluster could
    hold (a cpu of 1e999999999, which once raised decimal.Overflow out of the placement pass, and a
    negative GPU count) make their objects Unplaceable with the reason in a message annotation and
    a warning Event; the healthy object applied after them is placed, and the operator keeps
    running and placing."""
    cleanup += [("pytorchjobs", "--all", "-n", namespace)]
    _colonies(management, namespace, rich, bare)
    huge = _pytorchjob("huge-cpu", 1, 1, None, ENABLED)
    container = huge["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    container["resources"]["requests"] = {"cpu": "1e999999999"}
    negative = _pytorchjob("negative-gpus", 1, 1, None, ENABLED)
    container = negative["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    container["resources"]["limits"] = {"nvidia.com/gpu": "-8"}
    for hostile in (huge, negative):
        _apply(management, namespace, hostile)
    _apply(management, namespace, _pytorchjob("healthy", 1, 1, H100, ENABLED))

    placed = eventually(lambda: _placed_on(management, "pytorchjob", "healthy", namespace), 60)
    assert placed in (f"{namespace}/bare", f"{namespace}/rich")
    eventually(
        lambda: _exists(bare if placed.endswith("/bare") else rich, "pytorchjob", "healthy", namespace), 30
    )
    for name, reason in (("huge-cpu", "1e999999999"), ("negative-gpus", "must not be negative")):
        annotations = eventually(
            lambda n=name: (
                (a := _annotations(management, "pytorchjob", n, namespace)).get(MESSAGE_ANNOTATION) and a
            ),
            30,
        )
        assert annotations.get(PHASE_ANNOTATION) == "Unplaceable", annotations
        assert reason in annotations[MESSAGE_ANNOTATION], annotations
        assert COLONY_ANNOTATION not in annotations
        warnings = eventually(
            lambda n=name: [e for e in _events_of(management, n, namespace) if e.get("type") == "Warning"], 30
        )
        assert any(reason in str(e.get("message")) for e in warnings), warnings
        assert not _exists(bare, "pytorchjob", name, namespace) and not _exists(
            rich, "pytorchjob", name, namespace
        )

    # The loop goes on: a job applied now is placed too, and the operator never stopped.
    _apply(management, namespace, _pytorchjob("later", 1, 1, H100, ENABLED))
    assert eventually(lambda: _placed_on(management, "pytorchjob", "later", namespace), 60)
    assert operator_process.running()


def test_a_policy_change_or_a_lost_colony_requeues_the_object(
    management: LocalCluster,
    rich: LocalCluster,
    bare: LocalCluster,
    namespace: str,
    operator_process: ManagedProcess,
    cleanup: list[tuple[str, ...]],
) -> None:
    """Runs last: the colony deleted here leaves its GPU reservation on rich's H100 node."""
    move = f"move-{namespace}"
    cleanup += [("pytorchjobs", "--all", "-n", namespace), ("placementpolicy", move)]
    _colonies(management, namespace, rich, bare)
    selector = {"matchLabels": {"app": "move"}}
    management.apply([_policy(move, namespace, resourceSelector=selector, orderedColonies=["bare", "rich"])])
    _apply(management, namespace, _pytorchjob("mover", 1, 8, H100, {"app": "move"}))
    assert (
        eventually(lambda: _placed_on(management, "pytorchjob", "mover", namespace), 60)
        == f"{namespace}/bare"
    )
    assert _exists(bare, "pytorchjob", "mover", namespace)

    # The policy no longer allows bare: the copy there is deleted and the job placed on rich.
    management.apply([_policy(move, namespace, resourceSelector=selector, orderedColonies=["rich"])])
    eventually(lambda: _placed_on(management, "pytorchjob", "mover", namespace) == f"{namespace}/rich", 60)
    eventually(lambda: not _exists(bare, "pytorchjob", "mover", namespace), 30)
    assert _exists(rich, "pytorchjob", "mover", namespace)
    events = management.kubectl("get", "events", "-n", namespace).stdout
    assert "Rescheduled" in events

    # rich goes away: the job waits again, saying why.
    management.kubectl("delete", "colony", "rich", "-n", namespace, "--wait=true", "--timeout=60s")

    def waiting_for_rich() -> bool:
        annotations = _annotations(management, "pytorchjob", "mover", namespace)
        message = annotations.get(MESSAGE_ANNOTATION) or ""
        return (
            annotations.get(PHASE_ANNOTATION) == "Queued"
            and f"colony {namespace}/rich does not exist" in message
        )

    eventually(waiting_for_rich, 60)
    assert not _placed_on(management, "pytorchjob", "mover", namespace)
