"""The colonies an object may be placed on, in order, and why every other colony may not."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from colony.placement.selection import Selection, matches
from colony.scheduling.visibility import Visibility, visible


@dataclass(frozen=True)
class ColonyView:
    """What placement knows of one colony: its key, labels, whether it is Ready, the cluster a copy
    would go to (its first Ready cluster), and per framework resource (`plural.group`) whether it
    serves it (None) or why not."""

    key: str
    labels: Mapping[str, str]
    ready: bool
    cluster: str | None
    serving: Mapping[str, str | None]


@dataclass(frozen=True)
class Candidates:
    """`allowed`: colony keys the object may go to (the policy's fill-and-spill order when
    `ordered`, else by name); `excluded`: one reason per colony it may not go to."""

    allowed: tuple[str, ...]
    ordered: bool
    excluded: tuple[str, ...]
    clusters: Mapping[str, str] = field(default_factory=dict)
    """The cluster a copy goes to, per allowed colony, when it needs no GPU request."""

    def summary(self) -> str:
        """The exclusions, for messages ("" when none)."""
        return "; ".join(self.excluded)


def colony_view(colony: Mapping[str, Any], serving: Mapping[str, str | None]) -> ColonyView:
    """A ColonyView of a Colony object (`serving` as found by the controller)."""
    meta, status = colony["metadata"], colony.get("status") or {}
    ready = status.get("phase") == "Ready" and not meta.get("deletionTimestamp")
    cluster = next((c["name"] for c in status.get("clusters") or [] if c.get("phase") == "Ready"), None)
    return ColonyView(
        f"{meta['namespace']}/{meta['name']}", meta.get("labels") or {}, ready, cluster, serving
    )


def _key(name: str, namespace: str) -> str:
    return name if "/" in name else f"{namespace}/{name}"


def lacks_message(colony: str, resource: str, addon: str | None, why: str) -> str:
    """Why a colony is not a candidate for a framework resource."""
    if why != "lacks":
        return f"colony {colony}: {why}"
    remedy = f"enable add-on {addon}" if addon else f"install the {resource} CRD"
    return f"colony {colony} lacks {resource}: {remedy}"


def candidates(
    namespace: str,
    selection: Selection,
    resource: str,
    addon: str | None,
    colonies: Mapping[str, ColonyView],
    visibility: Visibility,
) -> Candidates:
    """The colonies an object of `namespace` may go to: visible (its namespace's, or shared with it
    by a ColonyShare: colony.scheduling.visibility), Ready, selected by the policy (colonySelector,
    orderedColonies) and serving `resource` (`plural.group`)."""
    spec = selection.spec
    ordered = [_key(n, namespace) for n in spec.ordered_colonies]
    names = list(dict.fromkeys(ordered)) if ordered else sorted(colonies)
    allowed: list[str] = []
    excluded: list[str] = []
    for key in names:
        colony = colonies.get(key)
        if colony is None:
            excluded.append(f"colony {key} does not exist")
            continue
        if not visible(key, namespace, visibility):
            if ordered:
                excluded.append(
                    f"colony {key} is neither in namespace {namespace} nor shared with it by a ColonyShare"
                )
            continue
        if not matches(spec.colony_selector, colony.labels):
            continue
        if not colony.ready or colony.cluster is None:
            excluded.append(f"colony {key} is not Ready")
            continue
        why = colony.serving.get(resource, "lacks")
        if why is not None:
            excluded.append(lacks_message(key, resource, addon, why))
            continue
        allowed.append(key)
    clusters = {k: c for k in allowed if (c := colonies[k].cluster) is not None}
    return Candidates(tuple(allowed), bool(ordered), tuple(excluded), clusters)
