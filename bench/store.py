"""What the store's writes cost on SQLite and on PostgreSQL, and how long racing clicks take.

The daemon writes a few rows a second; what matters is each write's latency (a click is
answered after its compare-and-swap) and that racing writers are serialized without
stalling. For each store (a SQLite file in a temporary directory; a PostgreSQL started
on loopback, as the tests start it, when Debian's package is installed) this times, per
operation, the median and p99 of: an incident saved, a proposal created, a decision
recorded (the compare-and-swap), a notification queued and delivered; then `--racers`
store objects (one connection each) click Approve on one proposal at once, and the
wall time until all have answered (one wins). Figures only: nothing is asserted.

    .venv/bin/python bench/store.py [--runs 200] [--racers 16]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import MappingProxyType

from bot.adapters.store import local_postgres
from bot.adapters.store.store import Store
from bot.core.actions.approvals import StaleProposalError
from bot.core.model import (
    Diagnosis,
    Incident,
    Notification,
    NotificationKind,
    ObjectRef,
    Proposal,
    ProposalState,
    Transition,
)

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def incident(n: int) -> Incident:
    return Incident(
        id=f"inc-{n}",
        key=f"ml/rayjob/job-{n}",
        opened_at=T0,
        updated_at=T0,
        diagnosis=Diagnosis((), (), "bench"),
        workload=ObjectRef("RayJob", f"job-{n}", "ml"),
        namespace="ml",
    )


def proposal(n: int) -> Proposal:
    return Proposal(
        id=f"p-{n}",
        incident_id=f"inc-{n}",
        action="k8s.bump_memory",
        params=MappingProxyType({"factor": 1.5}),
        preview="16Gi -> 24Gi",
        state=ProposalState.OFFERED,
        created_at=T0,
        expires_at=T0 + timedelta(hours=1),
    )


def approved(current: Proposal, actor: str) -> Proposal:
    step = Transition(ProposalState.APPROVED, T0, actor, "bench", ProposalState.OFFERED)
    return dataclasses.replace(
        current,
        state=ProposalState.APPROVED,
        version=current.version + 1,
        history=(*current.history, step),
    )


def timed(step: Callable[[int], object], runs: int) -> tuple[float, float]:
    """(median, p99) of `step(n)` for n in range(runs), in milliseconds."""
    took = []
    for n in range(runs):
        began = time.perf_counter()
        step(n)
        took.append((time.perf_counter() - began) * 1000)
    took.sort()
    return statistics.median(took), took[min(len(took) - 1, int(len(took) * 0.99))]


def operations(store: Store, runs: int) -> dict[str, tuple[float, float]]:
    def decide(n: int) -> None:
        current = store.get_proposal(f"p-{n}")
        assert current is not None
        store.record_decision(approved(current, "U1"), current.version)

    def deliver(n: int) -> None:
        queued = store.enqueue(Notification(f"inc-{n}", NotificationKind.REPLY, "#ml", None, "hi"))
        store.mark_delivered(queued.id or 0, f"C1/{n}", T0)

    return {
        "incident saved": timed(lambda n: store.upsert_incident(incident(n)), runs),
        "proposal created": timed(lambda n: store.create_proposal(proposal(n)), runs),
        "decision recorded (compare-and-swap)": timed(decide, runs),
        "notification queued and delivered": timed(deliver, runs),
    }


def race(location: str, racers: int) -> tuple[float, int]:
    """Wall ms until `racers` store objects have all clicked one proposal; the winners."""
    with Store(location) as setup:
        setup.upsert_incident(incident(-1))
        setup.create_proposal(proposal(-1))
    stores = [Store(location, busy_timeout=30) for _ in range(racers)]
    barrier = threading.Barrier(racers + 1)
    wins: list[str] = []

    def click(store: Store, actor: str) -> None:
        barrier.wait()
        current = store.get_proposal("p--1")
        assert current is not None
        try:
            store.record_decision(approved(current, actor), current.version)
            wins.append(actor)
        except StaleProposalError:
            pass

    threads = [threading.Thread(target=click, args=(s, f"U{i}")) for i, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    barrier.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = (time.perf_counter() - began) * 1000
    for store in stores:
        store.close()
    return elapsed, len(wins)


def report(kind: str, location: str, runs: int, racers: int) -> None:
    with Store(location) as store:
        figures = operations(store, runs)
    for name, (median, p99) in figures.items():
        print(f"{kind:<10}  {name:<38}  median {median:6.2f} ms  p99 {p99:6.2f} ms")
    elapsed, winners = race(location, racers)
    print(f"{kind:<10}  {racers} racing clicks on one proposal: {elapsed:.0f} ms, {winners} won")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--racers", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        report("SQLite", str(Path(directory) / "bench.db"), args.runs, args.racers)
    if not local_postgres.installed():
        print("PostgreSQL is not installed (make postgresql): its figures are left out")
        return
    with local_postgres.LocalPostgres() as server:
        report("PostgreSQL", server.database(), args.runs, args.racers)


if __name__ == "__main__":
    main()
