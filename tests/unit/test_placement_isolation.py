"""The placement loop's fault isolation, with fakes: colonies read concurrently under one deadline
(a hung colony is unreachable for the pass, the others are read), and one object's failure, of
any kind, recorded on that object and backed off while the others are placed."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

import pytest

from colony.controllers import placement
from colony.controllers.context import OperatorContext, OperatorSettings
from colony.controllers.placement_clusters import ColonyAccess
from colony.placement import decide as actions
from colony.placement.candidates import Candidates
from colony.placement.names import MESSAGE_ANNOTATION
from colony.placement.requests import Workload
from colony.placement.selection import DEFAULT_SPEC, Selection
from colony.scheduling.backoff import Backoff
from colony.scheduling.visibility import visibility
from colony.workloads.definition import DefinitionRegistry, EvaluationError, WorkloadDefinition


class _Kube:
    """The management cluster: colonies listed, patches and Events recorded."""

    def __init__(self, colonies: list[dict[str, Any]] | None = None) -> None:
        self.colonies = colonies or []
        self.patches: list[tuple[str, Any]] = []
        self.events: list[tuple[str, str, str]] = []

    async def list(self, api_version: str, kind: str, **kw: Any) -> list[dict[str, Any]]:
        return self.colonies if kind == "Colony" else []

    async def patch(self, api_version: str, kind: str, name: str, namespace: str | None, body: Any) -> Any:
        self.patches.append((name, body))
        return body

    async def create(self, manifest: dict[str, Any], **kw: Any) -> dict[str, Any]:
        if manifest["kind"] == "Event":
            self.events.append((manifest["involvedObject"]["name"], manifest["reason"], manifest["message"]))
        return manifest


def _context(kube: _Kube) -> OperatorContext:
    unused: Any = None
    return OperatorContext(("team",), OperatorSettings(), cast(Any, kube), unused, (), unused, unused)


def _colony(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "Colony",
        "metadata": {"name": name, "namespace": "team"},
        "status": {"phase": "Ready", "clusters": [{"name": "main", "phase": "Ready"}]},
    }


def _pytorch() -> WorkloadDefinition:
    found = DefinitionRegistry().for_kind("kubeflow.org", "PyTorchJob")
    assert found is not None
    return found


def _job(name: str, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": name,
            "namespace": "team",
            "uid": f"uid-{name}",
            "generation": 1,
            "resourceVersion": "5",
            "annotations": dict(annotations),
        },
        "spec": {},
    }


def _workload(obj: dict[str, Any]) -> Workload:
    return Workload(obj, Selection(None, DEFAULT_SPEC), Candidates((), False, ()), None)


async def test_colonies_are_read_concurrently_under_one_deadline_and_a_hung_one_is_unreachable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hung = {"team/a-hung", "team/c-hung"}

    async def open_colony(ctx: Any, colony: Any, only_ready: bool = True) -> ColonyAccess:
        key = f"{colony['metadata']['namespace']}/{colony['metadata']['name']}"
        if key in hung:
            await asyncio.Event().wait()
        return ColonyAccess(key, clients={"main": cast(Any, object())})

    async def serving(discovery: Any, access: ColonyAccess, api_version: str, plural: str) -> str | None:
        return None

    async def list_copies(kube: Any, api_version: str, kind: str) -> dict[str, Any]:
        return {"uid-x": {"metadata": {"name": "x"}}}

    monkeypatch.setattr(placement, "open_colony", open_colony)
    monkeypatch.setattr(placement, "serving", serving)
    monkeypatch.setattr(placement, "list_copies", list_copies)
    monkeypatch.setattr(placement, "COLONY_READ_DEADLINE_S", 0.3)
    names = ["a-hung", "b-ok", "c-hung", "d-ok"]
    kube = _Kube([_colony(n) for n in names])
    world = placement.Pass([], [], [])
    world.visibility = visibility([])
    pytorch = _pytorch()
    copy_kinds = {(f"team/{n}", "main", pytorch.api_version, pytorch.kind) for n in names}
    started = time.monotonic()
    await placement._read_colonies(
        _context(kube), cast(Any, None), world, {"team"}, set(), [pytorch], copy_kinds
    )
    elapsed = time.monotonic() - started
    assert 0.25 < elapsed < 0.8, elapsed  # one deadline for both hung colonies
    resource = f"{pytorch.plural}.{pytorch.group}"
    for name in names:
        key = f"team/{name}"
        copies = world.copies[(key, "main", f"{pytorch.api_version}/{pytorch.kind}")]
        if key in hung:
            assert "unreachable this pass: TimeoutError" in str(world.views[key].serving[resource])
            assert "unreachable" in world.access[key].errors["main"] and copies is None
        else:
            assert world.views[key].serving[resource] is None and world.access[key].clients
            assert copies == {"uid-x": {"metadata": {"name": "x"}}}


def test_any_error_while_deciding_is_recorded_on_the_object_and_backs_it_off() -> None:
    world = placement.Pass([], [], [], backoff=Backoff(1.0, 30.0))
    w = _workload(_job("bad"))

    def broken() -> list[actions.Action]:
        raise TypeError("'int' object is not subscriptable")

    todo = placement._guarded(world, w, broken)
    assert [type(a).__name__ for a in todo] == ["Annotate", "Event"]
    message = cast(actions.Annotate, todo[0]).annotations[MESSAGE_ANNOTATION]
    assert message == "placement failed: deciding: TypeError: 'int' object is not subscriptable"
    assert placement._backing_off(world, w.obj)
    # an expression failing on the object stays what it was: recorded, not backed off
    other = _workload(_job("expr"))

    def unevaluable() -> list[actions.Action]:
        raise EvaluationError("the copy's phase was not read")

    assert len(placement._guarded(world, other, unevaluable)) == 2
    assert not placement._backing_off(world, other.obj)
    # a new generation ends the backoff
    w.obj["metadata"]["generation"] = 2
    assert not placement._backing_off(world, w.obj)


async def test_an_unexpected_error_applying_one_objects_actions_leaves_the_others_placed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    applied: list[str] = []

    async def apply_one(
        ctx: Any, discovery: Any, world: Any, definition: Any, w: Workload, action: Any
    ) -> None:
        if w.name == "bad":
            raise ValueError("decimal overflow in a quantity")
        applied.append(w.name)

    monkeypatch.setattr(placement, "_apply_one", apply_one)
    kube = _Kube()
    ctx = _context(kube)
    world = placement.Pass([], [], [], backoff=Backoff(1.0, 30.0))
    pytorch = _pytorch()
    work = [
        placement._execute(ctx, cast(Any, None), world, pytorch, _workload(_job(n)), [actions.AddFinalizer()])
        for n in ("a", "bad", "c")
    ]
    await placement._concurrently(work)
    assert sorted(applied) == ["a", "c"]
    ((name, reason, message),) = kube.events
    assert (name, reason) == ("bad", "PlacementFailed")
    assert message == "placement failed: AddFinalizer: decimal overflow in a quantity"
    assert kube.patches == [("bad", {"metadata": {"annotations": {MESSAGE_ANNOTATION: message}}})]
    assert placement._backing_off(world, _job("bad")) and not placement._backing_off(world, _job("a"))
