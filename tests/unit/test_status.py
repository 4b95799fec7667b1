"""Pure status computation: inventory from nodes, cluster phases and the colony's phase rules."""

from __future__ import annotations

from typing import Any

from colony.render.contract import HostedControlPlanePorts, RenderedCluster, RenderedColony
from colony.status.colony import AddonObservation, ClusterObservation, colony_status
from colony.status.inventory import ClusterInventory, GPUCount, inventory_from_nodes


def _node(product: str | None, gpus: int, ready: bool = True) -> dict[str, Any]:
    labels = {"nvidia.com/gpu.product": product} if product else {}
    resources = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    return {
        "metadata": {"labels": labels},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_inventory_groups_gpus_by_product_and_skips_not_ready_allocatable() -> None:
    inventory = inventory_from_nodes(
        [_node("A100", 8), _node("A100", 8, ready=False), _node("H100", 4), _node(None, 0), _node(None, 2)]
    )
    assert (inventory.total_nodes, inventory.ready_nodes) == (5, 4)
    assert inventory.gpus == (
        GPUCount("A100", 16, 8),
        GPUCount("H100", 4, 4),
        GPUCount("unknown", 2, 2),
    )
    assert (inventory.gpu_capacity, inventory.gpu_allocatable) == (22, 14)


def _capi(name: str, phase: str | None, **extra: Any) -> RenderedCluster:
    return RenderedCluster(name, "docker", f"c-{name}", (), f"c-{name}-kubeconfig", **extra)


def _cluster_obj(phase: str, message: str = "") -> dict[str, Any]:
    conditions = [{"type": "Available", "status": "False", "message": message}] if message else []
    return {"metadata": {"name": "x"}, "status": {"phase": phase, "conditions": conditions}}


GPU8 = ClusterInventory(1, 1, (GPUCount("A100", 8, 8),))


def _status(
    clusters: list[RenderedCluster], observed: dict[str, ClusterObservation], **kw: Any
) -> dict[str, Any]:
    rendered = RenderedColony(tuple(clusters), (), kw.pop("problems", ()))
    return colony_status(
        rendered, observed, kw.pop("addons", []), previous_conditions=None, generation=3, now="T"
    )


def _condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == type_)


def test_empty_colony_is_never_ready() -> None:
    status = _status([], {})
    assert status["phase"] == "Pending"
    assert _condition(status, "Ready")["status"] == "False"


def test_phases_from_pending_to_ready() -> None:
    clusters = [_capi("a", None)]
    assert _status(clusters, {})["phase"] == "Pending"
    created = _status(clusters, {"a": ClusterObservation({"metadata": {"name": "x"}})})
    assert (created["phase"], created["clusters"][0]["phase"]) == ("Pending", "Pending")
    provisioning = _status(clusters, {"a": ClusterObservation(_cluster_obj("Provisioning"))})
    assert provisioning["phase"] == "Provisioning"
    waiting = _status(clusters, {"a": ClusterObservation(_cluster_obj("Provisioned"), None, "no Secret")})
    assert waiting["phase"] == "Provisioning"
    assert "no Secret" in waiting["clusters"][0]["message"]
    ready = _status(clusters, {"a": ClusterObservation(_cluster_obj("Provisioned"), GPU8)})
    assert (ready["phase"], ready["readyClusters"], ready["gpus"]) == ("Ready", 1, 8)
    assert ready["observedGeneration"] == 3
    assert _condition(ready, "Ready")["status"] == "True"


def test_one_failed_cluster_degrades_but_others_report() -> None:
    clusters = [_capi("a", None), _capi("b", None)]
    status = _status(
        clusters,
        {
            "a": ClusterObservation(_cluster_obj("Failed", "quota exceeded")),
            "b": ClusterObservation(_cluster_obj("Provisioned"), GPU8),
        },
    )
    assert status["phase"] == "Degraded"
    assert [c["phase"] for c in status["clusters"]] == ["Failed", "Ready"]
    assert status["gpus"] == 8
    condition = _condition(status, "ClustersReady")
    assert condition["reason"] == "ClusterFailed" and "quota exceeded" in condition["message"]


def test_existing_cluster_unreachable_and_per_cluster_problems() -> None:
    existing = RenderedCluster("e", "existing", None, (), "kc")
    broken = _status([existing], {"e": ClusterObservation(None, None, "kubeconfig is invalid")})
    assert broken["phase"] == "Degraded"
    assert broken["clusters"][0] == {
        "name": "e",
        "provider": "existing",
        "phase": "Unreachable",
        "message": "kubeconfig is invalid",
        "readyNodes": 0,
        "totalNodes": 0,
        "gpus": [],
    }
    bad = _capi("b", None, problems=("name too long",))
    assert (
        _status([bad], {"b": ClusterObservation(_cluster_obj("Provisioned"), GPU8)})["clusters"][0]["phase"]
        == "Failed"
    )


def test_a_refused_kubeconfig_makes_the_cluster_unreachable_naming_the_field() -> None:
    message = "kubeconfig in Secret ns/kc cannot be used: user.exec is refused: exec plugins run a command"
    for cluster in (_capi("a", None), RenderedCluster("a", "existing", None, (), "kc")):
        obj = _cluster_obj("Provisioned") if cluster.capi_cluster_name else None
        status = _status([cluster], {"a": ClusterObservation(obj, None, message, "user.exec")})
        assert (status["phase"], status["clusters"][0]["phase"]) == ("Degraded", "Unreachable")
        condition = _condition(status, "ClustersReady")
        assert condition["reason"] == "KubeconfigRefused" and "user.exec" in condition["message"]


def test_hosted_ports_and_endpoint_are_reported() -> None:
    cluster = _capi("a", None, hosted_ports=HostedControlPlanePorts(30100, 30200))
    obj = _cluster_obj("Provisioned") | {
        "spec": {"controlPlaneEndpoint": {"host": "10.0.0.1", "port": 30100}}
    }
    entry = _status([cluster], {"a": ClusterObservation(obj, GPU8)})["clusters"][0]
    assert entry["hostedControlPlane"] == {"apiPort": 30100, "konnectivityPort": 30200}
    assert entry["controlPlaneEndpoint"] == "10.0.0.1:30100"


def test_addons_and_unknown_dependencies_are_conditions() -> None:
    clusters = [_capi("a", None)]
    observed = {"a": ClusterObservation(_cluster_obj("Provisioned"), GPU8)}
    status = _status(
        clusters,
        observed,
        problems=("unknown dependency 'x'",),
        addons=[AddonObservation("volcano-sh", "c-volcano-sh", False, "no Helm release yet")],
    )
    assert status["phase"] == "Ready"  # add-ons are reported, not gating
    assert _condition(status, "AddonsReady")["status"] == "False"
    assert "unknown dependency" in _condition(status, "DependenciesResolved")["message"]
    assert status["addons"] == [
        {
            "name": "volcano-sh",
            "helmChartProxy": "c-volcano-sh",
            "ready": False,
            "message": "no Helm release yet",
        }
    ]
