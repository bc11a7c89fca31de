"""The lock is on the store file itself: a second daemon that reaches the store through
a symlink, or starts after the file describing the holder was deleted, is refused. A
full disk at start is one line naming the path and the free space, no traceback, exit
2, and the store unchanged. Real `pitcrew run` processes."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from bot.adapters.store.lock import lock_path
from bot.adapters.store.store import Store
from tests.support.daemon import config
from tests.support.daemon_process import Daemon

HELD = r"another pitcrew daemon uses this store \(pid {pid} on host .+ since .+\); "
HELD += r"stop it first, or give this one another store.path"


def _config_at(tmp_path: Path, name: str, store: str) -> Path:
    """The test daemon's config with another `store:` line."""
    text = config(tmp_path).read_text()
    first, rest = text.split("\n", 1)
    assert first.startswith("store:")
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"store: {store}\n{rest}")
    return path


@pytest.mark.slow
def test_a_second_daemon_through_a_symlink_or_after_the_lock_file_went_is_refused(
    tmp_path: Path, daemons: list[Daemon]
) -> None:
    config(tmp_path)
    db = tmp_path / "state.db"
    first = Daemon(tmp_path, "first")
    daemons.append(first)
    first.ready()

    link = tmp_path / "elsewhere" / "link.db"
    link.parent.mkdir()
    link.symlink_to(db)
    through = Daemon(tmp_path, "through", config=_config_at(tmp_path, "link", f"{{path: {link}}}"))
    daemons.append(through)
    assert through.exit_code() == 2
    pattern = rf"pitcrew: {re.escape(str(link))}: " + HELD.format(pid=first.proc.pid)
    assert re.fullmatch(pattern, through.refusal()), through.refusal()

    lock_path(str(db)).unlink()  # someone tidied up the file beside the store
    after = Daemon(tmp_path, "after")
    daemons.append(after)
    assert after.exit_code() == 2
    assert re.fullmatch(
        rf"pitcrew: {re.escape(str(db))}: another pitcrew daemon uses this store "
        r"\(holder unknown\); stop it first, or give this one another store.path",
        after.refusal(),
    ), after.refusal()
    assert first.signal(signal.SIGTERM) == 0


@pytest.mark.slow
def test_a_full_disk_at_start_is_one_line_naming_the_path_and_the_free_space(
    tmp_path: Path, daemons: list[Daemon]
) -> None:
    db = tmp_path / "state.db"
    with Store(db) as store:
        store.set_bookmark("kept", "as it was")
    before = db.read_bytes()
    needs_more = _config_at(tmp_path, "full", f"{{path: {db}, min_free_mib: 1000000000}}")
    refused = Daemon(tmp_path, "full", config=needs_more)
    daemons.append(refused)
    assert refused.exit_code() == 2
    assert re.fullmatch(
        rf"pitcrew: {re.escape(str(db))}: the disk of {re.escape(str(db))} is full "
        r"\([\d.]+ (GiB|MiB|KiB|bytes) free\); free some space and start again",
        refused.refusal(),
    ), refused.refusal()
    assert "Traceback" not in refused.err.read_text()
    assert db.read_bytes() == before
    assert not lock_path(str(db)).exists()
    assert os.path.exists(db)
