"""OperatorSettings reads every operator setting once, with errors naming the variable; the
context says which namespaces it serves and owns its background loops."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from colony.controllers.context import OperatorContext, OperatorSettings
from colony.settings import SettingsError


def test_settings_default_when_the_environment_sets_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "COLONY_SCHEDULE_INTERVAL_SECONDS",
        "COLONY_REQUIRE_QUEUE",
        "COLONY_PLACEMENT_POLICY",
        "COLONY_QUEUE_POLICY",
        "COLONY_PLACEMENT_KINDS",
        "COLONY_COST_REFRESH_SECONDS",
        "COLONY_ALLOW_UNSAFE_KUBECONFIGS",
        "COLONY_AWS_INSTANCE_PROFILES",
    ):
        monkeypatch.delenv(name, raising=False)
    assert OperatorSettings.from_env() == OperatorSettings()


def test_settings_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLONY_SCHEDULE_INTERVAL_SECONDS", "0.5")
    monkeypatch.setenv("COLONY_REQUIRE_QUEUE", "true")
    monkeypatch.setenv("COLONY_QUEUE_POLICY", "shortest")
    monkeypatch.setenv("COLONY_PLACEMENT_KINDS", "pytorchjobs.kubeflow.org")
    monkeypatch.setenv("COLONY_COST_REFRESH_SECONDS", "2")
    monkeypatch.setenv("COLONY_AWS_INSTANCE_PROFILES", "gpu-nodes")
    found = OperatorSettings.from_env()
    assert found.schedule_interval_s == 0.5
    assert found.require_queue is True
    assert found.queue_policy == "shortest"
    assert found.placement_kinds == frozenset({"pytorchjobs.kubeflow.org"})
    assert found.cost_refresh_s == 2.0
    assert found.aws_instance_profiles == frozenset({"gpu-nodes"})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("COLONY_SCHEDULE_INTERVAL_SECONDS", "-1"),
        ("COLONY_REQUIRE_QUEUE", "maybe"),
        ("COLONY_PLACEMENT_POLICY", "random"),
        ("COLONY_PLACEMENT_KINDS", "pytorchjobs"),
        ("COLONY_EXPRESSION_TIMEOUT_SECONDS", "soon"),
        ("COLONY_AWS_INSTANCE_PROFILES", "arn:aws:iam::123:instance-profile/x"),
    ],
)
def test_a_bad_setting_is_refused_with_its_name(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=name):
        OperatorSettings.from_env()


def _context(namespaces: tuple[str, ...]) -> OperatorContext:
    unused: Any = None  # watches() and the background loops touch no client
    return OperatorContext(namespaces, OperatorSettings(), unused, unused, (), unused, unused)


def test_the_context_serves_the_namespaces_its_patterns_match() -> None:
    assert _context(()).watches("anything")
    limited = _context(("t-*", "team-a"))
    assert limited.watches("t-1234") and limited.watches("team-a")
    assert not limited.watches("team-b") and not limited.watches("kube-system")


def test_stopping_a_background_loop_cancels_it_and_forgets_it() -> None:
    async def scenario() -> None:
        context = _context(())
        ran = asyncio.Event()

        async def loop() -> None:
            ran.set()
            await asyncio.sleep(3600)

        task = context.start("loop", loop())
        await ran.wait()
        await context.stop("loop")
        assert task.cancelled() and "loop" not in context.tasks

    asyncio.run(scenario())
