"""Per-object backoff of a batch loop: an object whose handling failed is skipped for an interval
that doubles with each failure in a row (BASE_S, 2 BASE_S, ... at most CAP_S), while the rest of
the pass goes on. A new version of the object (its generation: the user changed it) or a pass in
which it was tried again without failing resets it.

Pure: the caller passes the clock (`now`, seconds) and the version it keys on.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

BASE_S = 1.0
"""The first backoff after a failure."""
CAP_S = 300.0
"""The longest backoff (as Kueue's requeue and kopf's retries are capped)."""


def delay(failures: int, base_s: float = BASE_S, cap_s: float = CAP_S) -> float:
    """The backoff after `failures` failures in a row (>= 1): base_s * 2^(failures-1), capped."""
    exponent = min(max(failures, 1) - 1, 64)
    return float(min(cap_s, base_s * 2.0**exponent))


@dataclass
class Failure:
    """An object's failures in a row at one version, and until when it is skipped."""

    version: Hashable
    failures: int
    until: float
    reason: str


class Backoff:
    """Objects backing off, by key (see the module docstring)."""

    def __init__(self, base_s: float = BASE_S, cap_s: float = CAP_S) -> None:
        self.base_s = base_s
        self.cap_s = cap_s
        self._failed: dict[Hashable, Failure] = {}

    def waiting(self, key: Hashable, version: Hashable, now: float) -> bool:
        """Whether the object is to be skipped now; a new version ends its backoff."""
        failure = self._failed.get(key)
        if failure is None:
            return False
        if failure.version != version:
            del self._failed[key]
            return False
        return now < failure.until

    def failed(self, key: Hashable, version: Hashable, now: float, reason: str = "") -> float:
        """Record a failure; returns how long the object is skipped from `now`."""
        previous = self._failed.get(key)
        failures = previous.failures + 1 if previous is not None and previous.version == version else 1
        wait = delay(failures, self.base_s, self.cap_s)
        self._failed[key] = Failure(version, failures, now + wait, reason)
        return wait

    def end_pass(self, started: float) -> None:
        """After a pass that started at `started`: forget the objects whose backoff was over when
        it started (each was tried again and did not fail, or is gone); a failure in that pass
        would have moved its `until` past `started`."""
        self._failed = {k: f for k, f in self._failed.items() if f.until > started}

    def get(self, key: Hashable) -> Failure | None:
        """The object's failure record, if it is backing off."""
        return self._failed.get(key)

    def __len__(self) -> int:
        return len(self._failed)
