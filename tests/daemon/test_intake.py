"""Evidence acknowledged is evidence kept: `/ingest` answers 202 only once what it took
is in the store, a stop that outruns its drain keeps what the queue held, and the
next start takes all of it in, oldest first, one card per incident.

Real parts: `pitcrew run` processes on one store, killed or stopped by pid; the
store's own SQLite file read back. To have a queue that is still full when the
daemon dies, the daemon also loads a playbook whose template spends its whole
render budget, so each of those items takes at least `TIME_BUDGET` seconds."""

from __future__ import annotations

import io
import json
import logging
import signal
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.adapters.store.store import Store
from bot.app import wiring as app
from bot.app.settings.loading import load
from bot.core.inputs import LogText
from bot.core.inputs.reader import read_stream
from bot.core.model import ObjectRef, Signal, SourceKind
from bot.daemon.feed import Context, Healthy, Item, Observation, observe
from bot.daemon.intake import Intake
from bot.daemon.spool import SpoolError, pack, unpack
from tests.support.daemon import SEED, RecordingChat, config, engine, http
from tests.support.daemon_process import Daemon, wait_until
from tests.support.faults import Measured
from tests.support.playbooks import playbook, write_library

JOBS = 12
T0 = datetime(2026, 11, 3, 10, 0, tzinfo=UTC)
SPEND_BUDGET = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}x"
SLOW = playbook(
    "slow-render",
    "application_error",
    [{"name": "marker", "regex": r"SlowMarker: job-\d+ failed"}],
    diagnosis=SPEND_BUDGET,
)


# -- rows and back --------------------------------------------------------------------------


def _observation() -> Observation:
    ref = ObjectRef("RayJob", "verl-ppo", "ml-train")
    signal_ = Signal(
        SourceKind.POD_STATUS,
        "OOMKilled",
        reason="OOMKilled",
        fields={"exitCode": "137"},
        obj=ObjectRef("Pod", "worker-0", "ml-train"),
        time=datetime(2026, 11, 3, 10, 0, tzinfo=UTC),
        line=3,
    )
    logs = (
        LogText((b"first\n", b"chunk\n"), SourceKind.DRIVER_LOG, "driver.log", workload=ref),
        LogText((b"\xff\xfe not utf-8\n",), SourceKind.WORKER_LOG, "worker.log"),
    )
    return Observation((logs[0], signal_, logs[1]), Context("prod", "ml-train", ref), kept=7)


def test_an_observation_reads_back_from_its_row_as_it_was() -> None:
    original = _observation()
    meta, body = pack(original)
    assert body == b"first\nchunk\n\xff\xfe not utf-8\n"  # the log bytes as they came
    back = unpack(meta, body)
    assert isinstance(back, Observation)
    assert back.context == original.context
    assert back.kept == 0  # the row id is the store's
    assert back.parts[1] == original.parts[1]
    for got, want in ((back.parts[0], original.parts[0]), (back.parts[2], original.parts[2])):
        assert isinstance(got, LogText)
        assert isinstance(want, LogText)
        assert b"".join(got.chunks) == b"".join(want.chunks)
        assert (got.source, got.origin, got.workload) == (want.source, want.origin, want.workload)


def test_a_healthy_notice_reads_back_from_its_row() -> None:
    notice = Healthy(ObjectRef("RayJob", "verl-ppo", "ml-train"), cluster="prod")
    assert unpack(*pack(notice)) == notice


@pytest.mark.parametrize(
    ("meta", "body", "error"),
    [
        (
            "{",
            b"",
            "JSONDecodeError: Expecting property name enclosed in double quotes: "
            "line 1 column 2 (char 1)",
        ),
        ('{"format":2,"kind":"observation"}', b"", "not a format 1 row"),
        ('{"format":1,"kind":"tick"}', b"", "unknown kind 'tick'"),
        (
            '{"format":1,"kind":"observation","context":{},"parts":[{"log":{"size":9,'
            '"origin":"driver.log"}}]}',
            b"short",
            "the body ends before its log 'driver.log' does",
        ),
        (
            '{"format":1,"kind":"observation","context":{},"parts":[]}',
            b"extra",
            "5 bytes of the body belong to no log",
        ),
    ],
    ids=["not-json", "other-format", "unknown-kind", "short-body", "extra-body"],
)
def test_a_row_that_does_not_read_says_what_is_wrong(meta: str, body: bytes, error: str) -> None:
    with pytest.raises(SpoolError) as caught:
        unpack(meta, body)
    assert str(caught.value) == error


# -- in process: what a stop leaves, and a full disk ----------------------------------------


def _source_item(n: int) -> Observation:
    text = f"Traceback (most recent call last):\nModuleNotFoundError: No module named 'm{n}'\n"
    parts = read_stream(io.BytesIO(text.encode()), f"job-{n}.log")
    return observe(parts, Context(workload=ObjectRef("RayJob", f"job-{n}", "ml-train")))


