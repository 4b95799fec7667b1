"""Leader election on a coordination.k8s.io Lease, the way client-go's leaderelection does it.

Every replica of the operator is a candidate with a unique identity. The one that creates the Lease,
or takes it over once it expired, is the leader; it renews the Lease every retry period and stops
leading when it could not renew for `renew_deadline_s`. The others read the Lease every retry
period and take it over when it has not changed for `lease_duration_s` by their own clock (a
candidate never compares its clock with the leader's timestamps, so clock skew does not matter).
A leader that stops gracefully releases the Lease (no holder), so a successor starts at once.

Every write is conditional on the resourceVersion read just before (a merge patch carrying it; 409
Conflict when another candidate wrote in between), so two candidates can never both succeed.

The pure part (LeaseView, claim, release) decides; LeaderElector does the reads and writes.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp

from colony.kube.resources import Conflict, Kube, KubeApiError

LEASE_API_VERSION = "coordination.k8s.io/v1"
LEASE_KIND = "Lease"
DEFAULT_LEASE_NAME = "colony-operator-leader"
MICRO_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
"""A Lease's acquireTime and renewTime are MicroTime (RFC 3339 with microseconds)."""

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ElectionTimings:
    """How long a Lease lasts, how long a leader keeps trying to renew it, how often to try.

    A follower takes over at most `lease_duration_s + retry_period_s` after the leader's last renewal;
    a leader that cannot renew stops `lease_duration_s - renew_deadline_s` before that."""

    lease_duration_s: float = 8.0
    renew_deadline_s: float = 5.0
    retry_period_s: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period_s < self.renew_deadline_s < self.lease_duration_s:
            raise ValueError(
                "leader election needs 0 < retry period < renew deadline < lease duration, got "
                f"{self.retry_period_s}, {self.renew_deadline_s}, {self.lease_duration_s}"
            )


def default_identity() -> str:
    """A candidate identity unique per process: the host (the pod's name) and a random suffix."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def micro_time(now: datetime) -> str:
    """`now` as a Lease's MicroTime."""
    return now.astimezone(UTC).strftime(MICRO_TIME_FORMAT)


@dataclass
class LeaseView:
    """What one candidate knows of the Lease: the record it last read and when, by its own monotonic
    clock, that record last changed."""

    record: tuple[Any, ...] | None = None
    changed_at: float = 0.0

    def observe(self, spec: Mapping[str, Any], now: float) -> None:
        """Take in the Lease's spec as read at `now` (monotonic seconds)."""
        record = (
            spec.get("holderIdentity") or "",
            spec.get("leaseDurationSeconds"),
            spec.get("acquireTime"),
            spec.get("renewTime"),
            spec.get("leaseTransitions"),
        )
        if record != self.record:
            self.record, self.changed_at = record, now

    @property
    def holder(self) -> str:
        """The holder last read ("" when none)."""
        return str(self.record[0]) if self.record else ""

    def held_by_other(self, identity: str, now: float, default_duration_s: float) -> bool:
        """Whether another candidate holds the Lease: it names a holder other than `identity` and
        has changed within its leaseDurationSeconds (ours when it has none) before `now`."""
        if self.record is None or not self.holder or self.holder == identity:
            return False
        duration = float(self.record[1] or default_duration_s)
        return now < self.changed_at + duration


def claim(spec: Mapping[str, Any], identity: str, duration_s: float, now: datetime) -> dict[str, Any]:
    """The Lease spec that makes `identity` the holder (a renewal when it already is: acquireTime
    and leaseTransitions kept; a takeover counts one more transition)."""
    ours = spec.get("holderIdentity") == identity
    transitions = int(spec.get("leaseTransitions") or 0)
    stamp = micro_time(now)
    return {
        "holderIdentity": identity,
        "leaseDurationSeconds": max(1, round(duration_s)),
        "acquireTime": spec.get("acquireTime") if ours and spec.get("acquireTime") else stamp,
        "renewTime": stamp,
        "leaseTransitions": transitions if ours else transitions + (1 if spec else 0),
    }


def release(now: datetime) -> dict[str, Any]:
    """The Lease spec of a leader stepping down: no holder, so any candidate may take it at once."""
    return {"holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": micro_time(now)}


