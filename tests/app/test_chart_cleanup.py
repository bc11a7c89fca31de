"""Memory charts do not pile up: the daemon's cleanup job deletes the chart files beside
the store that are older than `store.retention`, with the store's own old rows."""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.app import wiring as app
from bot.app.settings.loading import load
from tests.support.daemon import RecordingChat, config, engine


def test_the_cleanup_job_deletes_charts_past_the_retention(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = load(config(tmp_path), {})  # store.retention: 14 days by default
    assert settings.store.retention == timedelta(days=14)
    daemon = app.build(settings, chat=RecordingChat(), engine=engine())
    try:
        charts = tmp_path / "charts"
        charts.mkdir()
        now = datetime(2026, 11, 20, tzinfo=UTC)
        kept, old = charts / "memory-inc-new.png", charts / "memory-inc-old.png"
        other = charts / "notes.txt"  # not a chart pitcrew wrote: never touched
        for path, age in (
            (kept, timedelta(days=13)),
            (old, timedelta(days=15)),
            (other, timedelta(days=30)),
        ):
            path.write_bytes(b"\x89PNG")
            stamp = (now - age).timestamp()
            os.utime(path, (stamp, stamp))
        caplog.set_level(logging.INFO, "pitcrew")

        app.clean_up(settings, daemon.store, now)

        assert sorted(p.name for p in charts.iterdir()) == ["memory-inc-new.png", "notes.txt"]
        assert "cleaned up 0 incidents, 0 notifications, 0 silences and 1 charts and bundles" in [
            r.getMessage() for r in caplog.records
        ]
        app.clean_up(settings, daemon.store, now)  # nothing left to do, and no error
    finally:
        daemon.store.close()
        daemon.lock.release()  # type: ignore[union-attr]
