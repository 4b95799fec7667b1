"""Operator settings read from environment variables, validated with errors that name the variable.

Controllers read their settings through these functions at import, so a bad value stops
`colony operator` at startup with one clear line instead of failing later inside a handler.
"""

from __future__ import annotations

import os
import re
from typing import get_args

from colony.api.colony import CAPA_NODES_INSTANCE_PROFILE
from colony.scheduling.queueing.model import DEFAULT_AGING_S, PlacementStrategy, QueueOrder

PLACEMENT_POLICIES: tuple[str, ...] = get_args(PlacementStrategy)
QUEUE_POLICIES: tuple[str, ...] = ("default", "shortest", "sjf")
_TRUE = ("true", "1", "yes")
_FALSE = ("false", "0", "no", "")


class SettingsError(ValueError):
    """An environment variable holds a value the operator cannot use."""


def positive_seconds(name: str, default: float) -> float:
    """The number of seconds in `name` (default when unset); it must be a number above zero."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a number of seconds (e.g. {name}={default:g})") from None
    if not value > 0:
        raise SettingsError(f"{name}={raw!r} must be above zero")
    return value


def flag(name: str, default: bool = False) -> bool:
    """`true`/`false` (also 1/0, yes/no) in `name`; default when unset."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise SettingsError(f"{name}={raw!r} must be true or false")


def allow_unsafe_kubeconfigs() -> bool:
    """COLONY_ALLOW_UNSAFE_KUBECONFIGS (default false): also accept `proxy-url` and
    `insecure-skip-tls-verify` in colony kubeconfig Secrets. For an operator whose kubeconfig Secrets
    only its admins write; exec/auth-provider plugins, file paths and http:// servers stay refused
    (see colony.kube.safe_kubeconfig)."""
    return flag("COLONY_ALLOW_UNSAFE_KUBECONFIGS")


_INSTANCE_PROFILE = re.compile(r"^[\w+=,.@-]{1,128}$", re.ASCII)


def aws_instance_profiles() -> frozenset[str]:
    """COLONY_AWS_INSTANCE_PROFILES: the IAM instance profiles a colony's aws clusters may attach to
    their workers, comma-separated (the Helm chart sets it from `aws.allowedInstanceProfiles`);
    default: only CAPA's nodes profile. Workers launch with the admin's CAPA identity and a tenant
    controls its nodes, so an allowed profile's permissions are the tenant's."""
    raw = os.environ.get("COLONY_AWS_INSTANCE_PROFILES")
    if raw is None:
        return frozenset({CAPA_NODES_INSTANCE_PROFILE})
    profiles = frozenset(p.strip() for p in raw.split(",") if p.strip())
    bad = sorted(p for p in profiles if not _INSTANCE_PROFILE.match(p))
    if bad:
        raise SettingsError(
            f"COLONY_AWS_INSTANCE_PROFILES={raw!r}: {', '.join(bad)} is not an IAM instance profile name"
        )
    return profiles


def placement_policy() -> PlacementStrategy:
    """COLONY_PLACEMENT_POLICY: how GPRs are placed on nodes (default `cheapest`)."""
    raw = os.environ.get("COLONY_PLACEMENT_POLICY", "cheapest")
    if raw not in PLACEMENT_POLICIES:
        raise SettingsError(f"COLONY_PLACEMENT_POLICY={raw!r} is not one of {', '.join(PLACEMENT_POLICIES)}")
    return raw  # type: ignore[return-value]  # checked against the Literal's values above


def queue_policy() -> QueueOrder:
    """COLONY_QUEUE_POLICY: the scheduler's queue order, `default` (FIFO within a queue) or
    `shortest` (highest response ratio first, with aging) or `sjf` (strict shortest declared GPU
    time first, with aging: no backfill within a priority); a GPUQueue's queueingStrategy
    overrides it for its own requests (under `sjf`, one order across queues: it is not consulted)."""
    raw = os.environ.get("COLONY_QUEUE_POLICY", "default")
    if raw not in QUEUE_POLICIES:
        raise SettingsError(f"COLONY_QUEUE_POLICY={raw!r} is not one of {', '.join(QUEUE_POLICIES)}")
    return raw  # type: ignore[return-value]  # checked against the allowed values above


def queue_aging_seconds() -> float:
    """COLONY_QUEUE_AGING_SECONDS: per period waited, a request's effective priority rises one level
    (to the next priority in use), and after this long waiting it goes before the younger ones of its
    effective priority, oldest first, in every queue (default 21600, 6 h)."""
    return positive_seconds("COLONY_QUEUE_AGING_SECONDS", DEFAULT_AGING_S)


_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$")


def placement_kinds() -> frozenset[str] | None:
    """COLONY_PLACEMENT_KINDS: the framework resources placement handles, comma-separated
    `plural.group` (e.g. pytorchjobs.kubeflow.org; the Helm chart sets it from `placement.kinds`, the
    kinds its RBAC grants); unset: every kind with a WorkloadDefinition."""
    raw = os.environ.get("COLONY_PLACEMENT_KINDS")
    if raw is None:
        return None
    kinds = frozenset(k.strip() for k in raw.split(",") if k.strip())
    bad = sorted(k for k in kinds if not _RESOURCE.match(k))
    if bad:
        raise SettingsError(
            f"COLONY_PLACEMENT_KINDS={raw!r}: {', '.join(bad)} is not plural.group "
            "(e.g. pytorchjobs.kubeflow.org)"
        )
    return kinds
