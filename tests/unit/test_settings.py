"""Environment settings: defaults, accepted values, and errors that name the variable."""

from __future__ import annotations

import subprocess
import sys

import pytest

from colony import settings


def test_defaults_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("COLONY_PLACEMENT_POLICY", "COLONY_X_SECONDS", "COLONY_X_FLAG"):
        monkeypatch.delenv(name, raising=False)
    assert settings.placement_policy() == "cheapest"
    assert settings.positive_seconds("COLONY_X_SECONDS", 2.5) == 2.5
    assert settings.flag("COLONY_X_FLAG") is False
    monkeypatch.delenv("COLONY_PLACEMENT_KINDS", raising=False)
    assert settings.placement_kinds() is None
    monkeypatch.setenv("COLONY_PLACEMENT_KINDS", "pytorchjobs.kubeflow.org, jobsets.jobset.x-k8s.io,")
    assert settings.placement_kinds() == {"pytorchjobs.kubeflow.org", "jobsets.jobset.x-k8s.io"}


def test_queue_policy_and_aging(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLONY_QUEUE_POLICY", raising=False)
    monkeypatch.delenv("COLONY_QUEUE_AGING_SECONDS", raising=False)
    assert (settings.queue_policy(), settings.queue_aging_seconds()) == ("default", 21600.0)
    monkeypatch.setenv("COLONY_QUEUE_POLICY", "shortest")
    monkeypatch.setenv("COLONY_QUEUE_AGING_SECONDS", "3600")
    assert (settings.queue_policy(), settings.queue_aging_seconds()) == ("shortest", 3600.0)


@pytest.mark.parametrize("policy", ["cheapest", "binpack", "spread", "ordered"])
def test_every_policy_is_accepted(monkeypatch: pytest.MonkeyPatch, policy: str) -> None:
    monkeypatch.setenv("COLONY_PLACEMENT_POLICY", policy)
    assert settings.placement_policy() == policy


def test_aws_instance_profiles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLONY_AWS_INSTANCE_PROFILES", raising=False)
    assert settings.aws_instance_profiles() == {"nodes.cluster-api-provider-aws.sigs.k8s.io"}
    monkeypatch.setenv(
        "COLONY_AWS_INSTANCE_PROFILES", "nodes.cluster-api-provider-aws.sigs.k8s.io, gpu-nodes,"
    )
    assert settings.aws_instance_profiles() == {"nodes.cluster-api-provider-aws.sigs.k8s.io", "gpu-nodes"}
    monkeypatch.setenv("COLONY_AWS_INSTANCE_PROFILES", "")
    assert settings.aws_instance_profiles() == frozenset()  # no aws cluster may launch


def seconds() -> float:
    return settings.positive_seconds("COLONY_X_SECONDS", 1)


@pytest.mark.parametrize(
    ("name", "value", "read", "message"),
    [
        ("COLONY_PLACEMENT_POLICY", "cheapst", settings.placement_policy, "is not one of cheapest, binpack"),
        ("COLONY_X_SECONDS", "soon", seconds, "not a number"),
        ("COLONY_X_SECONDS", "-1", seconds, "above zero"),
        ("COLONY_X_FLAG", "maybe", lambda: settings.flag("COLONY_X_FLAG"), "true or false"),
        ("COLONY_PLACEMENT_KINDS", "PyTorchJob", settings.placement_kinds, "is not plural.group"),
        ("COLONY_QUEUE_POLICY", "fifo", settings.queue_policy, "is not one of default, shortest"),
        ("COLONY_QUEUE_AGING_SECONDS", "0", settings.queue_aging_seconds, "above zero"),
        (
            "COLONY_AWS_INSTANCE_PROFILES",
            "nodes,arn:aws:iam::1:x/y",
            settings.aws_instance_profiles,
            "is not an IAM instance profile name",
        ),
    ],
)
def test_bad_values_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, read: object, message: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(settings.SettingsError, match=message) as caught:
        read()  # type: ignore[operator]
    assert name in str(caught.value)


def test_operator_exits_2_with_one_line_on_a_bad_setting(tmp_path: object) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "colony", "operator"],
        env={"COLONY_PLACEMENT_POLICY": "fastest", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        "error: COLONY_PLACEMENT_POLICY='fastest' is not one of cheapest, binpack, spread, ordered"
    )


def test_unsafe_kubeconfigs_are_off_unless_explicitly_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLONY_ALLOW_UNSAFE_KUBECONFIGS", raising=False)
    assert settings.allow_unsafe_kubeconfigs() is False
    monkeypatch.setenv("COLONY_ALLOW_UNSAFE_KUBECONFIGS", "true")
    assert settings.allow_unsafe_kubeconfigs() is True
    monkeypatch.setenv("COLONY_ALLOW_UNSAFE_KUBECONFIGS", "sure")
    with pytest.raises(settings.SettingsError, match="COLONY_ALLOW_UNSAFE_KUBECONFIGS"):
        settings.allow_unsafe_kubeconfigs()
