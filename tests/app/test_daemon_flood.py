"""A flood of 1 MiB logs at a real `pitcrew run`, with the default queue and with a
16 MiB one the flood overruns: the daemon stays within its memory, answers 503
beyond its bound, reads every log it accepted, and an ordinary failure sent after
the flood still gets its card within 30 s. And a flood of one workload's logs full
of matching lines (seconds of classification each) delays another workload's
first card by seconds, not minutes: the queue's lanes (`bot.daemon.lanes`).

Several senders POST 1 MiB logs to `/ingest` as fast as they are answered, for
FLOOD_SECONDS. The daemon answers 202 while its queue has room
(`pipeline.queue_size` items, `pipeline.queue_bytes` bytes) and 503 beyond. The
issue's flood lasted 20 s; here it lasts 8 s to keep the suite short, which on
two cores fills the queue to about its byte bound but seldom past it (503s are
counted, not required). `bench/flood.py` runs this same test for the full 20 s,
where a third of the posts are answered 503, and prints the same counts; the
16 MiB case overruns its bound in 4 s. RSS is read from /proc/<pid>/status every 50 ms. Each body's last line
is counted by the daemon under one unmatched-failure shape (`tests/support/flood.py`), so
"every accepted body was read" is a count, not a hope."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.adapters.store.store import Store
from bot.app.settings.sections import PipelineSettings
from tests.support.daemon import DRIVER_LOG, SEED, WORKLOAD, config
from tests.support.daemon_process import CARD, Daemon, wait_until
from tests.support.faults import Measured
from tests.support.flood import counted, flood, matching_flood, send

FLOOD_SECONDS = 8.0  # the flood lasted 20 s: bench/flood.py runs that
SENDERS = 4
CARD_DEADLINE = 30.0  # the issue's: a later ordinary failure got no card within it
BASELINE = 256 << 20  # an idle daemon is about 70 MiB (Python, Hyperscan, uvicorn, Bolt)


SMALL_QUEUE = 16 << 20  # a queue the flood fills within seconds


def rss_bound(senders: int, queue_bytes: int = PipelineSettings().queue_bytes) -> int:
    """What may wait is bounded by queue_bytes of log text, held once as read (its
    chunks) plus allocator slack; the bodies being read or classified meanwhile (one
    per sender, one in the pipeline) take at most ~2 MiB each."""
    return BASELINE + queue_bytes * 2 + (senders + 1) * (2 << 20)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("queue_bytes", "seconds"),
    [(None, None), (SMALL_QUEUE, 4.0)],
    ids=["default-queue", "16-MiB-queue"],
)
def test_a_flood_of_1_mib_logs_keeps_the_daemon_bounded_loses_none_and_starves_no_card(
    tmp_path: Path,
    daemons: list[Daemon],
    measured: Measured,
    queue_bytes: int | None,
    seconds: float | None,
) -> None:
    """With the default queue, and with one small enough that the flood overruns it
    (then some posts must be refused, and still none accepted is lost)."""
    bound = f"pipeline: {{queue_bytes: {queue_bytes}}}\n" if queue_bytes else ""
    config(tmp_path, bound=bound)
    daemon = Daemon(tmp_path, "flooded")
    daemons.append(daemon)
    daemon.ready()
    idle = daemon.rss()
    ingest = f"{daemon.url}/ingest"

    length = seconds or FLOOD_SECONDS
    tally = flood(ingest, length, SENDERS, daemon.rss)
    assert tally.unexpected() == {}

    started = time.monotonic()
    ordinary = (SEED / DRIVER_LOG).read_bytes()
    url = f"{ingest}?origin={DRIVER_LOG}&workload={WORKLOAD}"

    def accepted() -> bool:
        tally.sample(daemon.rss())
        return send(url, ordinary) == "202"  # the sender keeps it until accepted

    wait_until(accepted, CARD_DEADLINE, "the ordinary failure to be accepted")

    def carded() -> list[str]:
        tally.sample(daemon.rss())
        return [m.group(1) for m in CARD.finditer(daemon.output())]

    wait_until(carded, CARD_DEADLINE - (time.monotonic() - started), "the ordinary card")
    waited = time.monotonic() - started
    assert re.search(r"verl-ppo-qwen-raycluster-x7k2p", daemon.output())

    db = tmp_path / "state.db"
    with contextlib.suppress(AssertionError):  # what never arrives is counted below
        wait_until(lambda: counted(db) >= tally.accepted, 120, "every accepted body")
    arrived = counted(db)
    measured.lost(accepted=tally.accepted, arrived=arrived)
    print(
        f"flood {length:g}s x{SENDERS}: 202={tally.accepted} 503={tally.refused} "
        f"read={arrived} idle_rss={idle >> 20}MiB peak_rss={tally.peak_rss >> 20}MiB "
        f"card_after={waited:.1f}s"
    )
    assert arrived == tally.accepted
    limit = rss_bound(SENDERS, queue_bytes or PipelineSettings().queue_bytes)
    assert tally.peak_rss < limit, f"peak RSS {tally.peak_rss >> 20} MiB"
    if queue_bytes:
        assert tally.refused > 0  # the bound answered 503: the senders keep those


MATCHING_SECONDS = 10.0  # issue 23: 10 s of 1 MiB logs full of matching lines
FAIR_DEADLINE = 5.0  # issue 23's goal for the ordinary card behind that flood


def _carded(db: Path, name: str) -> bool:
    """Whether the incident of the workload `name` has its card in the chat."""
    with Store(db) as store:
        return any(
            i.workload is not None and i.workload.name == name and store.chat_ref(i.id)
            for i in store.open_incidents()
        )


@pytest.mark.slow
def test_a_flood_of_one_workloads_matching_logs_delays_anothers_card_by_seconds(
    tmp_path: Path,
    daemons: list[Daemon],
    record_property: Callable[[str, object], None],
) -> None:
    """The flood's logs each take seconds to classify; they wait in their workload's
    lane while the ordinary failure of another workload goes ahead of them."""
    config(tmp_path)
    daemon = Daemon(tmp_path, "flooded")
    daemons.append(daemon)
    daemon.ready()
    ingest = f"{daemon.url}/ingest"
    tally = matching_flood(ingest, MATCHING_SECONDS, SENDERS, daemon.rss)
    assert tally.unexpected() == {}

    started = time.monotonic()
    url = f"{ingest}?origin={DRIVER_LOG}&workload={WORKLOAD}"
    ordinary = (SEED / DRIVER_LOG).read_bytes()
    wait_until(lambda: send(url, ordinary) == "202", CARD_DEADLINE, "the ordinary failure")
    name = WORKLOAD.rsplit("/", 1)[1]
    wait_until(lambda: _carded(tmp_path / "state.db", name), CARD_DEADLINE, "its card")
    waited = time.monotonic() - started
    record_property("flood.card_after", round(waited, 1))  # bench/faults.py's flood line
    print(
        f"matching flood {MATCHING_SECONDS:g}s x{SENDERS} of 1 MiB: 202={tally.accepted} "
        f"503={tally.refused} ordinary_card_after={waited:.1f}s (goal under {FAIR_DEADLINE:g}s)"
    )
    # The goal is a figure bench/flood.py --matching prints; the test holds the line far
    # from the 110 s of arrival order (the ordinary item waits for the one flood log
    # being classified, ~3 s on an idle 2-core machine, more on a busy one).
    assert waited < CARD_DEADLINE
