"""Leader election on a Lease, decided without I/O: client-go's rules, with the clock
passed in.

Why this exists: two replicas of pitcrew in one cluster must not both watch, post and
act; the one holding a `coordination.k8s.io/v1` Lease leads, the other stands by and
takes over when the leader stops renewing it. The official Python client's elector
runs once (after losing the lease it never tries again) and never releases the lease
on a clean stop, so pitcrew decides here, as client-go's `leaderelection` does, and
`bot.daemon.elector` runs these decisions over the Lease API (`LeaseLock`, the
Kubernetes adapter's):

- a Lease held by another holder is free once `lease_duration` has passed since this
  replica last saw its record change: expiry is judged on this replica's own clock,
  never on the holder's `renewTime`;
- taking a Lease from another holder (or one released) adds one to `leaseTransitions`;
  renewing one's own keeps it, with its `acquireTime`. That counter is the fencing
  term: a new leader's term is greater than every leader's before it;
- a leader that has not renewed for `renew_deadline`, or that sees another holder on
  its Lease, has lost it and stops at once;
- a leader that stops cleanly releases the Lease (no holder, one second), so the
  standby takes over at its next try instead of after a whole lease.

A write carries the `version` (resourceVersion) of the record it was decided from, so
of two replicas deciding at once one write is refused by the API server.
The port to the Lease (`LeaseLock`) is defined here with its record, as the
daemon's other ports are in `bot.daemon.ports`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

LEASE_DURATION = timedelta(seconds=15)
RENEW_DEADLINE = timedelta(seconds=10)
RETRY_PERIOD = timedelta(seconds=2)
JITTER = 1.2  # a standby's tries are spread over retry_period * (1 .. 1 + JITTER)
RELEASED = timedelta(seconds=1)  # the duration a released Lease is written with


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """What a Lease says: who holds it, for how long, since when, and its term."""

    holder: str  # spec.holderIdentity; "" once released
    duration: timedelta  # spec.leaseDurationSeconds
    acquired: datetime | None  # spec.acquireTime
    renewed: datetime | None  # spec.renewTime
    transitions: int  # spec.leaseTransitions: the fencing term
    version: str = ""  # metadata.resourceVersion: the precondition of the next write


@dataclass(frozen=True, slots=True)
class ElectionConfig:
    """Who this replica is and client-go's three durations (its defaults)."""

    identity: str
    lease_duration: timedelta = LEASE_DURATION
    renew_deadline: timedelta = RENEW_DEADLINE
    retry_period: timedelta = RETRY_PERIOD

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("leader election needs an identity for this replica")
        if self.lease_duration <= self.renew_deadline:
            raise ValueError(
                f"the lease duration ({self.lease_duration.total_seconds():g} s) must be "
                f"longer than the renew deadline ({self.renew_deadline.total_seconds():g} s)"
            )
        if self.renew_deadline <= self.retry_period * JITTER:
            raise ValueError(
                f"the renew deadline ({self.renew_deadline.total_seconds():g} s) must be "
                f"longer than {JITTER:g} × the retry period "
                f"({self.retry_period.total_seconds():g} s)"
            )


@dataclass(frozen=True, slots=True)
class Create:
    """No Lease yet: create it, held by this replica."""

    record: LeaseRecord


@dataclass(frozen=True, slots=True)
class Update:
    """Write the Lease from the `version` it was read at (refused if it moved since)."""

    record: LeaseRecord


Write = Create | Update


