"""Label patches of one object made while one is in flight go out together, in call order."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from colony.kube.resources import Kube, KubeApiError


class _RecordingKube(Kube):
    """A Kube whose requests are recorded; `fail_on` names a label whose patch fails."""

    def __init__(self, fail_on: str | None = None) -> None:
        super().__init__(cast(Any, None))
        self.bodies: list[tuple[str, dict[str, Any]]] = []
        self.fail_on = fail_on

    async def _path(self, api_version: str, kind: str, name: str | None, namespace: str | None) -> str:
        return f"/api/v1/nodes/{name}"

    async def _call(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        labels = kw["body"]["metadata"]["labels"]
        self.bodies.append((path, dict(labels)))
        await asyncio.sleep(0.01)
        if self.fail_on in labels:
            raise KubeApiError(500, "InternalError", "etcd is sad")
        return {"metadata": {"name": path.rsplit("/", 1)[-1], "labels": labels}}


async def test_changes_made_during_a_patch_go_out_together_in_call_order() -> None:
    kube = _RecordingKube()
    first = asyncio.create_task(kube.patch_labels("v1", "Node", "n1", None, {"a": "1"}))
    await asyncio.sleep(0)  # the first patch is in flight
    rest = [kube.patch_labels("v1", "Node", "n1", None, {f"r{i}": "2"}) for i in range(40)]
    rest.append(kube.patch_labels("v1", "Node", "n1", None, {"r0": None}))  # taken off again
    other = kube.patch_labels("v1", "Node", "n2", None, {"b": "1"})
    results = await asyncio.gather(first, *rest, other)
    assert kube.bodies[0] == ("/api/v1/nodes/n1", {"a": "1"})
    n1 = [labels for path, labels in kube.bodies if path.endswith("n1")]
    assert len(n1) == 2 and n1[1] == {"r0": None, **{f"r{i}": "2" for i in range(1, 40)}}
    assert [labels for path, labels in kube.bodies if path.endswith("n2")] == [{"b": "1"}]
    assert [r["metadata"]["name"] for r in results] == ["n1"] * 42 + ["n2"]


async def test_the_error_of_a_patch_reaches_every_change_it_carried_and_only_those() -> None:
    kube = _RecordingKube(fail_on="bad")
    first = asyncio.create_task(kube.patch_labels("v1", "Node", "n1", None, {"a": "1"}))
    await asyncio.sleep(0)
    carried = [kube.patch_labels("v1", "Node", "n1", None, {"bad": "1"}) for _ in range(3)]
    outcomes = await asyncio.gather(first, *carried, return_exceptions=True)
    assert isinstance(outcomes[0], dict)
    assert all(isinstance(o, KubeApiError) for o in outcomes[1:])
    assert await kube.patch_labels("v1", "Node", "n1", None, {"c": "1"})  # the next one is sent
    with pytest.raises(KubeApiError):
        await kube.patch_labels("v1", "Node", "n1", None, {"bad": None})
