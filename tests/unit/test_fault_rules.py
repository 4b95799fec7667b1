"""Unit tests for scheduling/fault_rules.py (issue 17.3, 17.4) and the ephemeral colony's name."""

from __future__ import annotations

from typing import Any

from colony.labels import EPHEMERAL_LABEL, FOR_GPR_LABEL
from colony.render.names import MAX_NAME_LENGTH, name_problem
from colony.render.offer_colony import ephemeral_colony_name
from colony.scheduling.fault_rules import (
    COLONY_REACHABLE,
    IdleAction,
    LabelFix,
    has_ledger,
    idle_action,
    label_fixes,
    label_removals,
    labels_of_colony,
    ledger_entry,
    orphaned_colonies,
    pinned_while_unreachable,
    reachability_condition,
    reservations,
    settled_ledger,
    stale_ledger,
    transition_applies,
    unreachable_clusters,
)
from colony.scheduling.queueing.model import GpuRequest, NodeAllocation, Placement, RunningRequest
from colony.scheduling.queueing.objects import reservation_label


def _gpr(name: str, phase: str | None = None, namespace: str = "team", **status: Any) -> dict[str, Any]:
    """A request; one that ever was admitted (any phase but none/Queued here) has its reservationLabel."""
    if phase not in (None, "Queued"):
        status.setdefault("reservationLabel", reservation_label(f"{namespace}/{name}"))
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "generation": 1},
        "spec": {},
        "status": {"phase": phase, **status},
    }


def _node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


ON_N1 = {"colony": "team/pool", "nodes": [{"cluster": "c", "node": "n1", "gpus": 4}]}


def test_unreachable_colony_pauses_idle_timer_even_when_overdue() -> None:
    assert idle_action(False, False, 0.0, 10_000.0, 60.0) is IdleAction.PAUSE
    assert idle_action(False, False, None, 10_000.0, 60.0) is IdleAction.PAUSE


def test_idle_timer_steps_when_reachable() -> None:
    assert idle_action(True, False, None, 100.0, 60.0) is IdleAction.START
    assert idle_action(True, False, 50.0, 100.0, 60.0) is IdleAction.KEEP
    assert idle_action(True, False, 40.0, 100.0, 60.0) is IdleAction.RELEASE
    assert idle_action(True, True, 40.0, 100.0, 60.0) is IdleAction.CLEAR
    assert idle_action(True, True, None, 100.0, 60.0) is IdleAction.KEEP


def test_ephemeral_colony_name_is_stable_bounded_and_unique() -> None:
    uid = "0f6c7a4e-1b2c-4d5e-8f90-123456789abc"
    assert ephemeral_colony_name(uid) == ephemeral_colony_name(uid) == f"gpr-{uid}"
    assert ephemeral_colony_name(uid) != ephemeral_colony_name(uid[:-1] + "d")
    long = ephemeral_colony_name("x" * 200)
    assert len(long) <= MAX_NAME_LENGTH and name_problem(long) is None
    assert long != ephemeral_colony_name("x" * 199)  # a shared prefix does not collide


def test_unreachable_clusters_are_those_of_the_allocation_not_read() -> None:
    gpr = _gpr(
        "a", "Ready", colony="team/pool", nodes=[{"cluster": "c", "node": "n"}, {"cluster": "d", "node": "m"}]
    )
    colonies = {"team/pool"}
    assert unreachable_clusters(gpr, {("team/pool", "c"), ("team/pool", "d")}, colonies) == []
    assert unreachable_clusters(gpr, {("team/pool", "c"), ("other/pool", "d")}, colonies) == ["d"]
    assert unreachable_clusters(gpr, set(), colonies) == ["c", "d"]
    assert unreachable_clusters(gpr, set(), set()) == []  # the colony is gone: nothing to wait for
    assert unreachable_clusters(_gpr("q", "Queued", colony="team/pool"), set(), colonies) == []


def test_a_request_on_an_unreachable_colony_is_never_a_preemption_victim() -> None:
    request = GpuRequest("team/a", "q", 0, 0.0, ("H100",), 1, 1, evictable=True)
    running = RunningRequest(request, Placement("team/pool", "H100", (NodeAllocation("c/n", 1),)), 0.0)
    assert pinned_while_unreachable(running, False) is running
    pinned = pinned_while_unreachable(running, True)
    assert not pinned.request.evictable and pinned.placement == running.placement