class Election:
    """One replica's view of the Lease: what to write next, whether it leads, whether it
    lost. Feed it every record read (`observe`) and every write that succeeded
    (`written`); it never reads a clock of its own."""

    def __init__(self, config: ElectionConfig) -> None:
        self.config = config
        self._observed: LeaseRecord | None = None
        self._observed_at: datetime | None = None  # when this replica saw it change
        self._renewed: datetime | None = None  # this replica's last successful write as holder
        self._term: int | None = None  # while leading

    @property
    def leading(self) -> bool:
        return self._term is not None

    @property
    def term(self) -> int | None:
        """The fencing term while leading (the Lease's transitions as this replica took it)."""
        return self._term

    @property
    def observed(self) -> LeaseRecord | None:
        return self._observed

    def observe(self, record: LeaseRecord | None, now: datetime) -> None:
        """The Lease as just read (None: there is none)."""
        if record is None:
            return
        seen = self._observed
        if seen is None or dataclasses.replace(seen, version="") != dataclasses.replace(
            record, version=""
        ):
            self._observed_at = now
        self._observed = record

    def attempt(self, record: LeaseRecord | None, now: datetime, floor: int = 0) -> Write | None:
        """What to write to acquire or renew the Lease now, given it as just read; None
        while another holder's lease runs. `floor`: the newest term the store holds, so
        a Lease created anew (the old one deleted) starts above every earlier term."""
        self.observe(record, now)
        me = self.config.identity
        if self.leading and (record is None or record.holder != me):
            return None  # lost: `lost` says so, and the leader stops; it never takes it back
        if record is None:
            fresh = self._mine(now, now, floor + 1, "")
            return Create(fresh)
        if record.holder and record.holder != me and not self._expired(record, now):
            return None
        if record.holder == me:
            acquired = record.acquired or now
            return Update(self._mine(acquired, now, record.transitions, record.version))
        return Update(self._mine(now, now, max(record.transitions + 1, floor + 1), record.version))

    def written(self, record: LeaseRecord, now: datetime) -> int | None:
        """A write succeeded and the Lease is now `record`; the term when this replica
        leads from this write on (it just acquired), else None."""
        self._observed, self._observed_at = record, now
        if record.holder != self.config.identity:
            return None
        self._renewed = now
        if self._term is None:
            self._term = record.transitions
            return self._term
        return None

    def lost(self, now: datetime) -> str:
        """Why the leader must stop now ("" while it leads, or when it does not lead): the
        Lease shows another holder, or it was not renewed within the renew deadline."""
        if self._term is None:
            return ""
        seen = self._observed
        if seen is not None and seen.holder != self.config.identity:
            holder = seen.holder or "nobody (released)"
            return (
                f"the Lease is held by {holder} (term {seen.transitions}), not by this "
                f"replica (term {self._term})"
            )
        assert self._renewed is not None
        late = now - self._renewed
        if late >= self.config.renew_deadline:
            return (
                f"the Lease was not renewed for {late.total_seconds():.1f} s, past the renew "
                f"deadline of {self.config.renew_deadline.total_seconds():g} s"
            )
        return ""

    def release(self, now: datetime) -> Update | None:
        """The write that gives the Lease up on a clean stop (None when not leading)."""
        seen = self._observed
        if self._term is None or seen is None or seen.holder != self.config.identity:
            return None
        released = LeaseRecord("", RELEASED, now, now, seen.transitions, seen.version)
        return Update(released)

    def _expired(self, record: LeaseRecord, now: datetime) -> bool:
        since = self._observed_at or now
        return since + record.duration <= now

    def _mine(
        self, acquired: datetime, now: datetime, transitions: int, version: str
    ) -> LeaseRecord:
        return LeaseRecord(
            self.config.identity,
            self.config.lease_duration,
            acquired,
            now,
            transitions,
            version,
        )


class LeaseConflictError(Exception):
    """Another replica wrote the Lease first (a create of one that exists, an update from
    an older `resourceVersion`): the API server refused this write; read it again."""


class LeaseLock(Protocol):
    """The Lease (`coordination.k8s.io/v1`) in the cluster (`bot.adapters.kubernetes.lease`).
    Any error other than `LeaseConflictError` means the API could not be asked."""

    name: str  # what it is, for people: `Lease pitcrew/pitcrew`

    def get(self) -> LeaseRecord | None:
        """The Lease as stored now (None: there is none)."""
        ...

    def create(self, record: LeaseRecord) -> LeaseRecord:
        """Create it; returns it as stored (its new `version`)."""
        ...

    def update(self, record: LeaseRecord) -> LeaseRecord:
        """Replace it, from `record.version`; returns it as stored."""
        ...
