"""Which objects are placed, by which policy, and which of them go together."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from colony.api.base import LabelSelector
from colony.api.placementpolicy import PlacementPolicySpec
from colony.placement.names import ENABLED_LABEL

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class Policy:
    """A PlacementPolicy as read (its spec validated)."""

    name: str
    spec: PlacementPolicySpec


@dataclass(frozen=True)
class Selection:
    """Why and how an object is placed: by `policy` (None: by the opt-in label, with defaults)."""

    policy: str | None
    spec: PlacementPolicySpec

    @property
    def source(self) -> str:
        """For messages: `PlacementPolicy <name>` or the label."""
        return f"PlacementPolicy {self.policy}" if self.policy else f"label {ENABLED_LABEL}=true"


DEFAULT_SPEC = PlacementPolicySpec()


def matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """Whether `labels` carry every label of the selector (an absent selector matches all)."""
    return selector is None or all(labels.get(k) == v for k, v in selector.match_labels.items())


def parse_policies(objects: Sequence[Mapping[str, Any]]) -> tuple[list[Policy], dict[str, str]]:
    """The valid policies, by name, and why each invalid one was skipped."""
    policies, invalid = [], {}
    for obj in objects:
        name = str(obj["metadata"]["name"])
        try:
            policies.append(Policy(name, PlacementPolicySpec.model_validate(obj.get("spec") or {})))
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            invalid[name] = f"{where}: {first['msg']}" if where else first["msg"]
        except ValueError as error:
            invalid[name] = str(error).splitlines()[0]
    return sorted(policies, key=lambda p: p.name), invalid


def select(
    obj: Mapping[str, Any],
    group: str,
    kind: str,
    namespace_labels: Mapping[str, str] | None,
    policies: Sequence[Policy],
) -> Selection | None:
    """The selection of an object: the first policy by name that selects it (its kind, namespace
    and labels), else the opt-in label; None when it is not placed (the label "false" opts out of
    every policy)."""
    meta = obj["metadata"]
    labels = meta.get("labels") or {}
    if labels.get(ENABLED_LABEL) == "false":
        return None
    namespace = str(meta.get("namespace") or "")
    ns_labels = {NAMESPACE_NAME_LABEL: namespace, **(namespace_labels or {})}
    for policy in policies:
        spec = policy.spec
        if spec.kinds and not any(k.group == group and k.kind == kind for k in spec.kinds):
            continue
        if matches(spec.namespace_selector, ns_labels) and matches(spec.resource_selector, labels):
            return Selection(policy.name, spec)
    if labels.get(ENABLED_LABEL) == "true":
        return Selection(None, DEFAULT_SPEC)
    return None


def group_of(obj: Mapping[str, Any], selection: Selection) -> tuple[str, str, str] | None:
    """(policy, label key, value) of the group the object is placed with, or None (alone)."""
    if selection.policy is None or selection.spec.group_by is None:
        return None
    key = selection.spec.group_by.label_key
    value = (obj["metadata"].get("labels") or {}).get(key)
    return (selection.policy, key, str(value)) if value else None


def needs_namespace_labels(policies: Sequence[Policy]) -> bool:
    """Whether some policy selects namespaces by labels other than their name."""
    return any(
        p.spec.namespace_selector is not None
        and set(p.spec.namespace_selector.match_labels) - {NAMESPACE_NAME_LABEL}
        for p in policies
    )