def test_what_a_stop_left_in_the_queue_is_taken_in_at_the_next_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = load(config(tmp_path), {})
    first = app.build(settings, chat=RecordingChat(), engine=engine())
    first.queue.start(first.pipeline)  # nothing restored, nothing resumed: only the queue
    first.queue.stop(0)  # stopped before any source item arrives
    items: list[Item] = [_source_item(n) for n in range(3)]
    for item in items:
        assert first.queue.submit(item)
    assert first.intake.keep(first.queue.left_over()) == 3
    first.store.close()
    first.lock.release()  # type: ignore[union-attr]

    with Store(tmp_path / "state.db") as store:
        assert [row.id for row in store.spooled()] == [1, 2, 3]
        store.spool("not a row", b"", datetime.now(UTC))
    caplog.set_level(logging.INFO, "pitcrew.intake")
    second = app.build(settings, chat=RecordingChat(), engine=engine())
    second.start()
    try:
        wait_until(lambda: len(second.store.open_incidents()) == 3, 15, "three incidents")
        names = sorted(i.workload.name for i in second.store.open_incidents() if i.workload)
        assert names == ["job-0", "job-1", "job-2"]
        wait_until(lambda: [r.id for r in second.store.spooled()] == [4], 5, "rows taken in")
    finally:
        second.stop()
    messages = [r.getMessage() for r in caplog.records if r.name == "pitcrew.intake"]
    assert (
        "kept evidence #4 does not read (JSONDecodeError: Expecting value: line 1 column 1 "
        "(char 0)); it stays in the store" in messages
    )
    assert "queued 3 pieces of evidence kept from before the start" in messages


def _big_log() -> bytes:
    padding = b"".join(b"INFO worker.py:%d -- step %d done\n" % (n, n) for n in range(400))
    return padding + (SEED / "driver.log").read_bytes()


def test_the_first_evidence_after_the_disk_fills_is_refused_and_nothing_is_kept(
    daemon: app.Daemon, measured: Measured
) -> None:
    base = f"http://127.0.0.1:{daemon.http.port}"
    conn = daemon.store._database._conn
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")  # full, and nothing has failed yet
    assert daemon.store.write_failure() is None

    status, body = http(f"{base}/ingest?origin=driver.log", _big_log())
    measured.lost(accepted=int(status == 202), arrived=0)  # acknowledged, and could not be kept
    assert (status, json.loads(body)) == (
        503,
        {
            "error": "the store cannot be written (the disk (or the database's size limit) is "
            "full); retry later"
        },
    )
    assert daemon.store.spooled() == ()
    assert daemon.queue.pending() == 0
    assert http(f"{base}/readyz")[0] == 503

    conn.execute("PRAGMA max_page_count = 1073741823")
    status, _ = http(f"{base}/ingest?origin=driver.log", _big_log())
    assert status == 202  # the next try is kept: the sender's retry is all it takes
    wait_until(lambda: daemon.store.open_incidents(), 10, "the incident")
    wait_until(lambda: daemon.store.spooled() == (), 5, "the row taken in")
    assert http(f"{base}/readyz")[0] == 200


def test_accepting_refuses_before_keeping_when_the_queue_has_no_room(
    tmp_path: Path,
) -> None:
    settings = load(config(tmp_path, bound="pipeline: {queue_bytes: 1048576}\n"), {})
    built = app.build(settings, chat=RecordingChat(), engine=engine())
    try:
        intake = built.intake
        assert intake.accept(_source_item(1)) is None  # queued (the pipeline is not running)
        big = observe([LogText([b"x" * (1 << 20) + b"\n"], origin="big.log")])
        assert intake.accept(big) == "the pipeline's queue is full; retry later"
        assert [row.id for row in built.store.spooled()] == [1]
    finally:
        built.store.close()
        built.lock.release()  # type: ignore[union-attr]


class FullForAWhile:
    """The pipeline's side of the intake, its queue refusing at once (its bytes are full,
    as during a flood) for `seconds`, then taking what comes."""

    def __init__(self, seconds: float) -> None:
        self.until = time.monotonic() + seconds
        self.offers = 0
        self.queued: list[Item] = []

    def submit(self, item: Item, timeout: float = 1.0) -> bool:
        self.offers += 1
        if time.monotonic() < self.until:
            return False
        self.queued.append(item)
        return True

    def has_room(self, size: int) -> bool:
        return time.monotonic() >= self.until

    def alive(self) -> bool:
        return True


