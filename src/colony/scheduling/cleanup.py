"""Cleanup of a target cluster behind a finalizer always ends (issue 17, point 6): one bound on
tries and one way to report what was given up, shared by every cleanup of the operator: a DDPJob's
objects in its cluster, the copies of placed framework objects in colony clusters, and the Helm
add-ons of a Colony's existing clusters.

Any error class counts as a failed try: a 401/403 or a 5xx from a colony is as final for us as an
unreachable one. After DELETE_RETRIES failed tries, DELETE_RETRY_DELAY_S apart, the operator records
CLEANUP_ABANDONED (a warning Event naming what was left behind) and releases its finalizer, rather
than keep the object stuck in deletion forever. Pure: no I/O here.
"""

from __future__ import annotations

from collections.abc import Sequence

DELETE_RETRIES = 3
"""Failed tries of one cleanup before it is abandoned."""
DELETE_RETRY_DELAY_S = 2.0
"""The least time between two tries of one cleanup."""
CLEANUP_FAILED = "CleanupFailed"
"""Event reason of a failed try that will be tried again."""
CLEANUP_ABANDONED = "CleanupAbandoned"
"""Event reason (and condition reason) of a cleanup given up after DELETE_RETRIES tries."""


def gives_up(failed_tries: int, limit: int = DELETE_RETRIES) -> bool:
    """Whether a cleanup that has failed `failed_tries` times (this one included) is abandoned."""
    return failed_tries >= limit


def left_behind(left: Sequence[str] | None) -> str:
    """What a given-up cleanup leaves: the objects named, "nothing", or (None: never listed) that
    they were not listed."""
    if left is None:
        return "objects not listed"
    return ", ".join(left) if left else "nothing"


def failed_try_message(where: str, failed_tries: int, failure: object, limit: int = DELETE_RETRIES) -> str:
    """The message of a failed try that will be tried again."""
    return f"cannot clean up on {where} (try {failed_tries}/{limit}): {failure}"


def abandoned_message(
    where: str, failure: object, left: Sequence[str] | None, limit: int = DELETE_RETRIES
) -> str:
    """The message of a cleanup given up: where, after how many tries, the last failure, and what
    was left behind."""
    return f"gave up cleaning up on {where} after {limit} tries ({failure}); left behind: {left_behind(left)}"
