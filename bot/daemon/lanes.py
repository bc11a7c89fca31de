"""The pipeline's queue in lanes: what the pipeline thread takes next.

Why this exists: one queue in arrival order let a flood of one workload's
large logs hold every other card back (a 10 s flood of 1 MiB logs delayed an
ordinary failure's card by 110 s, at ~1.5 logs/s). Items now wait in lanes:
structured signals, small evidence, ticks and answers in the fast lane, which
is served first; log text over `BULK` bytes in one lane per workload, served
in turn, so a workload's flood delays another workload's first card by at most
one large log. One item of bulk text is still taken after every `FAST_RUN`
fast ones, so a steady stream of signals cannot starve it. Within a lane the
order is arrival order; a workload's "healthy again" notice waits behind its
own queued logs, so it never overtakes the failure they show. The stop marker
is taken last, once every lane is empty.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import OrderedDict, deque

from bot.daemon.feed import Healthy, Observation, text_size

BULK = 64 << 10  # bytes of log text from which an observation is bulk
FAST_RUN = 32  # fast items taken in a row before a waiting bulk one

Entry = tuple[object, float]  # (item or the stop marker, when it was queued)


def lane_of(item: object) -> str:
    """The bulk lane (a workload) the item waits in; "" for the fast lane."""
    if not isinstance(item, Observation) or text_size(item) < BULK:
        return ""
    context = item.context
    if context.workload is not None:
        return str(context.workload)
    return context.namespace or context.cluster or "(no workload)"


class Lanes:
    """A bounded, thread-safe queue of `Entry`s served fast lane first, then bulk lanes in
    turn; the interface of `queue.Queue` the pipeline uses."""

    def __init__(self, maxsize: int) -> None:
        self._maxsize = maxsize
        self._fast: deque[Entry] = deque()
        self._bulk: OrderedDict[str, deque[Entry]] = OrderedDict()
        self._stop: Entry | None = None
        self._count = 0
        self._fast_run = 0
        self._ready = threading.Condition()

    def put(self, entry: Entry, timeout: float | None = None, *, last: bool = False) -> None:
        """Queue `entry` (`last`: the stop marker, taken once all else is); raises
        queue.Full when there was no room for `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._ready:
            if last:
                self._stop = entry
                self._ready.notify()
                return
            while self._count >= self._maxsize:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise queue.Full
                self._ready.wait(left)
            self._lane(entry[0]).append(entry)
            self._count += 1
            self._ready.notify_all()

    def get(self) -> Entry:
        with self._ready:
            while (entry := self._next()) is None:
                self._ready.wait()
            return entry

    def get_nowait(self) -> Entry:
        with self._ready:
            entry = self._next()
        if entry is None:
            raise queue.Empty
        return entry

    def qsize(self) -> int:
        return self._count

    def full(self) -> bool:
        return self._count >= self._maxsize

    def _lane(self, item: object) -> deque[Entry]:
        key = lane_of(item)
        if not key and isinstance(item, Healthy) and str(item.workload) in self._bulk:
            key = str(item.workload)  # behind the logs of the workload it says is well
        if not key:
            return self._fast
        return self._bulk.setdefault(key, deque())

    def _next(self) -> Entry | None:
        """The next entry (the caller holds the lock), or None when all lanes are empty."""
        entry: Entry | None = None
        if self._fast and (not self._bulk or self._fast_run < FAST_RUN):
            entry = self._fast.popleft()
            self._fast_run += 1
        elif self._bulk:
            key, lane = next(iter(self._bulk.items()))
            entry = lane.popleft()
            del self._bulk[key]
            if lane:
                self._bulk[key] = lane  # to the back: the next workload's turn
            self._fast_run = 0
        elif self._stop is not None:
            entry, self._stop = self._stop, None
            return entry
        if entry is not None:
            self._count -= 1
            self._ready.notify_all()
        return entry
