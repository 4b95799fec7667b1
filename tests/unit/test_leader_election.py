"""The pure rules of leader election (colony.kube.leader): when a Lease counts as held by another
candidate, what a claim and a release write, and which timings are accepted. The reads and writes
are tested on a real API server (tests/integration/test_high_availability.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from colony.controllers.ddpjob import needs_tracking
from colony.kube.leader import ElectionTimings, LeaseView, claim, default_identity, micro_time, release

NOW = datetime(2026, 12, 4, 13, 0, 0, 123456, tzinfo=UTC)


def _spec(holder: str | None, renew: str = "t0", duration: int = 8) -> dict[str, object]:
    return {"holderIdentity": holder, "leaseDurationSeconds": duration, "renewTime": renew}


def test_a_lease_is_held_by_another_until_it_has_not_changed_for_its_duration() -> None:
    view = LeaseView()
    view.observe(_spec("a"), now=100.0)
    assert view.held_by_other("b", 100.0, 15.0)
    assert view.held_by_other("b", 107.9, 15.0)  # the Lease's own duration (8 s), not the default
    assert not view.held_by_other("b", 108.0, 15.0)
    assert not view.held_by_other("a", 100.0, 15.0)  # our own


def test_a_renewal_restarts_the_followers_clock_whatever_the_timestamps_say() -> None:
    view = LeaseView()
    view.observe(_spec("a", renew="t0"), now=100.0)
    view.observe(_spec("a", renew="t0"), now=106.0)  # unchanged: the clock keeps running
    assert view.changed_at == 100.0
    view.observe(_spec("a", renew="1999-01-01T00:00:00.000000Z"), now=107.0)  # skewed, but changed
    assert view.changed_at == 107.0
    assert view.held_by_other("b", 114.9, 8.0) and not view.held_by_other("b", 115.0, 8.0)


def test_a_lease_without_holder_is_free_at_once() -> None:
    view = LeaseView()
    assert not view.held_by_other("b", 0.0, 8.0)  # never read
    view.observe(release(NOW), now=100.0)
    assert view.holder == "" and not view.held_by_other("b", 100.0, 8.0)


def test_claim_keeps_acquire_time_on_renewal_and_counts_takeovers() -> None:
    first = claim({}, "a", 8.0, NOW)
    assert first == {
        "holderIdentity": "a",
        "leaseDurationSeconds": 8,
        "acquireTime": "2026-12-04T13:00:00.123456Z",
        "renewTime": "2026-12-04T13:00:00.123456Z",
        "leaseTransitions": 0,
    }
    later = datetime(2026, 12, 4, 13, 0, 5, tzinfo=UTC)
    renewed = claim(first, "a", 8.0, later)
    assert renewed["acquireTime"] == first["acquireTime"] and renewed["renewTime"] == micro_time(later)
    assert renewed["leaseTransitions"] == 0
    taken = claim(renewed, "b", 8.0, later)
    assert taken["holderIdentity"] == "b" and taken["acquireTime"] == micro_time(later)
    assert taken["leaseTransitions"] == 1


def test_release_names_no_holder() -> None:
    released = release(NOW)
    assert released["holderIdentity"] is None and released["leaseDurationSeconds"] == 1


@pytest.mark.parametrize(
    ("duration", "deadline", "retry"), [(8, 8, 1), (8, 5, 5), (8, 5, 0), (5, 8, 1), (8, 9, 10)]
)
def test_timings_must_leave_the_leader_time_to_stop_before_a_takeover(
    duration: float, deadline: float, retry: float
) -> None:
    with pytest.raises(ValueError, match="retry period < renew deadline < lease duration"):
        ElectionTimings(duration, deadline, retry)


def test_identities_are_unique_per_process() -> None:
    assert default_identity() != default_identity()


@pytest.mark.parametrize(
    ("spec", "status", "tracked"),
    [
        ({}, {}, True),
        ({}, {"phase": "Running"}, True),
        ({}, {"phase": "Succeeded"}, True),  # follow-up (GPR, ephemeral colony) not done yet
        ({}, {"phase": "Succeeded", "settledAt": "2026-12-04T13:00:00Z"}, False),
        ({}, {"phase": "Failed", "settledAt": "2026-12-04T13:00:00Z"}, False),
        ({"ttlSecondsAfterFinished": 60}, {"phase": "Succeeded", "settledAt": "2026-12-04T13:00:00Z"}, True),
        ({"ttlSecondsAfterFinished": 0}, {"phase": "Failed", "settledAt": "2026-12-04T13:00:00Z"}, True),
    ],
)
def test_a_finished_and_settled_ddpjob_has_no_timer(
    spec: dict[str, object], status: dict[str, object], tracked: bool
) -> None:
    assert needs_tracking(spec=spec, status=status) is tracked  # type: ignore[arg-type]