def test_reachability_condition_is_written_when_it_changes_only() -> None:
    unreachable = reachability_condition([], "team/pool", ["c"])
    assert unreachable is not None and unreachable[:2] == ("False", "ColonyUnreachable")
    assert "GPUs stay reserved" in unreachable[2] and "idle timer is paused" in unreachable[2]
    said = [{"type": COLONY_REACHABLE, "status": "False", "reason": "ColonyUnreachable"}]
    assert reachability_condition(said, "team/pool", ["c"]) is None
    back = reachability_condition(said, "team/pool", [])
    assert back is not None and back[:2] == ("True", "ColonyReachable")
    assert reachability_condition([], "team/pool", []) is None  # never unreachable: nothing to say
    assert (
        reachability_condition([{**said[0], "status": "True", "reason": "ColonyReachable"}], "p", []) is None
    )


def test_labels_of_requests_holding_nothing_come_off_and_missing_ones_of_ready_requests_are_rewritten() -> (
    None
):
    ready = _gpr("ready", "Ready", **ON_N1)
    released = _gpr("released", "Released", **ON_N1)
    deleting = _gpr("deleting", "Ready", **ON_N1)
    deleting["metadata"]["deletionTimestamp"] = "2026-12-04T00:00:00Z"
    admitted = _gpr("admitted", "Admitted", **ON_N1)  # its admission is still labelling
    foreign = "gpr.colony.exalsius.ai/0123456789abcdef"  # another operator's: not ours to judge
    labels = {reservation_label(f"team/{n}"): "4" for n in ("released", "deleting")}
    never = _gpr("never", "Queued")  # never admitted: no label of it anywhere, so not even looked at
    nodes = {"c": [_node("n1", **labels, **{foreign: "2"}), _node("n2")]}
    known = reservations([ready, released, deleting, admitted, never])
    assert reservation_label("team/never") not in known.done
    (fix,) = label_fixes("team/pool", nodes, known, {})
    assert fix == LabelFix(
        "c",
        "n1",
        {
            reservation_label("team/released"): None,
            reservation_label("team/deleting"): None,
            reservation_label("team/ready"): "4",
        },
    )
    # a wrong value is rewritten; a node not listed (its cluster was not read) is left alone
    nodes = {"c": [_node("n1", **{reservation_label("team/ready"): "2"})]}
    assert label_fixes("team/pool", nodes, reservations([ready]), {})[0].labels == {
        reservation_label("team/ready"): "4"
    }
    assert label_fixes("team/pool", {}, reservations([ready]), {}) == []
    assert label_fixes("other/pool", nodes, reservations([ready]), {}) == []  # not its colony


def test_ledger_labels_of_gone_requests_come_off_unless_a_live_request_holds_them() -> None:
    gone = reservation_label("team/gone")
    back = reservation_label("team/back")  # requeued and admitted again since
    key, value = ledger_entry(gone, ["c/n1", "c/n1", "d/n2"])
    assert key.startswith("stale.gpr.colony.exalsius.ai/") and value == "c/n1,d/n2"
    meta = {"annotations": {key: value, ledger_entry(back, ["c/n1"])[0]: "c/n1", "other": "x"}}
    ledger = stale_ledger(meta)
    assert ledger == {gone: ["c/n1", "d/n2"], back: ["c/n1"]}
    live = _gpr("back", "Ready", colony="team/pool", nodes=[{"cluster": "c", "node": "n1", "gpus": 2}])
    nodes = {"c": [_node("n1", **{gone: "8", back: "2"})]}
    assert label_fixes("team/pool", nodes, reservations([live]), ledger) == [
        LabelFix("c", "n1", {gone: None})
    ]
    assert settled_ledger(ledger, ["c"]) == [back]  # d was not read: the gone one's entry stays
    assert settled_ledger(ledger, ["c", "d"]) == [back, gone]


def test_a_transition_is_retried_on_a_fresh_version_only_while_it_still_applies() -> None:
    read = _gpr("a", "Ready", **ON_N1)
    running = ("Admitted", "Ready")
    fresh = _gpr("a", "Ready", **ON_N1)
    fresh["metadata"]["resourceVersion"] = "9"  # e.g. an annotation was written meanwhile
    assert transition_applies(read, fresh, running, same_allocation=True)
    assert not transition_applies(read, None, running)
    assert not transition_applies(read, _gpr("a", "Released", **ON_N1), running)
    moved = _gpr("a", "Ready", colony="team/pool", nodes=[{"cluster": "c", "node": "n2", "gpus": 4}])
    assert not transition_applies(read, moved, running, same_allocation=True)
    assert transition_applies(read, moved, running)
    deleting = _gpr("a", "Ready", **ON_N1)
    deleting["metadata"]["deletionTimestamp"] = "2026-12-04T00:00:00Z"
    assert not transition_applies(read, deleting, running)
    recreated = _gpr("a", "Ready", **ON_N1)
    recreated["metadata"]["uid"] = "another"
    assert not transition_applies(read, recreated, running)
    edited = _gpr("a", "Queued")
    edited["metadata"]["generation"] = 2
    assert transition_applies(_gpr("a", "Queued"), edited, (None, "Queued"))
    assert not transition_applies(_gpr("a", "Queued"), edited, (None, "Queued"), same_spec=True)


