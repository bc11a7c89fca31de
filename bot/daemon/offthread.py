"""Work the pipeline hands off and hears back from as one more queue item, exactly once.

Why this exists: live checks (`bot.daemon.live_checks`) and memory evidence
(`bot.daemon.memory_worker`) both ask a cluster or Prometheus something the pipeline
thread must never wait for. Each hands a job here: it runs on a small pool of
threads of its own, and the item it returns goes on the pipeline's queue. A job
that has not finished within its deadline is answered with its `late` item
instead, told why ("did not answer within 5 s": a dashboard that accepts and
never replies costs one deadline, not the card), and its own answer, when it
comes, is dropped. A job that raises is logged and answered with `late` too.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

log = logging.getLogger("pitcrew.offthread")

T = TypeVar("T")  # the queue item a job answers with


@dataclass(eq=False)
class _Job(Generic[T]):
    run: Callable[[], T]
    late: Callable[[str], T]  # the answer of a job that gave none, from why
    what: str
    timeout: float
    answered: bool = False


class OffThread(Generic[T]):
    """A pool of `workers` threads named `name`, and one watchdog for their deadlines;
    answers go to `submit` (the pipeline's queue), which returns False when it is full."""

    def __init__(self, submit: Callable[[T], bool], *, name: str, workers: int = 2) -> None:
        self._submit = submit
        self._name = name
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        self._lock = threading.Condition()
        self._deadlines: list[tuple[float, int, _Job[T]]] = []
        self._order = itertools.count()
        self._closed = False
        self._watch: threading.Thread | None = None

    def run(
        self, job: Callable[[], T], late: Callable[[str], T], timeout: float, what: str
    ) -> bool:
        """Run `job` off this thread (returns at once); its item, or `late(why)` past
        `timeout` seconds, goes on the sink once. False when closed (nothing will come)."""
        waiting = _Job(job, late, what, timeout)
        with self._lock:
            if self._closed:
                return False
            self._watching()
            deadline = time.monotonic() + timeout
            heapq.heappush(self._deadlines, (deadline, next(self._order), waiting))
            self._lock.notify()
        self._pool.submit(self._work, waiting)
        return True

    def close(self, wait: bool = False) -> None:
        """Start no more jobs; one in flight is abandoned unless `wait`."""
        with self._lock:
            self._closed = True
            self._deadlines.clear()
            self._lock.notify()
        self._pool.shutdown(wait=wait, cancel_futures=not wait)

    def _watching(self) -> None:
        if self._watch is None:
            self._watch = threading.Thread(
                target=self._watchdog, name=f"{self._name}-watch", daemon=True
            )
            self._watch.start()

    def _work(self, job: _Job[T]) -> None:
        try:
            item = job.run()
        except Exception as error:  # a pool thread: the late answer stands in, logged
            log.exception("%s failed", job.what)
            item = job.late(f"failed: {error}")
        self._answer(job, item)

    def _watchdog(self) -> None:
        with self._lock:
            while not self._closed:
                if not self._deadlines:
                    self._lock.wait()
                    continue
                deadline, _, job = self._deadlines[0]
                left = deadline - time.monotonic()
                if left > 0:
                    self._lock.wait(left)
                    continue
                heapq.heappop(self._deadlines)
                if not job.answered:
                    self._lock.release()
                    try:
                        self._answer(job, job.late(f"did not answer within {job.timeout:g} s"))
                    finally:
                        self._lock.acquire()

    def _answer(self, job: _Job[T], item: T) -> None:
        with self._lock:
            if job.answered or self._closed:
                return
            job.answered = True
        if not self._submit(item):
            log.warning("the pipeline queue is full: the answer of %s was dropped", job.what)
