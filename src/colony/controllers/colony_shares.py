"""Read the admin's ColonyShares (and namespace labels when a share selects by label) for one pass of
the GPR scheduler or of placement; the rule itself is colony.scheduling.visibility."""

from __future__ import annotations

import logging
from dataclasses import replace

from colony.api import COLONY_SHARE
from colony.kube.resources import Kube
from colony.scheduling.visibility import Visibility, visibility

log = logging.getLogger(__name__)

_reported: set[tuple[str, str]] = set()
"""Ignored ColonyShares already logged (a pass runs every second)."""


async def read_visibility(kube: Kube) -> Visibility:
    """Which colonies each namespace may use, from every ColonyShare (none when the kind is not
    served: then each namespace uses its own colonies only)."""
    found = visibility(await kube.list(COLONY_SHARE.api_version, COLONY_SHARE.kind))
    for name, why in found.ignored.items():
        if (name, why) not in _reported:
            _reported.add((name, why))
            log.warning("ColonyShare %s ignored (it shares nothing): %s", name, why)
    if not found.needs_namespace_labels:
        return found
    labels = {
        str(n["metadata"]["name"]): dict(n["metadata"].get("labels") or {})
        for n in await kube.list("v1", "Namespace")
    }
    return replace(found, namespace_labels=labels)
