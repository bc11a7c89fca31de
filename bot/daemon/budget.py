"""Classification of log text off the pipeline thread, within a time budget.

Why this exists: a body that takes longer than it should to classify (a large
log against many signatures, a pattern slow on this input) held the pipeline
thread, so no other card went out meanwhile, and after a kill and a restart
the same body froze the daemon again. A thread cannot be interrupted in
Python, so the pipeline hands log text to a worker thread and waits for it at
most `budget` seconds. Past that the item is given up (`OverBudgetError`: the
pipeline quarantines it) and the worker is abandoned: it finishes in the
background on an engine of its own and its answer is dropped, while the next
item goes to a new worker with a fresh engine (the compiled databases are the
user's cache, so it loads in milliseconds). Structured signals alone classify
inline: they are small and fast, and never wait behind a worker.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

from bot.core.classifier import Hit
from bot.core.engine import Engine
from bot.core.inputs import InputPart, LogText

log = logging.getLogger("pitcrew.pipeline")

Job = tuple[Sequence[InputPart], "Future[list[Hit]]"]


class OverBudgetError(Exception):
    """A piece of pipeline work ran past its budget; the item is quarantined."""

    def __init__(self, stage: str, budget: float) -> None:
        super().__init__(f"{stage} took over its budget of {budget:g}s")
        self.stage = stage
        self.budget = budget


class BudgetedClassifier:
    """`hits` as the engine's, with log text classified on a worker within `budget` seconds
    (0: inline, no budget)."""

    def __init__(
        self, engine: Engine, budget: float, fresh: Callable[[], Engine] | None = None
    ) -> None:
        self.engine = engine
        self._budget = budget
        self._fresh = fresh
        self._jobs: queue.SimpleQueue[Job | None] | None = None
        self.abandoned = 0

    def hits(self, parts: Sequence[InputPart]) -> list[Hit]:
        if self._budget <= 0 or not any(isinstance(p, LogText) for p in parts):
            return self.engine.hits(parts)
        future: Future[list[Hit]] = Future()
        self._worker().put((parts, future))
        try:
            return future.result(timeout=self._budget)
        except FutureTimeout:
            self._abandon()
            raise OverBudgetError("classification", self._budget) from None

    def close(self) -> None:
        if self._jobs is not None:
            self._jobs.put(None)
            self._jobs = None

    def _worker(self) -> queue.SimpleQueue[Job | None]:
        if self._jobs is None:
            self._jobs = queue.SimpleQueue()
            thread = threading.Thread(
                target=_work,
                args=(self.engine, self._jobs),
                name="pitcrew-classify",
                daemon=True,
            )
            thread.start()
        return self._jobs

    def _abandon(self) -> None:
        """The worker is busy past the budget: it ends after this job (its answer is
        dropped), and the next job goes to a new worker on a fresh engine."""
        self.close()
        self.abandoned += 1
        if self._fresh is not None:
            self.engine = self._fresh()
        log.warning("a classification ran over %gs; it goes on in the background", self._budget)


def _work(engine: Engine, jobs: queue.SimpleQueue[Job | None]) -> None:
    while (job := jobs.get()) is not None:
        parts, future = job
        try:
            future.set_result(engine.hits(parts))
        except BaseException as error:  # handed to the pipeline, which logs and keeps it
            future.set_exception(error)
