"""The one rule of which colonies a namespace may use (colony.scheduling.visibility)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from colony.api.colonyshare import ColonyShareSpec
from colony.scheduling.visibility import NOBODY_ELSE, job_colony, split_colony_key, visibility, visible


def _share(name: str, colony: str, namespaces: list[str] | None = None, **spec: Any) -> dict[str, Any]:
    namespace, colony_name = colony.split("/")
    body: dict[str, Any] = {"colony": {"namespace": namespace, "name": colony_name}, **spec}
    if namespaces is not None:
        body["namespaces"] = namespaces
    return {"metadata": {"name": name}, "spec": body}


def test_own_namespace_is_always_visible_and_nothing_else_without_a_share() -> None:
    assert visible("team/a", "team", NOBODY_ELSE)
    assert not visible("ops/a", "team", NOBODY_ELSE)
    assert visible("team/a", "team", visibility([_share("s", "ops/a", ["other"])]))


def test_other_namespace_only_with_a_share_naming_both_colony_and_namespace() -> None:
    rules = visibility([_share("s", "ops/gpus", ["team", "lab"])])
    assert visible("ops/gpus", "team", rules) and visible("ops/gpus", "lab", rules)
    assert not visible("ops/gpus", "stranger", rules)
    # a grant for another colony (same namespace, other name; same name, other namespace) does not apply
    assert not visible("ops/other", "team", rules)
    assert not visible("lab/gpus", "team", rules)


def test_a_self_labelled_colony_is_not_shared() -> None:
    """The tenant owns its Colony's labels: `colony.exalsius.ai/shared: "true"` grants nothing. The
    rule does not even look at the colony object, only at its key and the admin's ColonyShares."""
    rules = visibility([_share("s", "ops/gpus", ["team"])])
    assert not visible("evil/labelled", "team", rules)


def test_namespace_selector_matches_labels_and_an_empty_one_matches_every_namespace() -> None:
    labels = {"team": {"tier": "gold", "x": "1"}, "lab": {"tier": "silver"}}
    rules = visibility([_share("s", "ops/gpus", namespaceSelector={"matchLabels": {"tier": "gold"}})], labels)
    assert rules.needs_namespace_labels
    assert visible("ops/gpus", "team", rules)
    assert not visible("ops/gpus", "lab", rules)
    assert not visible("ops/gpus", "unknown", rules)  # labels not read: no selector matches it
    everyone = visibility([_share("s", "ops/gpus", namespaceSelector={})])
    assert not everyone.needs_namespace_labels
    assert visible("ops/gpus", "lab", everyone) and visible("ops/gpus", "team", everyone)
    assert not visible("ops/other", "team", everyone)
    assert not visibility([_share("s", "ops/gpus", ["team"])]).needs_namespace_labels


def test_invalid_or_deleted_shares_grant_nothing() -> None:
    bad_name = _share("bad", "ops/gpus", ["team"])
    bad_name["spec"]["colony"]["name"] = "../../secrets/x"
    deleted = _share("gone", "ops/gpus", ["team"])
    deleted["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    rules = visibility([bad_name, deleted, {"metadata": {"name": "empty"}, "spec": {}}])
    assert not visible("ops/gpus", "team", rules)
    assert set(rules.ignored) == {"bad", "empty"}


@pytest.mark.parametrize(
    "spec",
    [
        {"colony": {"namespace": "ops", "name": "gpus"}, "namespaces": ["Team"]},
        {"colony": {"namespace": "ops", "name": "gpus"}, "namespaces": ["a/b"]},
        {"colony": {"namespace": "ops/x", "name": "gpus"}, "namespaces": ["team"]},
        {"colony": {"namespace": "ops", "name": "-gpus"}, "namespaces": ["team"]},
        {"colony": {"namespace": "ops", "name": "gpus"}, "namespaces": ["x" * 64]},
    ],
)
def test_spec_rejects_names_that_are_not_dns_1123(spec: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ColonyShareSpec.model_validate(spec)


def test_a_colony_key_splits_into_namespace_and_name() -> None:
    assert split_colony_key("ops/gpus", "team") == ("ops", "gpus")
    assert split_colony_key("gpus", "team") == ("team", "gpus")


def test_a_job_keeps_the_namespace_of_the_shared_colony_its_request_was_admitted_onto() -> None:
    shared = {"colony": "pool", "colonyNamespace": "ops", "gpuRequest": "job-gpus", "cluster": "c"}
    assert job_colony("team", shared) == ("ops", "pool")
    own = {"colony": "pool", "colonyNamespace": "team", "cluster": "c"}
    assert job_colony("team", own) == ("team", "pool")
    # jobs placed before colonyNamespace was recorded: their own namespace
    assert job_colony("team", {"colony": "pool", "cluster": "c"}) == ("team", "pool")
    assert job_colony("team", {"cluster": "management"}) == ("team", "")


def test_another_namespace_is_never_reached_without_a_gpu_request_nor_swapped_for_the_own() -> None:
    """A targetColony job names colonies of its own namespace only; a status naming another one
    without the GPU request that placed it is refused (not read as the tenant's same-named colony)."""
    with pytest.raises(ValueError, match="another namespace"):
        job_colony("team", {"colony": "pool", "colonyNamespace": "ops", "cluster": "c"})
