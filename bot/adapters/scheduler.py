"""The periodic jobs, on APScheduler's BackgroundScheduler (the only module importing it).

Why this exists: some work happens because time passed, not because something
was observed: offers expire, quiet incidents resolve and cards wait out their
group interval (the pipeline's tick), failed deliveries are retried, old
state is cleaned up, approved proposals and released evidence written by
another process are picked up, and sources poll. The jobs themselves are plain
callables handed in by the wiring (`bot.app.wiring`); this module runs them, one
instance at a time, and logs a failing job in one line instead of letting it
stop the schedule. Sources and later features add their own with `every`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, timedelta

from apscheduler.schedulers.background import BackgroundScheduler

log = logging.getLogger("pitcrew.scheduler")

Job = Callable[[], object]


@dataclass(frozen=True, slots=True)
class Jobs:
    """The daemon's own periodic work."""

    tick: Job  # pipeline: resolve quiet incidents, due cards, proposal changes, silences
    expire: Job  # offers past their expiry
    wake_outbox: Job  # retries whose backoff has passed
    cleanup: Job  # state older than the retention
    run_approved: Job  # approved proposals (also from `pitcrew approve` in another process)
    take_released: Job  # evidence `pitcrew requeue` released (in another process)


@dataclass(frozen=True, slots=True)
class Intervals:
    """How often each of the daemon's own jobs runs (`scheduler` in the config)."""

    tick: timedelta
    expiry: timedelta
    outbox: timedelta
    cleanup: timedelta
    approved: timedelta
    released: timedelta


class Scheduler:
    def __init__(self) -> None:
        self._scheduler = BackgroundScheduler(
            timezone=UTC,
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        )
        self.names: list[str] = []

    def every(self, name: str, interval: timedelta, job: Job) -> None:
        """Run `job` every `interval` (the hook sources register their polls with)."""
        self._scheduler.add_job(
            _logged(name, job),
            "interval",
            seconds=interval.total_seconds(),
            id=name,
            name=name,
            replace_existing=True,
        )
        self.names.append(name)

    def install(self, jobs: Jobs, intervals: Intervals) -> None:
        self.every("tick", intervals.tick, jobs.tick)
        self.every("expire-proposals", intervals.expiry, jobs.expire)
        self.every("outbox", intervals.outbox, jobs.wake_outbox)
        self.every("cleanup", intervals.cleanup, jobs.cleanup)
        self.every("run-approved", intervals.approved, jobs.run_approved)
        self.every("take-released", intervals.released, jobs.take_released)

    def start(self) -> None:
        self._scheduler.start()

    def stop(self) -> None:
        if self._scheduler.running:
            self._scheduler.shutdown(wait=True)


def _logged(name: str, job: Job) -> Callable[[], None]:
    def run() -> None:
        try:
            job()
        except Exception as error:
            log.error("job %s failed: %s", name, error)

    run.__name__ = f"pitcrew_{name.replace('-', '_')}"
    return run
