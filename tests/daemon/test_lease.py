"""Leader election as client-go decides it, on a clock driven by hand: a Lease held by
another is free once a whole lease passed since this replica saw it change; taking it
adds one to its transitions (the fencing term), renewing keeps them; a leader that sees
another holder or misses the renew deadline has lost; a clean stop releases it."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from bot.daemon.lease import Create, Election, ElectionConfig, LeaseRecord, Update

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=15)
ME, OTHER = "pitcrew-0_a1b2", "pitcrew-1_c3d4"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def held(
    holder: str = OTHER, renewed: float = 0, transitions: int = 3, version: str = "7"
) -> LeaseRecord:
    return LeaseRecord(holder, LEASE, at(-60), at(renewed), transitions, version)


def election() -> Election:
    return Election(ElectionConfig(ME))


def test_with_no_lease_the_replica_creates_it_above_the_stores_newest_term() -> None:
    assert election().attempt(None, T0, floor=4) == Create(LeaseRecord(ME, LEASE, T0, T0, 5, ""))


def test_a_lease_another_holder_renews_is_never_taken() -> None:
    standby = election()
    for second in range(0, 60, 2):  # the holder renews every 2 s: the record changes
        assert standby.attempt(held(renewed=second), at(second)) is None


def test_a_lease_not_renewed_for_a_whole_lease_is_taken_with_one_more_transition() -> None:
    standby = election()
    record = held()
    assert standby.attempt(record, at(0)) is None
    assert standby.attempt(record, at(14.9)) is None
    assert standby.attempt(record, at(15)) == Update(LeaseRecord(ME, LEASE, at(15), at(15), 4, "7"))


def test_expiry_is_judged_on_this_replicas_clock_not_on_the_holders_renew_time() -> None:
    standby = election()
    stale_clock = held(renewed=-3600)  # the holder's clock is an hour behind
    assert standby.attempt(stale_clock, at(0)) is None
    assert standby.attempt(stale_clock, at(10)) is None


def test_a_released_lease_is_taken_at_once() -> None:
    released = LeaseRecord("", timedelta(seconds=1), at(-1), at(-1), 3, "9")
    assert election().attempt(released, T0) == Update(LeaseRecord(ME, LEASE, T0, T0, 4, "9"))


def test_the_leader_renews_keeping_its_acquire_time_and_term() -> None:
    leader = election()
    taken = LeaseRecord(ME, LEASE, T0, T0, 4, "8")
    assert leader.written(taken, T0) == 4  # just acquired: leading, term 4
    assert leader.leading
    assert leader.term == 4
    renewal = leader.attempt(taken, at(2))
    assert renewal == Update(LeaseRecord(ME, LEASE, T0, at(2), 4, "8"))
    assert leader.written(LeaseRecord(ME, LEASE, T0, at(2), 4, "9"), at(2)) is None  # a renewal


def test_a_leader_that_misses_the_renew_deadline_has_lost() -> None:
    leader = election()
    leader.written(LeaseRecord(ME, LEASE, T0, T0, 4, "8"), T0)
    assert leader.lost(at(9.9)) == ""
    assert leader.lost(at(10)) == (
        "the Lease was not renewed for 10.0 s, past the renew deadline of 10 s"
    )


def test_a_leader_that_sees_another_holder_has_lost_and_never_takes_it_back() -> None:
    leader = election()
    leader.written(LeaseRecord(ME, LEASE, T0, T0, 4, "8"), T0)
    taken = held(OTHER, renewed=20, transitions=5, version="12")
    assert leader.attempt(taken, at(20)) is None
    assert leader.lost(at(20)) == (
        f"the Lease is held by {OTHER} (term 5), not by this replica (term 4)"
    )


def test_a_clean_stop_releases_the_lease_keeping_its_term() -> None:
    leader = election()
    leader.written(LeaseRecord(ME, LEASE, T0, T0, 4, "8"), T0)
    assert leader.release(at(3)) == Update(
        LeaseRecord("", timedelta(seconds=1), at(3), at(3), 4, "8")
    )
    assert election().release(T0) is None  # a standby has nothing to give up


def test_a_takeover_starts_above_the_stores_newest_term() -> None:
    standby = election()
    released = LeaseRecord("", timedelta(seconds=1), T0, T0, 0, "1")  # a Lease made anew
    write = standby.attempt(released, T0, floor=6)
    assert isinstance(write, Update)
    assert write.record.transitions == 7


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"identity": ""}, "leader election needs an identity for this replica"),
        (
            {"identity": ME, "lease_duration": timedelta(seconds=10)},
            "the lease duration (10 s) must be longer than the renew deadline (10 s)",
        ),
        (
            {"identity": ME, "retry_period": timedelta(seconds=9)},
            "the renew deadline (10 s) must be longer than 1.2 × the retry period (9 s)",
        ),
    ],
)
def test_client_gos_rules_for_the_durations(config: dict[str, object], problem: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(problem)}$"):
        ElectionConfig(**config)  # type: ignore[arg-type]
