"""`pitcrew diagnose` on a terminal: the panel and the progress bar, as a person at a shell
sees them (a pseudo-terminal, the real command; pipes are covered in test_cli_diagnose)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.adapters.store.store import Store
from bot.core.diagnosis.unmatched import FailureLine
from tests.support.hostile import HOSTILE, TERMINAL_CONTROLS

ROOT = Path(__file__).resolve().parents[2]


def on_a_terminal(*args: str, raw: bool = False) -> tuple[int, str]:
    """The exit code and what the terminal got (without colours and cursor moves unless
    `raw`)."""
    leader, follower = os.openpty()
    env = {**os.environ, "COLUMNS": "100", "LINES": "40", "TERM": "xterm"}
    with subprocess.Popen(
        [sys.executable, "-m", "bot", *args],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        cwd=ROOT,
        env=env,
    ) as process:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed: the process is done writing
                break
            if not chunk:
                break
            chunks.append(chunk)
        code = process.wait(timeout=60)
    os.close(leader)
    screen = b"".join(chunks).decode("utf-8", "replace")
    if raw:
        return code, screen
    return code, re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)  # colours and cursor moves


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (("diagnose", "examples/seed/"), "ROOT CAUSE: pod_oom_killed"),
        (("diagnose", "examples/seed/driver.log"), "ROOT CAUSE: "),
        (("--version",), "0."),
    ],
    ids=["a directory", "one file", "version"],
)
def test_a_terminal_gets_the_panel_and_exit_zero(args: tuple[str, ...], shown: str) -> None:
    code, screen = on_a_terminal(*args)
    assert code == 0, screen
    assert shown in screen
    assert "Traceback" not in screen


def hostile_log(directory: Path) -> Path:
    lines = [f"torch.OutOfMemoryError: CUDA out of memory. {text}" for text in HOSTILE.values()]
    log = directory / "driver.log"
    log.write_text("\n".join(lines).replace("\x00", "") + "\n", encoding="utf-8")
    return log


def test_a_hostile_log_on_a_terminal_drives_nothing(tmp_path: Path) -> None:
    """What rich writes itself (colours, the panel, the progress bar) is all the terminal
    gets: no title, hyperlink, erase or direction override from the log."""
    code, screen = on_a_terminal("diagnose", str(hostile_log(tmp_path)), raw=True)
    assert code == 0, screen
    # rich's own: colours, and the progress bar's cursor (hidden, shown, up, line erased)
    colours = re.sub(r"\x1b\[[0-9;]*m|\x1b\[\?25[lh]|\r?\x1b\[(?:1A|2K)|\r(?=\n)", "", screen)
    assert [c for c in TERMINAL_CONTROLS if c in colours] == []
    assert "cuda_oom" in colours


def test_unmatched_lines_from_a_hostile_log_are_printed_inert(tmp_path: Path) -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    with Store(tmp_path / "pitcrew.db") as store:
        store.record_unmatched(
            [
                FailureLine(f"ERROR {n} {text}", n, f"log {text}")
                for n, text in enumerate(HOSTILE.values())
            ],
            now,
        )
    result = subprocess.run(
        [sys.executable, "-m", "bot", "unmatched", "--store", str(tmp_path / "pitcrew.db")],
        capture_output=True,
        cwd=ROOT,
        timeout=120,
    )
    printed = result.stdout.decode()
    assert result.returncode == 0, result.stderr
    assert [c for c in TERMINAL_CONTROLS if c in printed] == []
    assert "e.g. log [bold red]alarm[/bold red]" in printed
