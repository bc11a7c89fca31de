"""The pipeline's queue and thread: taking items off the queue one at a time, and what
happens to an item that a bug or a budget stops.

Why this exists: the pipeline's steps (`bot.daemon.pipeline`) run on one thread,
and what that thread does when a step fails decides whether evidence is lost.
`Taking` is the queue everything puts items on (sources, the HTTP intake, the
scheduler's ticks, the workers' answers: it is built first, so each of them is
handed the queue itself) and the thread that hands each item to a `Worker` (the
pipeline) once `start` is called.
It used to log an unexpected exception without its traceback and then delete
the item's intake row, so a defect in the core silently dropped what /ingest
had acknowledged. Now, for each item:

- the keeper (`bot.daemon.intake`) hears that the pipeline begins on it
  (`taking`: a crash in the middle counts against its row) and, once done, that
  it was taken in (`taken`: its row goes);
- a store that cannot write leaves the row as it is, for the next start;
- a step over its time budget (`OverBudgetError`: classification, correlation and
  rendering run on a worker the pipeline stops waiting for, `bot.daemon.budget`)
  quarantines the item, and the thread goes on at once;
- any other exception is a bug: logged once with its traceback, counted in
  `pitcrew_internal_errors_total{stage}`, and the item is kept as failed, to be
  taken in again at the next start (`pitcrew status` lists it).

The thread goes on with the next item in every case. Items wait in
`bot.daemon.lanes`, so bulk log text never holds back signals and answers.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Protocol

from bot.core.errors import StoreError
from bot.daemon.budget import OverBudgetError
from bot.daemon.feed import Item, Observation, text_size
from bot.daemon.lanes import BULK, Entry, Lanes
from bot.daemon.metrics import Metrics

log = logging.getLogger("pitcrew.pipeline")

_STOP = object()
SMALL_RESERVE = 16 << 20  # bytes of small evidence that may wait beyond queue_bytes
FAILED, QUARANTINED = "failed", "quarantined"


class Keeper(Protocol):
    """Where the items the pipeline takes are kept until they are taken in."""

    def taking(self, item: Item) -> None: ...

    def taken(self, item: Item) -> None: ...

    def set_aside(self, item: Item, state: str, stage: str, problem: str) -> int: ...


class Forgetful:
    """A keeper that keeps nothing (tests and benchmarks that drive the pipeline alone)."""

    def taking(self, item: Item) -> None:
        return None

    def taken(self, item: Item) -> None:
        return None

    def set_aside(self, item: Item, state: str, stage: str, problem: str) -> int:
        return 0


class Worker(Protocol):
    """What the thread hands each item to (the pipeline): `process` takes one item in
    and sets `stage` to the step it is in (a bug is counted by it)."""

    stage: str

    def process(self, item: Item) -> None: ...

    def stopped(self) -> None:
        """The thread took the stop: what the worker keeps for `process` may go."""
        ...


@dataclass(frozen=True)
class QueueLimits:
    """`items` items and `text_bytes` bytes of log text may wait (beyond either,
    `submit` refuses); one item taking over `busy_limit` seconds makes `alive` false."""

    items: int = 10000
    text_bytes: int = 256 << 20
    busy_limit: float = 120.0


class Taking:
    """The queue, the thread and the failure policy."""

    def __init__(self, limits: QueueLimits | None = None, metrics: Metrics | None = None) -> None:
        limits = limits or QueueLimits()
        self._metrics = metrics or Metrics()
        self._keeper: Keeper = Forgetful()
        self._halting = threading.Event()
        self._set_aside: list[Entry] = []
        self._queue_bytes = limits.text_bytes
        self._bytes = 0
        self._bytes_lock = threading.Lock()
        self._busy_limit = limits.busy_limit
        self._busy_since: float | None = None
        self._queue = Lanes(limits.items)
        self._thread: threading.Thread | None = None

    # -- the queue -------------------------------------------------------------------------

    def submit(self, item: Item, timeout: float = 1.0) -> bool:
        """Queue an item; False when the queue stayed full for `timeout` seconds, or when
        its text would take the queue past `QueueLimits.text_bytes`."""
        size = text_size(item)
        with self._bytes_lock:
            if size and self._bytes and self._bytes + size > self._room_for(size):
                return False
            self._bytes += size
        try:
            self._queue.put((item, time.monotonic()), timeout=timeout)
        except queue.Full:
            with self._bytes_lock:
                self._bytes -= size
            return False
        self._metrics.queue_depth.set(self._queue.qsize())
        return True

    def has_room(self, size: int) -> bool:
        """Whether an item of `size` bytes of text would be queued now."""
        with self._bytes_lock:
            over = size and self._bytes and self._bytes + size > self._room_for(size)
        return not over and not self._queue.full()

    def _room_for(self, size: int) -> int:
        """Bytes of text that may wait once this item is queued: small evidence has a
        reserve beyond `queue_bytes`, so a flood of bulk text that fills the queue
        cannot keep an ordinary failure out (its sender would meet 503s meanwhile)."""
        return self._queue_bytes + (SMALL_RESERVE if size < BULK else 0)

    def pending(self) -> int:
        return self._queue.qsize()

    # -- the thread ------------------------------------------------------------------------

    def start(self, worker: Worker, keeper: Keeper | None = None) -> None:
        """Hand each item to `worker` on the thread; `keeper` keeps each item until it
        is taken in (`bot.daemon.intake`; none: nothing is kept)."""
        self._keeper = keeper or Forgetful()
        self._thread = threading.Thread(
            target=self._loop, args=(worker,), name="pitcrew-pipeline", daemon=True
        )
        self._thread.start()

    def alive(self) -> bool:
        """The thread runs, and no item has kept it busy for over `busy_limit` seconds."""
        busy = self._busy_since
        if busy is not None and time.monotonic() - busy > self._busy_limit:
            return False
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float) -> bool:
        """Finish what is queued, then stop; False if that took longer than `timeout`
        (what was left is then in `left_over`)."""
        if self._thread is None:
            return True
        deadline = time.monotonic() + timeout
        self._queue.put((_STOP, time.monotonic()), last=True)
        self._thread.join(max(deadline - time.monotonic(), 0))
        if not self._thread.is_alive():
            return True
        self._halting.set()  # the thread sets aside what it takes from now on
        return False

    def left_over(self) -> list[Item]:
        """After a `stop` that timed out: the items never taken in, oldest first (the one
        being processed, if any, is not among them)."""
        left: list[Entry] = []
        while True:
            try:
                left.append(self._queue.get_nowait())
            except queue.Empty:
                break
        self._queue.put((_STOP, time.monotonic()), last=True)
        if self._thread is not None:
            self._thread.join(1.0)  # it has nothing to set aside once it takes the stop
        left += self._set_aside
        left.sort(key=lambda entry: entry[1])
        return [item for item, _ in left if item is not _STOP]  # type: ignore[misc]

    def _loop(self, worker: Worker) -> None:
        while True:
            item, queued_at = self._queue.get()
            if item is _STOP:
                worker.stopped()
                return
            with self._bytes_lock:
                self._bytes -= text_size(item)  # type: ignore[arg-type]
            if self._halting.is_set():
                self._set_aside.append((item, queued_at))
                continue
            self._take(worker, item, queued_at)  # type: ignore[arg-type]

    def _take(self, worker: Worker, item: Item, queued_at: float) -> None:
        self._busy_since = time.monotonic()
        worker.stage = "pipeline"
        self._keeper.taking(item)
        try:
            worker.process(item)
        except StoreError as error:  # its intake row stays: taken in again at the next start
            log.error("could not process %s: %s", type(item).__name__, error)
            return
        except OverBudgetError as over:
            self._stopped(item, QUARANTINED, over.stage, str(over))
            return
        except Exception as error:
            stage = worker.stage
            log.exception("bug in %s while processing %s", stage, type(item).__name__)
            self._metrics.internal_errors.labels(stage=stage).inc()
            self._stopped(item, FAILED, stage, f"{type(error).__name__}: {error}")
            return
        finally:
            self._busy_since = None
            self._metrics.queue_depth.set(self._queue.qsize())
        self._keeper.taken(item)
        if isinstance(item, Observation):
            self._metrics.pipeline_lag.observe(time.monotonic() - queued_at)

    def _stopped(self, item: Item, state: str, stage: str, problem: str) -> None:
        """Keep an item a bug or a budget stopped, and say so once."""
        row = self._keeper.set_aside(item, state, stage, problem)
        if state == QUARANTINED:
            self._metrics.quarantined.labels(stage=stage).inc()
        if row:
            then = "after `pitcrew requeue`" if state == QUARANTINED else "at the next start"
            log.error(
                "%s #%d is %s (%s); it is kept and taken in again %s",
                type(item).__name__,
                row,
                state,
                problem,
                then,
            )
