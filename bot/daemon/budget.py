"""The pipeline's pure work (classification, correlation, rendering) off its thread,
within a time budget per item.

Why this exists: a body that takes long to classify (a large log against many
signatures), or an incident whose playbook texts take long to render (each
render is bounded, `bot.core.playbooks.render_budget`, but an incident renders one per
finding it holds, at every finding it takes in), held the pipeline thread: no
other card went out meanwhile, and after a kill and a restart the same item
froze the daemon again. A thread cannot be interrupted in Python, so the
pipeline hands each pure call (values in, values out: `Engine.hits`, an
incident's assessment, `build_report`) to a worker thread and waits for it at
most what is left of that step's budget for the item (`begin` makes each step's
budget whole again). Past it the item is given up (`OverBudgetError`: the
pipeline quarantines it) and the worker is abandoned: it finishes in the
background and its answer is dropped; the next call goes to a new worker.

What makes abandoning safe: every store write stays on the pipeline thread, so
nothing an abandoned worker computes reaches the store; what a call is handed is
frozen values or copies made before the hand-over, so the worker cannot change
what the next item reads; the correlator undoes what a call it was making did
when its assessment is given up (`bot.core.incidents.correlator`); and an engine, which a
worker uses while it scans, is replaced by a fresh one (`BudgetedClassifier`;
the compiled databases are the user's cache, so it loads in milliseconds).
Structured signals alone classify inline: they are small and fast.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from bot.core.diagnosis.analysis import Facts
from bot.core.diagnosis.classifier import Hit
from bot.core.diagnosis.engine import Engine
from bot.core.incidents.assessment import Assess
from bot.core.inputs import InputPart, LogText
from bot.core.model import Diagnosis, Finding

log = logging.getLogger("pitcrew.pipeline")

T = TypeVar("T")
Job = tuple[Callable[[], Any], "Future[Any]"]


class OverBudgetError(Exception):
    """A piece of pipeline work ran past its budget; the item is quarantined."""

    def __init__(self, stage: str, budget: float) -> None:
        super().__init__(f"{stage} took over its budget of {budget:g}s")
        self.stage = stage
        self.budget = budget


class Budget:
    """Runs pure calls on a worker, each step of an item within `seconds` in all
    (0: inline, no budget); `on_abandon` hears of each worker given up."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._left: dict[str, float] = {}
        self._jobs: queue.SimpleQueue[Job | None] | None = None
        self._on_abandon: list[Callable[[str], None]] = []
        self.abandoned = 0

    def begin(self) -> None:
        """A new item: each step has its whole budget again."""
        self._left.clear()

    def on_abandon(self, hook: Callable[[str], None]) -> None:
        """Call `hook(stage)` (on the pipeline thread) each time a worker is given up."""
        self._on_abandon.append(hook)

    def run(self, stage: str, work: Callable[[], T]) -> T:
        """`work()`, on the worker within what is left of `stage`'s budget for this item;
        raises OverBudgetError past it, or what `work` raised."""
        if self.seconds <= 0:
            return work()
        left = self._left.get(stage, self.seconds)
        future: Future[T] = Future()
        started = time.monotonic()
        self._worker().put((work, future))
        try:
            return future.result(timeout=max(left, 0.0))
        except FutureTimeout:
            self._abandon(stage)
            raise OverBudgetError(stage, self.seconds) from None
        finally:
            self._left[stage] = left - (time.monotonic() - started)

    def close(self) -> None:
        if self._jobs is not None:
            self._jobs.put(None)
            self._jobs = None

    def _worker(self) -> queue.SimpleQueue[Job | None]:
        if self._jobs is None:
            self._jobs = queue.SimpleQueue()
            thread = threading.Thread(
                target=_work, args=(self._jobs,), name="pitcrew-budgeted", daemon=True
            )
            thread.start()
        return self._jobs

    def _abandon(self, stage: str) -> None:
        """The worker is busy past the budget: it ends after this job (its answer is
        dropped), and the next job goes to a new worker."""
        self.close()
        self.abandoned += 1
        for hook in self._on_abandon:
            hook(stage)
        log.warning("a %s ran over %gs; it goes on in the background", stage, self.seconds)


def _work(jobs: queue.SimpleQueue[Job | None]) -> None:
    while (job := jobs.get()) is not None:
        work, future = job
        try:
            future.set_result(work())
        except BaseException as error:  # handed to the pipeline, which logs and keeps it
            future.set_exception(error)


class BudgetedClassifier:
    """`hits` as the engine's, with log text classified within the budget; after a
    worker was given up, on a `fresh` engine (the abandoned worker keeps the old one)."""

    def __init__(
        self,
        engine: Engine,
        budget: Budget | None = None,
        fresh: Callable[[], Engine] | None = None,
    ) -> None:
        """No `budget`: everything runs inline (tests and tools that drive the pipeline)."""
        self.engine = engine
        self.budget = budget or Budget(0.0)
        self._fresh = fresh
        self.budget.on_abandon(self._renew)

    def hits(self, parts: Sequence[InputPart]) -> list[Hit]:
        if not any(isinstance(p, LogText) for p in parts):
            return self.engine.hits(parts)
        engine, frozen = self.engine, tuple(parts)
        return self.budget.run("classification", lambda: engine.hits(frozen))

    def _renew(self, stage: str) -> None:
        if stage == "classification" and self._fresh is not None:
            self.engine = self._fresh()


def budgeted_assess(assess: Assess, budget: Budget) -> Assess:
    """`assess` (an incident's findings ranked, offered and explained: its playbook texts
    rendered) on the worker within the correlation budget, handed copies."""

    def assess_within(findings: Sequence[Finding], facts: Facts | None = None) -> Diagnosis:
        frozen, known = tuple(findings), dict(facts or {})
        return budget.run("correlation", lambda: assess(frozen, known))

    return assess_within
