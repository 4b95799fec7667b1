"""Pure: when a colony made for jobs (ephemeral) is to be torn down, and when a finished job expires."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from colony.labels import EPHEMERAL_LABEL, TEARDOWN_GRACE_ANNOTATION

GRACE_ANNOTATION = TEARDOWN_GRACE_ANNOTATION


def is_ephemeral(colony_meta: Mapping[str, Any]) -> bool:
    """A colony labelled `colony.exalsius.ai/ephemeral: "true"` exists only for its jobs."""
    return (colony_meta.get("labels") or {}).get(EPHEMERAL_LABEL) == "true"


def grace_seconds(colony_meta: Mapping[str, Any]) -> float:
    """The optional grace period after the last job before teardown (annotation; default 0)."""
    raw = (colony_meta.get("annotations") or {}).get(GRACE_ANNOTATION, "0")
    try:
        return max(0.0, float(raw))
    except ValueError:
        return 0.0


def teardown_due(
    colony_meta: Mapping[str, Any], active_jobs: int, finished_at: datetime, now: datetime
) -> bool:
    """True when an ephemeral colony has no unfinished job left and its grace period has passed."""
    if not is_ephemeral(colony_meta) or active_jobs > 0 or colony_meta.get("deletionTimestamp"):
        return False
    return (now - finished_at).total_seconds() >= grace_seconds(colony_meta)


def expired(finished_at: datetime, ttl_seconds: int | None, now: datetime) -> bool:
    """Whether a finished job's ttlSecondsAfterFinished has passed."""
    return ttl_seconds is not None and (now - finished_at).total_seconds() >= ttl_seconds
