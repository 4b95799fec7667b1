"""Deleting a placed framework object always ends (issue 17, point 6): a copy that cannot be deleted
in its colony cluster (any error, or a cluster that cannot be read) is a failed try, counted on
the object; after DELETE_RETRIES the copy is given up with a CleanupAbandoned Event naming it and
the finalizer goes (colony.scheduling.cleanup, the bound DDPJob cleanup uses too)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast

from colony.controllers import placement
from colony.controllers.placement_clusters import ColonyAccess
from colony.labels import FINALIZER
from colony.placement import decide as act
from colony.placement import duplicate as dup
from colony.placement.candidates import Candidates
from colony.placement.names import (
    CLEANUP_FAILURES_ANNOTATION,
    CLUSTER_ANNOTATION,
    COLONY_ANNOTATION,
    COPIES_ANNOTATION,
)
from colony.placement.requests import RequestPlan, Shape, Workload
from colony.placement.selection import Selection
from colony.scheduling.cleanup import DELETE_RETRIES, DELETE_RETRY_DELAY_S
from colony.timefmt import format_time
from tests.unit.test_placement import DUPLICATE, LABELLED, _copies, _pin, _ready_request

NOW = datetime(2026, 12, 6, 2, 0, tzinfo=UTC)
PLACED = {COLONY_ANNOTATION: "team/big", CLUSTER_ANNOTATION: "onprem"}


def _failures(tries: int, at: datetime = NOW, error: str = "403 Forbidden") -> dict[str, str]:
    return {CLEANUP_FAILURES_ANNOTATION: json.dumps({"tries": tries, "at": format_time(at), "error": error})}


def _deleting(annotations: dict[str, str], deleting: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "train",
        "namespace": "team",
        "uid": "uid-train",
        "generation": 1,
        "resourceVersion": "7",
        "annotations": annotations,
        "finalizers": [FINALIZER],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-12-06T01:59:00Z"
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": meta, "spec": {}}


def _workload(obj: dict[str, Any], selection: Selection = LABELLED) -> Workload:
    allowed = ("team/big", "team/a", "team/b")
    candidates = Candidates(allowed, False, (), dict.fromkeys(allowed, "onprem"))
    return Workload(obj, selection, candidates, Shape(1, 8, ("A100-80GB",)))


def _phase(copy: Any) -> str:
    return "Running"


PLAN = RequestPlan("pytorchjob-train", _ready_request())
COPY = act.Observed(True, True, {"status": {}})
UNREAD = act.Observed(True, False, None)


def test_the_failed_tries_are_read_back_tolerantly_and_spaced() -> None:
    none = act.cleanup_failures({})
    assert (none.tries, none.at) == (0, None) and none.retry_due(NOW)
    for garbage in ("", "x", "[]", '{"tries": "many"}', '{"tries": -4}'):
        assert act.cleanup_failures({CLEANUP_FAILURES_ANNOTATION: garbage}).tries == 0
    recorded = act.cleanup_failures({CLEANUP_FAILURES_ANNOTATION: none.record(NOW, "503")})
    assert (recorded.tries, recorded.at, recorded.error) == (1, NOW, "503")
    again = act.cleanup_failures({CLEANUP_FAILURES_ANNOTATION: recorded.record(NOW, "x" * 1000)})
    assert again.tries == 2 and len(again.error) == 300
    assert not recorded.retry_due(NOW + timedelta(seconds=DELETE_RETRY_DELAY_S / 2))
    assert recorded.retry_due(NOW + timedelta(seconds=DELETE_RETRY_DELAY_S))


def test_a_deleting_object_tries_its_copy_until_the_bound_then_abandons_it_and_lets_go() -> None:
    for tries in range(DELETE_RETRIES):
        w = _workload(_deleting({**PLACED, **_failures(tries)}))
        assert act.decide(w, PLAN, COPY, _pin, _phase) == [
            act.DeleteCopy("team/big", "onprem"),
            act.DeleteRequest("pytorchjob-train"),
            act.RemoveFinalizer(),
        ]
        assert act.decide(w, PLAN, UNREAD, _pin, _phase) == [
            act.CleanupFailed("cannot read PyTorchJob team/train in colony team/big cluster onprem")
        ]
    w = _workload(_deleting({**PLACED, **_failures(DELETE_RETRIES)}))
    for seen, where in ((COPY, "colony team/big"), (UNREAD, "its colony clusters")):
        request, event, release = act.decide(w, PLAN, seen, _pin, _phase)
        assert request == act.DeleteRequest("pytorchjob-train")  # the GPUs are freed all the same
        assert release == act.RemoveFinalizer()
        assert isinstance(event, act.Event) and event.reason == "CleanupAbandoned" and event.warning
        assert event.message == (
            f"gave up cleaning up on {where} after {DELETE_RETRIES} tries (403 Forbidden); "
            "left behind: PyTorchJob team/train in colony team/big cluster onprem"
        )
    # Nothing left to give up (the copy is gone by now): an ordinary release, no Event.
    assert act.decide(w, PLAN, act.Observed(True, True, None), _pin, _phase) == [
        act.DeleteRequest("pytorchjob-train"),
        act.RemoveFinalizer(),
    ]


def test_an_object_only_no_longer_selected_keeps_waiting_and_counts_nothing() -> None:
    w = _workload(_deleting({**PLACED, **_failures(DELETE_RETRIES)}, deleting=False))
    assert act.unplace(w, PLAN, UNREAD) == []
    kinds = [type(a).__name__ for a in act.unplace(w, PLAN, COPY)]
    assert kinds == ["DeleteCopy", "DeleteRequest", "Annotate", "RemoveFinalizer", "Event"]
    # a dropped object being deleted goes through unplace: bounded like decide
    dropped = _workload(_deleting({**PLACED, **_failures(DELETE_RETRIES)}))
    steps = act.unplace(dropped, PLAN, COPY)
    assert [type(a).__name__ for a in steps] == ["DeleteRequest", "Event", "RemoveFinalizer"]


def test_a_duplicated_object_abandons_every_copy_it_could_not_delete() -> None:
    annotations = {COPIES_ANNOTATION: _copies(a="Running", b="Running"), **_failures(DELETE_RETRIES)}
    w = _workload(_deleting(annotations), selection=DUPLICATE)
    seen = {"team/a": COPY, "team/b": UNREAD}
    steps = dup.decide(w, {}, seen, _pin, _phase)
    assert [type(a).__name__ for a in steps] == ["Event", "RemoveFinalizer"]
    event = steps[0]
    assert isinstance(event, act.Event) and event.reason == "CleanupAbandoned"
    assert "in colony team/a cluster onprem" in event.message
    assert "in colony team/b cluster onprem" in event.message


class Management:
    def __init__(self) -> None:
        self.annotations: list[dict[str, Any]] = []
        self.events: list[str] = []

    async def patch(self, api_version: str, kind: str, name: str, namespace: str | None, body: Any) -> Any:
        self.annotations.append(body["metadata"]["annotations"])
        return {}

    async def create(self, manifest: dict[str, Any], **_: Any) -> Any:
        self.events.append(f"{manifest.get('reason')}: {manifest.get('message') or manifest.get('note')}")
        return manifest


class Refusing:
    """A colony cluster that fails every delete with an error no one listed."""

    def __init__(self) -> None:
        self.deletes = 0

    async def delete(self, *_: Any) -> bool:
        self.deletes += 1
        raise RuntimeError("unexpected answer")


def test_the_controller_counts_a_failed_copy_deletion_of_any_error_class_and_spaces_the_tries() -> None:
    management, colony = Management(), Refusing()
    ctx = cast(Any, SimpleNamespace(kube=management))
    world = cast(
        Any, SimpleNamespace(access={"team/big": ColonyAccess("team/big", {"onprem": cast(Any, colony)})})
    )
    definition = cast(Any, SimpleNamespace(api_version="kubeflow.org/v1", kind="PyTorchJob"))

    def run(annotations: dict[str, str]) -> None:
        w = _workload(_deleting({**PLACED, **annotations}))
        todo = act.decide(w, PLAN, COPY, _pin, _phase)
        asyncio.run(placement._execute(ctx, cast(Any, None), world, definition, w, todo))

    run({})
    assert colony.deletes == 1
    (first,) = management.annotations
    recorded = act.cleanup_failures(first)
    assert (recorded.tries, recorded.error) == (1, "unexpected answer")
    assert any("CleanupFailed" in e and "try 1/3" in e for e in management.events), management.events

    run(first)  # again at once: too soon, nothing is tried
    assert colony.deletes == 1 and len(management.annotations) == 1

    run(_failures(1, at=datetime.now(UTC) - timedelta(seconds=DELETE_RETRY_DELAY_S)))
    assert colony.deletes == 2 and act.cleanup_failures(management.annotations[-1]).tries == 2
