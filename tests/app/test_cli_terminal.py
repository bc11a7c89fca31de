"""`pitcrew diagnose` on a terminal: the panel and the progress bar, as a person at a shell
sees them (a pseudo-terminal, the real command; pipes are covered in test_cli_diagnose)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def on_a_terminal(*args: str) -> tuple[int, str]:
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