def _colony(name: str, owner: str | None, ephemeral: bool = True, **meta: Any) -> dict[str, Any]:
    labels = {EPHEMERAL_LABEL: "true"} if ephemeral else {}
    if owner is not None:
        labels[FOR_GPR_LABEL] = owner
    return {"metadata": {"name": name, "namespace": "team", "labels": labels, **meta}}


def test_ephemeral_colonies_whose_request_is_gone_are_orphans() -> None:
    colonies = {
        "team/gpr-uid-live": _colony("gpr-uid-live", "uid-live"),
        "team/gpr-uid-gone": _colony("gpr-uid-gone", "uid-gone"),
        "team/old-style": _colony("old-style", "live"),  # labelled with the request's name
        "team/old-gone": _colony("old-gone", "gone"),
        "team/user": _colony("user", None, ephemeral=False),
        "team/not-ephemeral": _colony("not-ephemeral", "uid-gone", ephemeral=False),
        "team/deleting": _colony("deleting", "uid-gone", deletionTimestamp="2026-12-04T00:00:00Z"),
        "team/used": _colony("used", "uid-gone"),
        "team/waited-for": _colony("waited-for", "uid-gone"),
    }
    gprs = [
        _gpr("live", "Provisioning", provisionedColony="gpr-uid-live"),
        _gpr("other", "Ready", colony="team/used"),
        _gpr("next", "Queued", provisionedColony="waited-for"),
        _gpr("finished", "Released", colony="team/gpr-uid-gone"),  # released: holds nothing there
    ]
    assert orphaned_colonies(colonies, gprs) == ["team/gpr-uid-gone", "team/old-gone"]
    other_namespace = [_gpr("live", "Ready", namespace="elsewhere")]
    assert "team/old-style" in orphaned_colonies(colonies, other_namespace)


def test_a_deleted_colony_takes_off_its_ledger_and_the_labels_of_every_request_placed_through_it() -> None:
    gone = reservation_label("team/gone")
    meta = {"annotations": dict([ledger_entry(gone, ["onprem/n1"]), ("other", "x")])}
    gprs = [
        _gpr("ready", "Ready", colony="team/pool"),
        _gpr("released", "Released", colony="team/pool"),
        _gpr("elsewhere", "Ready", colony="team/other"),
        _gpr("waiting"),
    ]
    assert labels_of_colony("team/pool", meta, gprs) == {
        gone,
        reservation_label("team/ready"),
        reservation_label("team/released"),
    }
    assert labels_of_colony("team/pool", {}, []) == frozenset()


def test_label_removals_name_only_the_nodes_carrying_one_of_the_labels() -> None:
    mine, theirs = reservation_label("team/a"), reservation_label("other/b")
    nodes = [
        {"metadata": {"name": "n2", "labels": {mine: "2", theirs: "1", "gpu": "H100"}}},
        {"metadata": {"name": "n1", "labels": {mine: "8"}}},
        {"metadata": {"name": "n3", "labels": {theirs: "1"}}},
        {"metadata": {"name": "n4"}},
    ]
    assert label_removals(nodes, {mine}) == [("n1", {mine: None}), ("n2", {mine: None})]
    assert label_removals(nodes, set()) == []


def test_a_colony_has_a_ledger_only_with_a_stale_reservation_entry() -> None:
    assert has_ledger({"annotations": dict([ledger_entry(reservation_label("t/x"), ["c/n"])])})
    assert not has_ledger({"annotations": {"colony.exalsius.ai/shared": "true"}})
    assert not has_ledger({})


def test_a_colony_with_a_ledger_is_read_even_when_no_request_wants_it() -> None:
    from colony.controllers.gpr.world import World, _colonies_in_play

    def colony(name: str, **annotations: str) -> dict[str, Any]:
        meta = {"name": name, "namespace": "team", "annotations": annotations}
        return {"metadata": meta, "status": {"phase": "Ready"}}

    key, value = ledger_entry(reservation_label("team/gone"), ["onprem/n1"])
    colonies = {"team/quiet": colony("quiet"), "team/ledger": colony("ledger", **{key: value})}
    world = World(0.0, [], [], colonies, colonies)
    assert _colonies_in_play(world) == {"team/ledger"}
