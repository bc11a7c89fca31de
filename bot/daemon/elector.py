"""The elector: one replica's tries at the Lease, on threads of its own.

Why this exists: the decisions are `bot.daemon.lease`'s; something must read and write
the Lease on time, whatever the API server does. One thread tries every retry period
(a standby's tries spread with jitter, as client-go's), reads the Lease, writes what the
election decides, and says when this replica starts leading (`on_lead(term)`, on a
thread of its own, so a slow start never delays a renewal). Another thread watches the
renew deadline on the clock alone: an API call that hangs cannot keep a deposed leader
working, and `on_lost(why)` is called once, at the deadline at the latest (the daemon
exits there: a leader that lost its Lease stops at once). `stop` releases the Lease
when this replica leads, so a standby takes over at its next try.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass

from bot.daemon.lease import (
    JITTER,
    Create,
    Election,
    ElectionConfig,
    LeaseConflictError,
    LeaseLock,
    LeaseRecord,
    Write,
)
from bot.daemon.ports import Clock

log = logging.getLogger("pitcrew.lease")

WATCH_EVERY = 0.1  # seconds between looks at the renew deadline


def _never(term: int) -> None:
    return None


def _floor() -> int:
    return 0


@dataclass(frozen=True, slots=True)
class Role:
    """What this replica is now, for the probes and `pitcrew status`."""

    leading: bool
    holder: str  # who holds the Lease, as last read ("" for nobody)
    term: int | None  # the Lease's transitions as last read
    problem: str = ""  # why the last try failed ("" when it worked)


class Elector:
    def __init__(
        self,
        lock: LeaseLock,
        config: ElectionConfig,
        *,
        clock: Clock,
        on_lead: Callable[[int], None] = _never,
        on_lost: Callable[[str], None] = lambda why: None,
        floor: Callable[[], int] = _floor,
        rng: random.Random | None = None,
    ) -> None:
        """`floor`: the newest term the store holds (a Lease created anew starts above)."""
        self.lock = lock
        self.config = config
        self._election = Election(config)
        self._clock = clock
        self._on_lead = on_lead
        self._on_lost = on_lost
        self._floor = floor
        self._rng = rng or random.Random()
        self._mutex = threading.Lock()
        self._stopping = threading.Event()
        self._lost = ""
        self._problem = ""
        self._threads: list[threading.Thread] = []

    # -- running ---------------------------------------------------------------------------

    def start(self) -> None:
        for name, target in (("pitcrew-lease", self._run), ("pitcrew-lease-watch", self._watch)):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, release: bool = True) -> None:
        """Stop trying; with `release`, give the Lease up when this replica leads."""
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout=self.config.retry_period.total_seconds() + 5)
        if release and not self._lost:
            self._release()

    def try_once(self) -> bool:
        """One read and, when the election says so, one write; True when this replica
        leads after it. The thread calls it every retry period; tests call it directly."""
        now = self._clock()
        try:
            record = self.lock.get()
        except Exception as error:
            self._failed(f"cannot read the {self.lock.name}: {error}")
            return self.leading
        floor = self._safe_floor() if record is None or not self.leading else 0
        with self._mutex:
            write = self._election.attempt(record, now, floor)
        if write is None:
            self._problem = ""
            return self.leading
        written = self._write(write)
        if written is None:
            return self.leading
        with self._mutex:
            term = self._election.written(written, self._clock())
        self._problem = ""
        if term is not None:
            log.info("leading: this replica holds the %s (term %d)", self.lock.name, term)
            threading.Thread(
                target=self._on_lead, args=(term,), name="pitcrew-lead", daemon=True
            ).start()
        return self.leading

    def check(self) -> str:
        """Why this replica lost the Lease ("" while it leads or stands by); the watch
        thread calls it every `WATCH_EVERY` seconds and `on_lost` the first time."""
        with self._mutex:
            why = self._election.lost(self._clock())
        if why and not self._lost:
            self._lost = why
            log.error("lost the %s: %s; stopping at once", self.lock.name, why)
            self._on_lost(why)
        return why

    # -- what the probes say ----------------------------------------------------------------

    def alive(self) -> bool:
        """Both threads run (a replica whose elector died can never lead: restart it)."""
        return bool(self._threads) and all(t.is_alive() for t in self._threads)

    @property
    def leading(self) -> bool:
        with self._mutex:
            return self._election.leading and not self._lost

    def role(self) -> Role:
        with self._mutex:
            seen = self._election.observed
            leading = self._election.leading and not self._lost
        return Role(
            leading,
            seen.holder if seen else "",
            seen.transitions if seen else None,
            self._lost or self._problem,
        )

    # -- internals ---------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping.is_set() and not self._lost:
            try:
                self.try_once()
            except Exception:
                log.exception("bug in the elector; it tries again")
            period = self.config.retry_period.total_seconds()
            if not self.leading:
                period *= 1 + self._rng.uniform(0, JITTER)
            self._stopping.wait(period)

    def _watch(self) -> None:
        while not self._stopping.wait(WATCH_EVERY):
            if self.check():
                return

    def _write(self, write: Write) -> LeaseRecord | None:
        try:
            if isinstance(write, Create):
                return self.lock.create(write.record)
            return self.lock.update(write.record)
        except LeaseConflictError:
            self._problem = ""  # another replica wrote first: read again at the next try
            return None
        except Exception as error:
            self._failed(f"cannot write the {self.lock.name}: {error}")
            return None

    def _failed(self, problem: str) -> None:
        if problem != self._problem:
            log.warning("%s", problem)
        self._problem = problem

    def _safe_floor(self) -> int:
        try:
            return self._floor()
        except Exception as error:
            log.warning("cannot read the store's newest term: %s", error)
            return 0

    def _release(self) -> None:
        with self._mutex:
            release = self._election.release(self._clock())
        if release is None:
            return
        try:
            self.lock.update(release.record)
        except Exception as error:  # the Lease then expires on its own
            log.warning("could not release the %s: %s", self.lock.name, error)
            return
        log.info("released the %s", self.lock.name)
