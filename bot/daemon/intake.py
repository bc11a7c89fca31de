"""Durable intake: evidence is on disk before it is acknowledged, stays there until the
pipeline has taken it in, and is taken in again after a restart.

Why this exists: `/ingest` answered 202 for evidence that lived only in memory,
so a crash, a stop that outran its drain or a full disk lost it for good. Now
`accept` writes the observation to the store's intake rows first (a store that
cannot write refuses it, so the sender keeps it) and queues it only then; the
pipeline reports each item it has taken in (`taken`), and its row goes. A stop
that does not drain the queue in time keeps what was left (`keep`), and the
next start queues every kept row again, oldest first (`resume`), before any
source or request adds more. Rows are `bot.daemon.spool` values.

An item a bug or a budget stops is never deleted (`set_aside`): one a bug
stopped is kept as `failed` and taken in again at the next start; one over its
time budget, or one the pipeline began at two starts in a row without
finishing (a freeze, a kill), is `quarantined`: skipped at every start until
`pitcrew requeue` releases it. `pitcrew status` lists both. `pitcrew requeue`
runs in another process and only marks rows in the store: the running daemon
looks for them every few seconds (`take_released`, a scheduler job) and
queues them, so a released item's card comes without a restart.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from bot.core.errors import StoreError
from bot.daemon.feed import Healthy, Item, Observation, text_size
from bot.daemon.metrics import Metrics
from bot.daemon.ports import Clock, KeepingStore, SpooledRow
from bot.daemon.spool import SpoolError, pack, unpack

log = logging.getLogger("pitcrew.intake")

QUEUE_FULL = "the pipeline's queue is full; retry later"
FAILED, QUARANTINED, RELEASED = "failed", "quarantined", "released"
MAX_TAKES = 2  # starts at which an item may be begun and not finished before quarantine
RETRY = 0.1  # seconds between offers of kept evidence to a queue that has no room


class Queue(Protocol):
    """What the intake needs of the pipeline."""

    def submit(self, item: Item, timeout: float = 1.0) -> bool: ...

    def has_room(self, size: int) -> bool: ...

    def alive(self) -> bool: ...


def _always() -> bool:
    return True


class Intake:
    def __init__(
        self,
        store: KeepingStore,
        queue: Queue,
        clock: Clock,
        metrics: Metrics | None = None,
        leading: Callable[[], bool] = _always,
    ) -> None:
        """`leading`: whether this replica takes evidence in (leader election); a standby
        keeps what it accepts as released, for the leader (`take_released`)."""
        self._store = store
        self._queue = queue
        self._clock = clock
        self._metrics = metrics or Metrics()
        self._leading = leading

    def accept(self, observation: Observation) -> str | None:
        """Keep and queue `observation`; None when done, else why not (nothing was kept)."""
        leads = self._leading()
        if leads and not self._queue.has_room(text_size(observation)):
            return QUEUE_FULL
        meta, body = pack(observation)
        try:
            row = self._store.spool(meta, body, self._clock())
            if not leads:  # the leader takes it in within scheduler.released
                self._store.set_aside(row, RELEASED, "standby", "", self._clock())
                return None
        except StoreError as error:
            failure = self._store.write_failure() or error.problem
            return f"the store cannot be written ({failure}); retry later"
        kept = Observation(observation.parts, observation.context, kept=row)
        if self._queue.submit(kept, timeout=0.5):
            return None
        self._forget(row)
        return QUEUE_FULL

    def submit(self, item: Item, timeout: float = 1.0) -> bool:
        """Queue `item` (what an on-demand diagnosis found): at once on the leader; a
        standby keeps its evidence for the leader, as `accept` does."""
        if self._leading():
            return self._queue.submit(item, timeout)
        return isinstance(item, Observation) and self.accept(item) is None

    def taken(self, item: Item) -> None:
        """The pipeline has taken `item` in: the row that kept it goes."""
        if isinstance(item, Observation | Healthy) and item.kept:
            self._forget(item.kept)

    def taking(self, item: Item) -> None:
        """The pipeline begins on `item`: a crash before `taken` counts against its row."""
        if isinstance(item, Observation | Healthy) and item.kept:
            try:
                self._store.taking(item.kept)
            except StoreError as error:
                log.warning("could not count a take of evidence #%d: %s", item.kept, error)

    def set_aside(self, item: Item, state: str, stage: str, problem: str) -> int:
        """Keep `item` as `failed` or `quarantined` (kept first when it had no row);
        returns its row (0 when it is not evidence, or the store cannot write)."""
        if not isinstance(item, Observation | Healthy):
            return 0  # ticks, refreshes and answers are made again
        try:
            row = item.kept or self._store.spool(*pack(item), self._clock())
            self._store.set_aside(row, state, stage, problem, self._clock())
        except StoreError as error:
            log.error("could not set a %s aside: %s", type(item).__name__, error)
            return 0
        return row

    def keep(self, items: Iterable[Item]) -> int:
        """Keep what a stop left in the queue for the next start; returns how many."""
        count = 0
        for item in items:
            if not isinstance(item, Observation | Healthy):
                continue  # ticks, refreshes and answers are made again after a start
            if not item.kept:
                try:
                    self._store.spool(*pack(item), self._clock())
                except StoreError as error:
                    log.error("could not keep a queued %s: %s", type(item).__name__, error)
                    continue
            count += 1
        return count

    def resume(self, batch: int = 64) -> int:
        """Queue every kept row again (failed and released ones too), oldest first;
        returns how many were queued. A row that does not read is left in the store and
        named in the log; one begun at `MAX_TAKES` starts without finishing is
        quarantined instead."""
        self._store.queue_all()
        after, count = 0, 0
        while rows := self._store.spooled(after, batch):
            for row in rows:
                after = row.id
                count += self._queue_row(row)
        if count:
            log.info("queued %d pieces of evidence kept from before the start", count)
        return count

    def take_released(self, batch: int = 64) -> int:
        """Queue the rows `pitcrew requeue` released while the daemon runs (the
        scheduler's job); returns how many were queued."""
        count = 0
        while rows := self._store.take_released(batch):
            for row in rows:
                count += self._queue_row(row)
                log.info("evidence #%d was released by pitcrew requeue; it is queued", row.id)
        return count

    def _queue_row(self, row: SpooledRow) -> bool:
        if row.takes >= MAX_TAKES:
            self._quarantine_unfinished(row.id, row.takes)
            return False
        try:
            item = unpack(row.meta, row.body)
        except SpoolError as error:
            log.error("kept evidence #%d does not read (%s); it stays in the store", row.id, error)
            return False
        return self._requeue(_with_row(item, row.id))

    def _quarantine_unfinished(self, row: int, takes: int) -> None:
        problem = f"begun at {takes} starts in a row and never finished"
        self._metrics.quarantined.labels(stage="start").inc()
        log.error("evidence #%d is quarantined: %s (pitcrew requeue %d)", row, problem, row)
        try:
            self._store.set_aside(row, QUARANTINED, "start", problem, self._clock())
        except StoreError as error:
            log.error("could not quarantine evidence #%d: %s", row, error)

    def _requeue(self, item: Item) -> bool:
        while self._queue.alive():
            if self._queue.submit(item, timeout=1.0):
                return True
            time.sleep(RETRY)  # refused at once for its bytes: the queue drains meanwhile
        return False  # the pipeline stopped: the row stays for the next start

    def _forget(self, row: int) -> None:
        try:
            self._store.unspool(row)
        except StoreError as error:
            log.warning(
                "evidence #%d stays kept (taken in again at the next start): %s", row, error
            )


def _with_row(item: Observation | Healthy, row: int) -> Item:
    if isinstance(item, Healthy):
        return Healthy(item.workload, item.cluster, item.reason, kept=row)
    return Observation(item.parts, item.context, kept=row)
