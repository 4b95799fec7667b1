"""Which colonies a namespace may use: its own, and those an admin shared with it (ColonyShare).

The one rule both the GPR scheduler and placement apply (pure: the controllers read the ColonyShare
objects, and namespace labels when a share selects by label, and pass them in). A tenant controls
its Colony's labels, so no label counts: only a cluster-scoped ColonyShare, which tenants cannot
create, shares a colony with another namespace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from colony.api.colonyshare import ColonyShareSpec


@dataclass(frozen=True)
class Grant:
    """One ColonyShare: the namespaces listed, and the labels a namespace must carry to be selected
    (None: no selector; an empty mapping selects every namespace)."""

    name: str
    namespaces: frozenset[str]
    selector: Mapping[str, str] | None = None

    def admits(self, namespace: str, labels: Mapping[str, str] | None) -> bool:
        """Whether the grant names `namespace` (listed, or its `labels` match the selector)."""
        if namespace in self.namespaces:
            return True
        if self.selector is None:
            return False
        return all((labels or {}).get(k) == v for k, v in self.selector.items())


@dataclass(frozen=True)
class Visibility:
    """The grants by colony key `namespace/name`, and the labels of the namespaces (needed only when
    some grant has a selector; a namespace missing here is matched by no selector)."""

    grants: Mapping[str, tuple[Grant, ...]] = field(default_factory=dict)
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    ignored: Mapping[str, str] = field(default_factory=dict)
    """ColonyShares that grant nothing because they do not validate, with why (for the log)."""

    @property
    def needs_namespace_labels(self) -> bool:
        """Whether any grant selects namespaces by label (an empty selector needs none)."""
        return any(g.selector for grants in self.grants.values() for g in grants)


NOBODY_ELSE = Visibility()
"""No colony is shared: each namespace sees its own colonies only."""


def visible(colony: str, namespace: str, visibility: Visibility) -> bool:
    """Whether objects of `namespace` may use the colony with key `colony` (`namespace/name`): it is
    in their namespace, or a ColonyShare for exactly this colony names their namespace."""
    if colony.split("/", 1)[0] == namespace:
        return True
    labels = visibility.namespace_labels.get(namespace)
    return any(g.admits(namespace, labels) for g in visibility.grants.get(colony, ()))


def grants(objects: Iterable[Mapping[str, Any]]) -> tuple[dict[str, tuple[Grant, ...]], dict[str, str]]:
    """The grants of ColonyShare objects by colony key, and why each ignored one is: one that does
    not validate grants nothing (the API server's schema rejects it at admission; this guards an
    object written before), nor does one being deleted."""
    found: dict[str, list[Grant]] = {}
    ignored: dict[str, str] = {}
    for obj in objects:
        name = str((obj.get("metadata") or {}).get("name", ""))
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            continue
        try:
            spec = ColonyShareSpec.model_validate(obj.get("spec") or {})
        except (ValidationError, ValueError) as error:
            ignored[name] = str(error).splitlines()[0]
            continue
        selector = dict(spec.namespace_selector.match_labels) if spec.namespace_selector is not None else None
        key = f"{spec.colony.namespace}/{spec.colony.name}"
        found.setdefault(key, []).append(Grant(name, frozenset(spec.namespaces), selector))
    return {key: tuple(value) for key, value in found.items()}, ignored


def visibility(
    shares: Iterable[Mapping[str, Any]], namespace_labels: Mapping[str, Mapping[str, str]] | None = None
) -> Visibility:
    """The Visibility of ColonyShare objects and (when a share selects by label) namespace labels."""
    by_colony, ignored = grants(shares)
    return Visibility(by_colony, dict(namespace_labels or {}), ignored)


def split_colony_key(key: str, default_namespace: str) -> tuple[str, str]:
    """(namespace, name) of a colony key `namespace/name` (a bare name is in `default_namespace`)."""
    namespace, slash, name = key.partition("/")
    return (namespace, name) if slash else (default_namespace, key)


def job_colony(job_namespace: str, status: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) of the colony a DDPJob's status records (name "": the management cluster).

    A job reaches another namespace's colony only through its GPU request admitted onto a colony
    shared with the job's namespace: `colonyNamespace` names a namespace other than the job's only
    together with `gpuRequest` (the operator writes both; tenants cannot write status). Any other
    foreign namespace is refused with ValueError, never replaced by the job's own namespace, where a
    colony of the same name would be a different one."""
    name = str(status.get("colony") or "")
    namespace = str(status.get("colonyNamespace") or job_namespace)
    if not name:
        return job_namespace, ""
    if namespace != job_namespace and not status.get("gpuRequest"):
        raise ValueError(
            f"colony {namespace}/{name} is in another namespace and no GPU request of the job placed it there"
        )
    return namespace, name
