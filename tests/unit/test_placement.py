"""Placement of framework objects, the pure part: selection by policy or label, candidate colonies
and why others are excluded, GPU requests per object and per group, and the lifecycle decisions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from colony.api.placementpolicy import PlacementPolicySpec
from colony.labels import FINALIZER
from colony.placement import decide as act
from colony.placement import duplicate as dup
from colony.placement.candidates import Candidates, ColonyView, candidates, colony_view
from colony.placement.names import (
    CLUSTER_ANNOTATION,
    COLONY_ANNOTATION,
    COPIES_ANNOTATION,
    GENERATION_ANNOTATION,
    MEMBERS_ANNOTATION,
    MESSAGE_ANNOTATION,
    ORIGIN_UID_LABEL,
    PHASE_ANNOTATION,
    REQUEST_ANNOTATION,
    duplicate_request_name,
    group_request_name,
    request_name,
)
from colony.placement.requests import RequestPlan, Shape, Workload, plan_requests, sum_shapes
from colony.placement.selection import Policy, Selection, parse_policies, select
from colony.scheduling.visibility import NOBODY_ELSE, visibility

RESOURCE = "pytorchjobs.kubeflow.org"


def _job(name: str = "train", labels: Mapping[str, str] | None = None, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": name,
            "namespace": "team",
            "uid": f"uid-{name}",
            "generation": 1,
            "resourceVersion": "7",
            "labels": dict(labels or {}),
            "annotations": dict(annotations),
            "finalizers": [FINALIZER],
        },
        "spec": {"pytorchReplicaSpecs": {}},
    }


def _policy(name: str, **spec: Any) -> Policy:
    return Policy(name, PlacementPolicySpec.model_validate(spec))


def _view(key: str, serves: bool = True, ready: bool = True, **labels: str) -> ColonyView:
    return ColonyView(
        key, labels, ready, "onprem" if ready else None, {RESOURCE: None if serves else "lacks"}
    )


LABELLED = Selection(None, PlacementPolicySpec())
GANG = Shape(2, 8, ("A100-80GB",))


def test_a_policy_selects_by_kind_namespace_and_labels_and_the_label_opts_in_or_out() -> None:
    policies = [
        _policy("b-ray", kinds=[{"group": "ray.io", "kind": "RayJob"}]),
        _policy(
            "a-teams",
            namespaceSelector={"matchLabels": {"tier": "gold"}},
            resourceSelector={"matchLabels": {"app": "x"}},
        ),
    ]
    job = _job(labels={"app": "x"})
    assert select(job, "kubeflow.org", "PyTorchJob", {"tier": "gold"}, policies) == Selection(
        "a-teams", policies[1].spec
    )
    assert select(job, "kubeflow.org", "PyTorchJob", {"tier": "silver"}, policies) is None
    assert select(job, "ray.io", "RayJob", {}, policies) == Selection("b-ray", policies[0].spec)
    labelled = _job(labels={"placement.exalsius.ai/enabled": "true"})
    assert select(labelled, "kubeflow.org", "PyTorchJob", {}, policies) == LABELLED
    opted_out = _job(labels={"app": "x", "placement.exalsius.ai/enabled": "false"})
    assert select(opted_out, "kubeflow.org", "PyTorchJob", {"tier": "gold"}, policies) is None
    by_name = [_policy("n", namespaceSelector={"matchLabels": {"kubernetes.io/metadata.name": "team"}})]
    assert select(job, "kubeflow.org", "PyTorchJob", None, by_name) is not None
    valid, invalid = parse_policies(
        [{"metadata": {"name": "ok"}, "spec": {}}, {"metadata": {"name": "bad"}, "spec": {"priority": 0}}]
    )
    assert [p.name for p in valid] == ["ok"] and "bad" in invalid


def test_candidates_exclude_colonies_lacking_the_crd_with_the_add_on_to_enable() -> None:
    colonies = {
        "team/cheap": _view("team/cheap", serves=False),
        "team/big": _view("team/big"),
        "team/down": _view("team/down", ready=False),
        "other/private": _view("other/private"),
        "ops/shared": _view("ops/shared"),
        "evil/labelled": _view("evil/labelled", **{"colony.exalsius.ai/shared": "true"}),
    }
    shared = visibility(
        [
            {
                "metadata": {"name": "s"},
                "spec": {"colony": {"namespace": "ops", "name": "shared"}, "namespaces": ["team"]},
            }
        ]
    )
    assert candidates("team", LABELLED, RESOURCE, None, colonies, NOBODY_ELSE).allowed == ("team/big",)
    found = candidates("team", LABELLED, RESOURCE, "kubeflow-training", colonies, shared)
    assert found.allowed == ("ops/shared", "team/big") and not found.ordered
    assert found.excluded == (
        "colony team/cheap lacks pytorchjobs.kubeflow.org: enable add-on kubeflow-training",
        "colony team/down is not Ready",
    )
    ordered = Selection("p", PlacementPolicySpec(ordered_colonies=["big", "ops/shared", "cheap", "gone"]))
    found = candidates("team", ordered, RESOURCE, None, colonies, shared)
    assert found.allowed == ("team/big", "ops/shared") and found.ordered
    hostile = Selection("p", PlacementPolicySpec(ordered_colonies=["evil/labelled"]))
    refused = candidates("team", hostile, RESOURCE, None, colonies, shared)
    assert refused.allowed == () and "nor shared with it by a ColonyShare" in refused.summary()
    assert "install the pytorchjobs.kubeflow.org CRD" in found.summary()
    assert "colony team/gone does not exist" in found.summary()
    selector = Selection(
        "p", PlacementPolicySpec.model_validate({"colonySelector": {"matchLabels": {"x": "1"}}})
    )
    assert candidates("team", selector, RESOURCE, None, colonies, shared).allowed == ()


def test_colony_view_takes_the_first_ready_cluster() -> None:
    colony = {
        "metadata": {"name": "c", "namespace": "n", "labels": {"a": "b"}},
        "status": {
            "phase": "Ready",
            "clusters": [{"name": "x", "phase": "Pending"}, {"name": "y", "phase": "Ready"}],
        },
    }
    view = colony_view(colony, {RESOURCE: None})
    assert view.key == "n/c" and view.ready and view.cluster == "y" and view.labels == {"a": "b"}


def _workload(
    obj: dict[str, Any],
    shape: Shape | None = GANG,
    selection: Selection = LABELLED,
    allowed: tuple[str, ...] = ("team/big",),
    ordered: bool = False,
    error: str | None = None,
) -> Workload:
    return Workload(
        obj, selection, Candidates(allowed, ordered, (), dict.fromkeys(allowed, "onprem")), shape, error
    )


def test_one_request_per_object_with_its_shape_colonies_priority_and_queue() -> None:
    policy = Selection(
        "p", PlacementPolicySpec(priority=250, queue_name="gold", ordered_colonies=["big", "cloud"])
    )
    w = _workload(_job(), selection=policy, allowed=("team/big", "team/cloud"), ordered=True)
    (plan,) = plan_requests([w], {}).values()
    assert plan.name == request_name("PyTorchJob", "train") == "pytorchjob-train"
    assert plan.manifest is not None
    assert plan.manifest["spec"] == {
        "gpuShapes": ["A100-80GB"],
        "numberOfGPUNodes": 2,
        "numberOfGPUs": 8,
        "priority": 250,
        "colonies": ["team/big", "team/cloud"],
        "fillAndSpill": True,
        "queueName": "gold",
    }
    meta = plan.manifest["metadata"]
    assert meta["ownerReferences"] == [
        {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "train", "uid": "uid-train"}
    ]
    assert meta["annotations"][MEMBERS_ANNOTATION] == "PyTorchJob/train"
    # Applied as wanted: nothing to change; admitted: its spec is left alone.
    applied = {**plan.manifest, "status": {"phase": "Queued"}}
    assert plan_requests([w], {("team", plan.name): applied})[("team", "PyTorchJob/train")].manifest is None
    any_type = _workload(_job(), shape=Shape(1, 1))
    (plan,) = plan_requests([any_type], {}).values()
    assert plan.manifest is not None and plan.manifest["spec"]["gpuShapes"] == ["*"]
    long = request_name("PyTorchJob", "x" * 80)
    assert len(long) <= 63 and long != request_name("PyTorchJob", "x" * 81)


def test_a_group_gets_one_request_for_the_summed_demand_and_a_late_member_follows_its_colony() -> None:
    policy = Selection("p", PlacementPolicySpec.model_validate({"groupBy": {"labelKey": "exp"}}))
    a = _workload(_job("a", {"exp": "e1"}), Shape(1, 8, ("A100-80GB",)), policy, ("team/x", "team/y"))
    b = _workload(_job("b", {"exp": "e1"}), Shape(2, 4, ("A100-80GB", "H100")), policy, ("team/y",))
    plans = plan_requests([a, b], {})
    name = group_request_name("p", "exp", "e1")
    assert plans[("team", "PyTorchJob/a")].name == plans[("team", "PyTorchJob/b")].name == name == "group-e1"
    manifest = plans[("team", "PyTorchJob/a")].manifest
    assert manifest is not None
    assert manifest["spec"]["numberOfGPUNodes"] == 3 and manifest["spec"]["numberOfGPUs"] == 8
    assert manifest["spec"]["gpuShapes"] == ["A100-80GB"] and manifest["spec"]["colonies"] == ["team/y"]
    assert len(manifest["metadata"]["ownerReferences"]) == 2
    # Admitted on team/y for a and b; c comes later: its own request, on team/y only.
    running = {**manifest, "status": {"phase": "Ready", "colony": "team/y"}}
    c = _workload(_job("c", {"exp": "e1"}), Shape(1, 1), policy, ("team/x", "team/y"))
    plans = plan_requests([a, b, c], {("team", name): running})
    assert plans[("team", "PyTorchJob/a")].manifest is None and not plans[("team", "PyTorchJob/a")].release
    follower = plans[("team", "PyTorchJob/c")]
    assert follower.name == "pytorchjob-c" and follower.manifest is not None
    assert follower.manifest["spec"]["colonies"] == ["team/y"]
    finished_b = _workload(_job("b", {"exp": "e1"}, **{PHASE_ANNOTATION: "Succeeded"}), b.shape, policy)
    assert plan_requests([a, finished_b], {("team", name): running})[("team", "PyTorchJob/a")].release
    assert (
        sum_shapes([Shape(1, 1, ("A",)), Shape(1, 1, ("B",))])
        == "the group's members accept no common GPU type"
    )


def _pin(obj: Mapping[str, Any], selector: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": {"name": obj["metadata"]["name"]},
        "pinned": selector,
    }


def _phase(copy: Mapping[str, Any]) -> str:
    return str((copy.get("status") or {}).get("phase", "Pending"))


def _ready_request(colony: str = "team/big") -> dict[str, Any]:
    return {
        "metadata": {"name": "pytorchjob-train", "annotations": {MEMBERS_ANNOTATION: "PyTorchJob/train"}},
        "status": {
            "phase": "Ready",
            "colony": colony,
            "reservationLabel": "gpr.colony.exalsius.ai/abc",
            "nodes": [{"cluster": "onprem", "node": "n1", "gpus": 8}],
            "gpusAllocated": 16,
            "gpuType": "A100-80GB",
        },
    }


def _kinds(actions: list[act.Action]) -> list[str]:
    return [type(a).__name__ for a in actions]


def test_lifecycle_queued_placed_mirrored_finished_released() -> None:
    fresh = _job()
    fresh["metadata"]["finalizers"] = []
    w = _workload(fresh)
    plan = plan_requests([w], {})[("team", "PyTorchJob/train")]
    queued = act.decide(w, plan, act.Observed(), _pin, _phase)
    assert _kinds(queued) == ["AddFinalizer", "ApplyRequest", "Annotate", "Event"]
    assert isinstance(queued[2], act.Annotate) and queued[2].annotations[PHASE_ANNOTATION] == "Queued"

    # The request is Ready: the copy is pinned to the reserved nodes and the colony recorded.
    w = _workload(_job(**{PHASE_ANNOTATION: "Queued", REQUEST_ANNOTATION: "pytorchjob-train"}))
    plan = RequestPlan("pytorchjob-train", _ready_request())
    placed = act.decide(w, plan, act.Observed(), _pin, _phase)
    assert _kinds(placed) == ["ApplyCopy", "Annotate", "Event"]
    copy = placed[0]
    assert isinstance(copy, act.ApplyCopy) and copy.colony == "team/big" and copy.cluster == "onprem"
    assert copy.manifest["pinned"] == {"gpr.colony.exalsius.ai/abc": "8"}
    assert copy.manifest["metadata"]["labels"] == {ORIGIN_UID_LABEL: "uid-train"}
    assert isinstance(placed[1], act.Annotate) and placed[1].annotations[COLONY_ANNOTATION] == "team/big"

    # Placed: the copy runs; its status is mirrored and the phase recorded.
    on = {
        COLONY_ANNOTATION: "team/big",
        CLUSTER_ANNOTATION: "onprem",
        PHASE_ANNOTATION: "Pending",
        GENERATION_ANNOTATION: "1",
    }
    w = _workload(_job(**on))
    running_copy = {"status": {"phase": "Running", "conditions": [{"type": "Running"}]}}
    seen = act.Observed(colony_ready=True, copy_known=True, copy=running_copy)
    steps = act.decide(w, plan, seen, _pin, _phase)
    assert _kinds(steps) == ["MirrorStatus", "Annotate", "Event"]
    assert isinstance(steps[2], act.Event) and steps[2].reason == "WorkloadRunning"

    # Finished: the request is deleted (GPUs freed).
    done = {"status": {"phase": "Succeeded"}}
    w = _workload(_job(**{**on, PHASE_ANNOTATION: "Running"}))
    steps = act.decide(w, plan, act.Observed(True, True, done), _pin, _phase)
    assert _kinds(steps) == ["MirrorStatus", "Annotate", "Event", "DeleteRequest", "Event"]
    # Nothing more to do once finished, mirrored and released.
    w = _workload({**_job(**{**on, PHASE_ANNOTATION: "Succeeded"}), "status": {"phase": "Succeeded"}})
    assert (
        act.decide(w, RequestPlan("pytorchjob-train", None), act.Observed(False, False, None), _pin, _phase)
        == []
    )


def test_a_lost_colony_or_request_or_copy_requeues_and_deletion_cleans_up() -> None:
    on = {
        COLONY_ANNOTATION: "team/big",
        CLUSTER_ANNOTATION: "onprem",
        PHASE_ANNOTATION: "Running",
        GENERATION_ANNOTATION: "1",
    }
    w = _workload(_job(**on))
    plan = RequestPlan("pytorchjob-train", _ready_request())
    lost = act.decide(w, plan, act.Observed(colony_ready=False), _pin, _phase)
    assert _kinds(lost) == ["DeleteRequest", "Annotate", "Event"]
    assert isinstance(lost[1], act.Annotate) and lost[1].annotations[COLONY_ANNOTATION] is None
    gone = act.decide(w, plan, act.Observed(True, True, None), _pin, _phase)
    assert _kinds(gone) == ["DeleteRequest", "Annotate", "Event"] and "copy" in str(gone[1])
    # A colony being deleted whose cluster can still be read: its copy is deleted too.
    leaving = act.decide(w, plan, act.Observed(False, True, {"status": {}}), _pin, _phase)
    assert _kinds(leaving) == ["DeleteCopy", "DeleteRequest", "Annotate", "Event"]
    evicted = RequestPlan("pytorchjob-train", {**_ready_request(), "status": {"phase": "Queued"}})
    steps = act.decide(w, evicted, act.Observed(True, True, {"status": {}}), _pin, _phase)
    assert _kinds(steps) == ["DeleteCopy", "DeleteRequest", "Annotate", "Event"]
    moved = _workload(_job(**on), allowed=("team/other",))
    assert "no longer allowed" in str(act.decide(moved, plan, act.Observed(True, True, {}), _pin, _phase))

    deleting = _job(**on)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    steps = act.decide(_workload(deleting), plan, act.Observed(True, True, {}), _pin, _phase)
    assert steps == [
        act.DeleteCopy("team/big", "onprem"),
        act.DeleteRequest("pytorchjob-train"),
        act.RemoveFinalizer(),
    ]
    # The copy's cluster, of a Ready colony, unread this pass: wait rather than leave the copy (a
    # failed try of the cleanup, counted: test_placement_cleanup.py).
    unread = act.decide(_workload(deleting), plan, act.Observed(True, False, None), _pin, _phase)
    assert _kinds(unread) == ["CleanupFailed"]
    gone_colony = act.decide(_workload(deleting), plan, act.Observed(False, False, None), _pin, _phase)
    assert gone_colony == [act.DeleteRequest("pytorchjob-train"), act.RemoveFinalizer()]
    job = _workload(_job(**on, **{REQUEST_ANNOTATION: "pytorchjob-train"}))
    unplaced = act.unplace(job, plan, act.Observed(True, True, {}))
    assert _kinds(unplaced) == ["DeleteCopy", "DeleteRequest", "Annotate", "RemoveFinalizer", "Event"]


def test_demand_errors_and_objects_without_gpus() -> None:
    w = _workload(_job(), shape=None, error="no pod template")
    steps = act.decide(w, None, act.Observed(), _pin, _phase)
    assert _kinds(steps) == ["Annotate", "Event"] and isinstance(steps[1], act.Event) and steps[1].warning
    cpu = _workload(_job(), shape=None)
    steps = act.decide(cpu, None, act.Observed(), _pin, _phase)
    assert _kinds(steps) == ["ApplyCopy", "Annotate", "Event"]
    assert isinstance(steps[0], act.ApplyCopy) and steps[0].manifest["pinned"] == {}


DUPLICATE = Selection("everywhere", PlacementPolicySpec.model_validate({"spread": {"mode": "Duplicate"}}))
TWO = ("team/a", "team/b")


def _gpr(colony: str, phase: str, ready: bool = False) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "colony": colony}
    if ready:
        status |= {
            "reservationLabel": "gpr.colony.exalsius.ai/abc",
            "nodes": [{"cluster": "onprem", "gpus": 8}],
        }
    return {
        "metadata": {
            "name": duplicate_request_name("PyTorchJob", "train", colony, "team"),
            "annotations": {COLONY_ANNOTATION: colony},
            "ownerReferences": [{"uid": "uid-train"}],
        },
        "spec": {},
        "status": status,
    }


def _copies(**phases: str) -> str:
    records = {f"team/{c}": dup.Record("onprem", p, "1") for c, p in phases.items()}
    return dup.encode(records) or ""


def test_spread_accepts_duplicate_only_and_the_crd_rejects_divide_with_a_message() -> None:
    assert dup.is_duplicate(DUPLICATE) and not dup.is_duplicate(LABELLED)
    policies, invalid = parse_policies(
        [{"metadata": {"name": "divide"}, "spec": {"spread": {"mode": "Divide"}}}]
    )
    assert policies == [] and "Divide is not supported" in invalid["divide"]
    from colony.api.crdgen import crd_for
    from colony.api.placementpolicy import PLACEMENT_POLICY

    schema = crd_for(PLACEMENT_POLICY)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spread = schema["properties"]["spec"]["properties"]["spread"]
    assert spread["x-kubernetes-validations"][0]["rule"] == "self.mode == 'Duplicate'"
    assert "Divide is not supported" in spread["x-kubernetes-validations"][0]["message"]


def test_duplicate_asks_one_request_per_colony_then_places_a_copy_on_each() -> None:
    fresh = _job()
    fresh["metadata"]["finalizers"] = []
    w = _workload(fresh, selection=DUPLICATE, allowed=TWO)
    steps = dup.decide(w, {}, {}, _pin, _phase)
    assert _kinds(steps) == ["AddFinalizer", "ApplyRequest", "ApplyRequest", "Annotate"]
    requests = [s.manifest for s in steps if isinstance(s, act.ApplyRequest)]
    assert [r["metadata"]["name"] for r in requests] == ["pytorchjob-train--a", "pytorchjob-train--b"]
    assert [r["spec"]["colonies"] for r in requests] == [["team/a"], ["team/b"]]
    assert all(r["spec"]["numberOfGPUNodes"] == 2 and not r["spec"]["fillAndSpill"] for r in requests)
    assert requests[0]["metadata"]["annotations"][COLONY_ANNOTATION] == "team/a"
    assert isinstance(steps[3], act.Annotate) and steps[3].annotations[PHASE_ANNOTATION] == "Queued"
    assert COPIES_ANNOTATION not in steps[3].annotations

    # a's request is Ready: its copy is created; b still waits (the object's phase: Queued).
    w = _workload(_job(**{PHASE_ANNOTATION: "Queued"}), selection=DUPLICATE, allowed=TWO)
    gprs = {
        ("team", f"r{i}"): g for i, g in enumerate([_gpr("team/a", "Ready", True), _gpr("team/b", "Queued")])
    }
    found = dup.requests_of(w, gprs)
    assert set(found) == set(TWO)
    steps = dup.decide(w, found, {}, _pin, _phase)
    assert _kinds(steps) == ["ApplyCopy", "ApplyRequest", "Annotate", "Event"]
    copy = steps[0]
    assert isinstance(copy, act.ApplyCopy) and copy.colony == "team/a" and copy.cluster == "onprem"
    assert copy.manifest["pinned"] == {"gpr.colony.exalsius.ai/abc": "8"}
    annotate = steps[2]
    assert isinstance(annotate, act.Annotate) and PHASE_ANNOTATION not in annotate.annotations  # Queued
    assert dup.records_in({COPIES_ANNOTATION: str(annotate.annotations[COPIES_ANNOTATION])}) == {
        "team/a": dup.Record("onprem", "Pending", "1")
    }
    assert "team/a Pending, team/b Queued (waiting for GPUs" in str(annotate.annotations[MESSAGE_ANNOTATION])

    # An object asking for no GPUs: a copy on every colony at once.
    cpu = _workload(_job(), shape=None, selection=DUPLICATE, allowed=TWO)
    assert _kinds(dup.decide(cpu, {}, {}, _pin, _phase)) == [
        "ApplyCopy",
        "ApplyCopy",
        "Annotate",
        "Event",
        "Event",
    ]


def test_duplicate_phase_is_the_worst_copy_and_a_colony_leaving_drops_its_copy() -> None:
    both = {PHASE_ANNOTATION: "Pending", COPIES_ANNOTATION: _copies(a="Running", b="Pending")}
    w = _workload(_job(**both), selection=DUPLICATE, allowed=TWO)
    gprs = dup.requests_of(w, {("team", c): _gpr(f"team/{c}", "Ready", True) for c in "ab"})
    running, pending = {"status": {"phase": "Running"}}, {"status": {"phase": "Pending", "x": 1}}
    seen = {"team/a": act.Observed(True, True, running), "team/b": act.Observed(True, True, pending)}
    steps = dup.decide(w, gprs, seen, _pin, _phase)
    # b's copy (Pending) is the worst: its status is mirrored; the phase stays Pending.
    assert steps[0] == act.MirrorStatus({"phase": "Pending", "x": 1})
    assert _kinds(steps) == ["MirrorStatus", "Annotate"]
    assert "team/a Running, team/b Pending" in str(steps[1])

    # b leaves the eligible set (policy, not Ready, CRD gone): its copy and request are deleted.
    w = _workload(_job(**both), selection=DUPLICATE, allowed=("team/a",))
    steps = dup.decide(w, gprs, seen, _pin, _phase)
    assert steps[:2] == [act.DeleteCopy("team/b", "onprem"), act.DeleteRequest("pytorchjob-train--b")]
    annotate = next(s for s in steps if isinstance(s, act.Annotate))
    assert annotate.annotations[PHASE_ANNOTATION] == "Running"
    assert set(dup.records_in({COPIES_ANNOTATION: str(annotate.annotations[COPIES_ANNOTATION])})) == {
        "team/a"
    }

    # a's copy deleted in the colony: requeued there (request deleted, asked again next pass).
    w = _workload(_job(**both), selection=DUPLICATE, allowed=TWO)
    gone = {**seen, "team/a": act.Observed(True, True, None)}
    steps = dup.decide(w, gprs, gone, _pin, _phase)
    assert act.DeleteRequest("pytorchjob-train--a") in steps
    assert any(isinstance(s, act.Event) and s.reason == "Rescheduled" for s in steps)

    # Finished copies release their requests.
    done = {"team/a": act.Observed(True, True, {"status": {"phase": "Succeeded"}})}
    w = _workload(_job(**{COPIES_ANNOTATION: _copies(a="Running")}), selection=DUPLICATE, allowed=("team/a",))
    steps = dup.decide(
        w, dup.requests_of(w, {("team", "a"): _gpr("team/a", "Ready", True)}), done, _pin, _phase
    )
    assert act.DeleteRequest("pytorchjob-train--a") in steps
    assert next(s for s in steps if isinstance(s, act.Annotate)).annotations[PHASE_ANNOTATION] == "Succeeded"


def test_deleting_a_duplicated_object_deletes_every_copy_and_request() -> None:
    deleting = _job(**{COPIES_ANNOTATION: _copies(a="Running", b="Running")})
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    w = _workload(deleting, selection=DUPLICATE, allowed=TWO)
    gprs = dup.requests_of(w, {("team", c): _gpr(f"team/{c}", "Ready", True) for c in "ab"})
    seen = {c: act.Observed(True, True, {}) for c in TWO}
    assert dup.decide(w, gprs, seen, _pin, _phase) == [
        act.DeleteCopy("team/a", "onprem"),
        act.DeleteCopy("team/b", "onprem"),
        act.DeleteRequest("pytorchjob-train--a"),
        act.DeleteRequest("pytorchjob-train--b"),
        act.RemoveFinalizer(),
    ]
    # b's cluster, of a Ready colony, unread this pass: wait (a failed try, counted).
    unread = dup.decide(w, gprs, {**seen, "team/b": act.Observed(True, False, None)}, _pin, _phase)
    assert _kinds(unread) == ["CleanupFailed"]
    # No longer spread: copies and requests deleted, annotations and finalizer off.
    w = _workload(_job(**{COPIES_ANNOTATION: _copies(a="Running")}), selection=DUPLICATE, allowed=TWO)
    steps = dup.unplace(w, dup.requests_of(w, {("team", "a"): _gpr("team/a", "Ready", True)}), seen)
    assert _kinds(steps) == ["DeleteCopy", "DeleteRequest", "Annotate", "RemoveFinalizer", "Event"]
    assert (
        duplicate_request_name("PyTorchJob", "train", "shared/gpus", "team")
        == "pytorchjob-train--shared-gpus"
    )


def test_forged_placement_annotations_never_reach_a_colony_the_namespace_cannot_see() -> None:
    """A tenant writes its own framework object's annotations: claiming it is placed on another
    namespace's colony (and on which cluster, in which phase, at which generation) gets no copy
    there and no status from there; the object is queued again on its own colonies (issue 16, G8)."""
    colonies = {"team/big": _view("team/big"), "other/private": _view("other/private")}
    allowed = candidates("team", LABELLED, RESOURCE, None, colonies, NOBODY_ELSE).allowed
    assert allowed == ("team/big",)
    forged = {
        COLONY_ANNOTATION: "other/private",
        CLUSTER_ANNOTATION: "onprem",
        PHASE_ANNOTATION: "Running",
        GENERATION_ANNOTATION: "0",  # stale on purpose: a placed object would get its copy updated
        REQUEST_ANNOTATION: "pytorchjob-train",
    }
    plan = RequestPlan("pytorchjob-train", _ready_request("team/big"))
    for shape, request in ((GANG, plan), (None, None)):
        w = _workload(_job(**forged), shape=shape, allowed=allowed)
        # The private colony is Ready and its cluster readable; no copy of this object is there
        # (copies are found by the object's uid, which the API server assigns).
        steps = act.decide(w, request, act.Observed(True, True, None), _pin, _phase)
        assert not [s for s in steps if isinstance(s, act.ApplyCopy | act.MirrorStatus | act.DeleteCopy)]
        (annotate,) = [s for s in steps if isinstance(s, act.Annotate)]
        assert annotate.annotations[COLONY_ANNOTATION] is None
        assert annotate.annotations[PHASE_ANNOTATION] == "Queued"
        assert "colony other/private is no longer allowed" in annotate.annotations[MESSAGE_ANNOTATION]
        # A forged finished phase skips the re-check, and still copies nothing anywhere.
        finished = _workload(_job(**{**forged, PHASE_ANNOTATION: "Succeeded"}), shape=shape, allowed=allowed)
        steps = act.decide(finished, request, act.Observed(True, True, None), _pin, _phase)
        assert not [s for s in steps if isinstance(s, act.ApplyCopy | act.MirrorStatus | act.DeleteCopy)]
    # Queued again, the next pass places it only where it may go.
    w = _workload(_job(), shape=None, allowed=allowed)
    (copy,) = [s for s in act.decide(w, None, act.Observed(), _pin, _phase) if isinstance(s, act.ApplyCopy)]
    assert copy.colony == "team/big"
