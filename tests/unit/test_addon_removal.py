"""Deleting a colony always ends (issue 17, point 6): a Helm add-on of an existing cluster whose
uninstall keeps failing is tried DELETE_RETRIES times, DELETE_RETRY_DELAY_S apart, then given up
(reported once, for the CleanupAbandoned Event) and no longer waited for."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from colony.controllers import existing_addons
from colony.controllers.existing_addons import ExistingClusterAddons
from colony.kube.helm import Release
from colony.render.contract import ColonyRef
from colony.scheduling.cleanup import DELETE_RETRIES

COLONY = ColonyRef(name="onprem", namespace="team", uid="uid-1")
CLUSTER = cast(Any, SimpleNamespace(cluster_name="onprem", capi_cluster_name=None))
NAME = "HelmRelease/onprem/addons/demo"


class Helm:
    """A cluster whose one release cannot be uninstalled (any error class)."""

    def __init__(self, fails: bool = True) -> None:
        self.uninstalls = 0
        self.fails = fails

    async def releases(self, uid: str, spec_hash: str | None = None) -> list[Release]:
        release = SimpleNamespace(namespace="addons", name="demo", status="deployed", chart="demo-0.1.0")
        return [cast(Release, release)]

    async def uninstall(self, name: str, namespace: str) -> None:
        self.uninstalls += 1
        if not self.fails:  # "succeeds", and the release stays
            return
        raise RuntimeError(f"uninstall: pre-delete hook failed ({self.uninstalls})")


def _addons(helm: Helm) -> ExistingClusterAddons:
    addons = ExistingClusterAddons(cast(Any, None), Path("/nonexistent/helm"))

    async def client(namespace: str, cluster: Any) -> tuple[Any, str]:
        return helm, ""

    addons._client = client  # type: ignore[method-assign]
    return addons


async def _step(addons: ExistingClusterAddons) -> existing_addons.Removal:
    """One step of deletion, then the background uninstall it started runs to its end."""
    removal = await addons.remove(COLONY, [CLUSTER])
    await asyncio.gather(*addons._tasks.values(), return_exceptions=True)
    return removal


def test_a_failing_uninstall_is_tried_a_bounded_number_of_times_then_abandoned_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(existing_addons, "DELETE_RETRY_DELAY_S", 0.0)
    helm = Helm()
    addons = _addons(helm)

    async def scenario() -> None:
        for tries in range(DELETE_RETRIES):
            removal = await _step(addons)
            assert (removal.remaining, removal.abandoned) == ([NAME], {})  # waited for
            assert helm.uninstalls == tries + 1
        given_up = await _step(addons)
        assert given_up.remaining == []  # deletion goes on
        assert given_up.abandoned == {NAME: f"uninstall: pre-delete hook failed ({DELETE_RETRIES})"}
        later = await _step(addons)
        assert (later.remaining, later.abandoned) == ([], {})  # reported once
        assert helm.uninstalls == DELETE_RETRIES
        addons.forget(COLONY.uid)
        assert not addons._uninstall_tries and not addons._failures and not addons._abandoned

    asyncio.run(scenario())


def test_a_failed_uninstall_is_tried_again_only_after_the_retry_delay() -> None:
    helm = Helm()
    addons = _addons(helm)

    async def scenario() -> None:
        await _step(addons)
        again = await _step(addons)  # at once: waited for, not run again yet
        assert again.remaining == [NAME] and helm.uninstalls == 1

    asyncio.run(scenario())


def test_an_uninstall_that_succeeds_and_leaves_the_release_is_bounded_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(existing_addons, "DELETE_RETRY_DELAY_S", 0.0)
    helm = Helm(fails=False)
    addons = _addons(helm)

    async def scenario() -> None:
        for _ in range(DELETE_RETRIES):
            assert (await _step(addons)).remaining == [NAME]
        given_up = await _step(addons)
        assert given_up.remaining == [] and given_up.abandoned == {NAME: "still installed after uninstall"}
        assert helm.uninstalls == DELETE_RETRIES

    asyncio.run(scenario())