_TRANSIENT = (KubeApiError, aiohttp.ClientError, OSError, TimeoutError)
"""Failures of one attempt; the loop tries again after the retry period."""


class LeaderElector:
    """One candidate for the Lease `namespace/name`."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str = DEFAULT_LEASE_NAME,
        identity: str | None = None,
        timings: ElectionTimings | None = None,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity or default_identity()
        self.timings = timings or ElectionTimings()
        self.view = LeaseView()
        self.leading = False

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    async def _try_acquire_or_renew(self) -> bool:
        """One read and at most one conditional write; True when we hold the Lease afterwards."""
        lease = await self.kube.get(LEASE_API_VERSION, LEASE_KIND, self.name, self.namespace)
        now = self._now()
        if lease is None:
            spec = claim({}, self.identity, self.timings.lease_duration_s, datetime.now(UTC))
            manifest = {
                "apiVersion": LEASE_API_VERSION,
                "kind": LEASE_KIND,
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": spec,
            }
            try:
                await self.kube.create(manifest)
            except Conflict:
                return False  # another candidate created it first
            self.view.observe(spec, now)
            return True
        spec = lease.get("spec") or {}
        self.view.observe(spec, now)
        if self.view.held_by_other(self.identity, now, self.timings.lease_duration_s):
            return False
        if self.view.holder != self.identity:
            log.info("leader election: Lease %s/%s is free or expired; taking it", self.namespace, self.name)
        new_spec = claim(spec, self.identity, self.timings.lease_duration_s, datetime.now(UTC))
        body = {"metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]}, "spec": new_spec}
        try:
            await self.kube.patch(LEASE_API_VERSION, LEASE_KIND, self.name, self.namespace, body)
        except Conflict:
            return False  # written by another candidate since our read
        self.view.observe(new_spec, now)
        return True

    async def _attempt(self, timeout_s: float) -> bool:
        try:
            return await asyncio.wait_for(self._try_acquire_or_renew(), timeout_s)
        except _TRANSIENT as error:
            log.warning("leader election: Lease %s/%s not reachable: %s", self.namespace, self.name, error)
            return False

    async def acquire(self) -> None:
        """Return once this candidate is the leader (tries every retry period, with jitter)."""
        log.info("leader election: %s waits for Lease %s/%s", self.identity, self.namespace, self.name)
        while not await self._attempt(self.timings.renew_deadline_s):
            await asyncio.sleep(self.timings.retry_period_s * (1 + 0.2 * random.random()))
        self.leading = True
        log.info("leader election: %s is the leader (Lease %s/%s)", self.identity, self.namespace, self.name)

    async def hold(self) -> None:
        """Renew the Lease every retry period while leading; return when leadership is lost: another
        candidate holds the Lease, or no renewal succeeded for the renew deadline."""
        renewed = self._now()
        while True:
            await asyncio.sleep(self.timings.retry_period_s)
            started = self._now()
            remaining = renewed + self.timings.renew_deadline_s - started
            if remaining <= 0:
                break
            if await self._attempt(remaining):
                renewed = started
            elif self.view.held_by_other(self.identity, self._now(), self.timings.lease_duration_s):
                break
        self.leading = False
        log.error("leader election: %s lost Lease %s/%s", self.identity, self.namespace, self.name)

    async def step_down(self) -> None:
        """Release the Lease if we hold it (best effort: a successor otherwise waits for expiry)."""
        if not self.leading:
            return
        self.leading = False
        try:
            lease = await asyncio.wait_for(
                self.kube.get(LEASE_API_VERSION, LEASE_KIND, self.name, self.namespace),
                self.timings.retry_period_s,
            )
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            body = {
                "metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]},
                "spec": release(datetime.now(UTC)),
            }
            await asyncio.wait_for(
                self.kube.patch(LEASE_API_VERSION, LEASE_KIND, self.name, self.namespace, body),
                self.timings.retry_period_s,
            )
            log.info("leader election: %s released Lease %s/%s", self.identity, self.namespace, self.name)
        except _TRANSIENT as error:
            log.warning(
                "leader election: could not release Lease %s/%s: %s", self.namespace, self.name, error
            )
