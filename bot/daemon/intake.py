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
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol

from bot.core.errors import StoreError
from bot.daemon.feed import Healthy, Item, Observation, text_size
from bot.daemon.ports import Clock, KeepingStore
from bot.daemon.spool import SpoolError, pack, unpack

log = logging.getLogger("pitcrew.intake")

QUEUE_FULL = "the pipeline's queue is full; retry later"


class Queue(Protocol):
    """What the intake needs of the pipeline."""

    def submit(self, item: Item, timeout: float = 1.0) -> bool: ...

    def has_room(self, size: int) -> bool: ...

    def alive(self) -> bool: ...


class Intake:
    def __init__(self, store: KeepingStore, queue: Queue, clock: Clock) -> None:
        self._store = store
        self._queue = queue
        self._clock = clock

    def accept(self, observation: Observation) -> str | None:
        """Keep and queue `observation`; None when done, else why not (nothing was kept)."""
        if not self._queue.has_room(text_size(observation)):
            return QUEUE_FULL
        meta, body = pack(observation)
        try:
            row = self._store.spool(meta, body, self._clock())
        except StoreError as error:
            failure = self._store.write_failure() or error.problem
            return f"the store cannot be written ({failure}); retry later"
        kept = Observation(observation.parts, observation.context, kept=row)
        if self._queue.submit(kept, timeout=0.5):
            return None
        self._forget(row)
        return QUEUE_FULL

    def taken(self, item: Item) -> None:
        """The pipeline has taken `item` in: the row that kept it goes."""
        if isinstance(item, Observation | Healthy) and item.kept:
            self._forget(item.kept)

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
        """Queue every kept row again, oldest first; returns how many were queued. A row
        that does not read is left in the store and named in the log."""
        after, count = 0, 0
        while rows := self._store.spooled(after, batch):
            for row in rows:
                after = row.id
                try:
                    item = unpack(row.meta, row.body)
                except SpoolError as error:
                    log.error(
                        "kept evidence #%d does not read (%s); it stays in the store", row.id, error
                    )
                    continue
                if self._requeue(_with_row(item, row.id)):
                    count += 1
        if count:
            log.info("queued %d pieces of evidence kept from before the start", count)
        return count

    def _requeue(self, item: Item) -> bool:
        while self._queue.alive():
            if self._queue.submit(item, timeout=1.0):
                return True
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