def test_released_evidence_waits_for_room_in_the_queue_without_spinning(tmp_path: Path) -> None:
    with Store(tmp_path / "state.db") as store:
        row = store.spool(*pack(_source_item(1)), T0)
        store.set_aside(row, "quarantined", "correlation", "correlation took over its budget", T0)
        store.requeue(row)
        queue = FullForAWhile(1.0)
        assert Intake(store, queue, lambda: T0).take_released() == 1
        assert [item.kept for item in queue.queued] == [row]  # type: ignore[union-attr]
        assert queue.offers <= 15  # offered every 0.1 s, not thousands of times a second
        assert [r.id for r in store.spooled()] == [row]  # its row stays until taken in


def test_a_standby_keeps_what_it_accepts_for_the_leader_to_take_in(tmp_path: Path) -> None:
    with Store(tmp_path / "state.db") as store:
        standby_queue, leader_queue = FullForAWhile(0), FullForAWhile(0)
        standby = Intake(store, standby_queue, lambda: T0, leading=lambda: False)
        assert standby.accept(_source_item(1)) is None  # 202: kept in the store
        assert standby.submit(_source_item(2)) is True  # what /pitcrew diagnose found
        assert standby_queue.queued == []  # a standby's pipeline does not run
        leader = Intake(store, leader_queue, lambda: T0)
        assert leader.take_released() == 2  # within scheduler.released
        assert [item.kept for item in leader_queue.queued] == [1, 2]  # type: ignore[union-attr]
        assert store.set_aside_rows() == ()  # released for the leader, not set aside


# -- real processes: killed, and stopped before the queue drained ---------------------------


def _daemon_config(tmp_path: Path, drain: str) -> None:
    library = write_library(tmp_path / "playbooks", SLOW)
    config(
        tmp_path,
        playbooks=f"playbooks: {{dirs: [{library}]}}\n",
        pipeline=f"pipeline: {{drain_timeout: {drain}}}\n",
    )


def _post_jobs(port: int) -> int:
    accepted = 0
    for n in range(JOBS):
        text = f"2026-11-03 10:00:0{n % 10} ERROR SlowMarker: job-{n} failed\n".encode()
        url = f"http://127.0.0.1:{port}/ingest?origin=job.log&workload=ml-train/RayJob/job-{n}"
        status, _ = http(url, text)
        accepted += status == 202
    return accepted


def _kept_rows(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM intake").fetchone()[0])


def _cards(db: Path) -> dict[str, int]:
    """Delivered cards per workload, from the store the daemons wrote."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            """SELECT i.workload, COUNT(o.id) FROM incidents i
               LEFT JOIN outbox o ON o.incident_id = i.id AND o.kind = 'post'
                   AND o.status = 'delivered'
               GROUP BY i.id"""
        ).fetchall()
    return {str(workload): int(count) for workload, count in rows}


def _all_cards_out(db: Path) -> dict[str, int] | None:
    cards = _cards(db)
    done = len(cards) == JOBS and all(cards.values()) and _kept_rows(db) == 0
    return cards if done else None


@pytest.mark.slow
def test_evidence_acknowledged_before_a_kill_gets_its_card_after_the_restart(
    tmp_path: Path, daemons: list[Daemon], measured: Measured
) -> None:
    _daemon_config(tmp_path, "10s")
    db = tmp_path / "state.db"
    first = Daemon(tmp_path, "first")
    daemons.append(first)
    accepted = _post_jobs(first.ready())
    first.kill()
    assert accepted == JOBS
    assert _kept_rows(db) > 0  # acknowledged, not yet taken in: only the store has them

    second = Daemon(tmp_path, "second")
    daemons.append(second)
    second.ready()
    cards = wait_until(lambda: _all_cards_out(db), 60, "a card for every job")
    measured.lost(accepted=accepted, arrived=len(cards))
    measured.duplicated(cards=sum(cards.values()), incidents=len(cards))
    assert sorted(cards.values()) == [1] * JOBS


@pytest.mark.slow
def test_a_stop_that_outruns_its_drain_keeps_the_queue_for_the_next_start(
    tmp_path: Path, daemons: list[Daemon], measured: Measured
) -> None:
    _daemon_config(tmp_path, "0s")
    db = tmp_path / "state.db"
    first = Daemon(tmp_path, "first")
    daemons.append(first)
    accepted = _post_jobs(first.ready())
    assert first.signal(signal.SIGTERM) == 0
    said = first.log()
    assert "the queue was not drained in time; " in said
    assert "items kept for the next start" in said
    assert "dropped" not in said
    assert _kept_rows(db) > 0

    second = Daemon(tmp_path, "second")
    daemons.append(second)
    second.ready()
    cards = wait_until(lambda: _all_cards_out(db), 60, "a card for every job")
    measured.lost(accepted=accepted, arrived=len(cards))
    measured.duplicated(cards=sum(cards.values()), incidents=len(cards))
    assert sorted(cards.values()) == [1] * JOBS
