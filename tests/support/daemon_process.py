"""Real `pitcrew run` processes for tests: started on a config in a temp dir, their
output in files, their memory read from /proc, stopped by pid (the `daemons` fixture).

Why this exists: the lock, crash and flood tests need the daemon as a user runs it,
a process that a signal can kill mid-post and whose RSS the kernel reports; each
of them starting and stopping one by hand would sooner or later leave one behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

CARD = re.compile(r"╰─+ card (\S+)( \(updated\))? ─+╯")  # the console chat's card frame
RUNNING = re.compile(r"pitcrew running: http://127\.0\.0\.1:(\d+)")
INHERITED = ("SLACK_", "PITCREW_")  # the test's own environment must not configure it


def wait_until(check: Callable[[], Any], timeout: float = 15.0, what: str = "") -> Any:
    """`check()`'s first true value, polled every 50 ms; AssertionError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what or check}")


class Daemon:
    """One `pitcrew run` on `tmp_path/pitcrew.yaml` (or `config`), in `tmp_path`, with
    `env` added to a clean environment; stdout and stderr in `<name>.out`/`.err`."""

    def __init__(
        self,
        tmp_path: Path,
        name: str,
        *args: str,
        env: Mapping[str, str] | None = None,
        config: Path | None = None,
    ) -> None:
        self.out = tmp_path / f"{name}.out"
        self.err = tmp_path / f"{name}.err"
        environ = {k: v for k, v in os.environ.items() if not k.startswith(INHERITED)}
        environ.pop("RAY_ADDRESS", None)
        environ.update(env or {})
        path = config or tmp_path / "pitcrew.yaml"
        command = [sys.executable, "-m", "bot", "run", "--config", str(path), *args]
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=tmp_path, env=environ
            )
        self.port = 0

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.err.read_text()

    def output(self) -> str:
        return self.out.read_text()

    def ready(self, timeout: float = 30) -> int:
        """Wait for "pitcrew running"; the HTTP port it listens on."""

        def port() -> int:
            found = RUNNING.search(self.log())
            if found is None and self.proc.poll() is not None:
                raise AssertionError(f"pitcrew exited {self.proc.returncode}: {self.log()}")
            return int(found.group(1)) if found else 0

        self.port = wait_until(port, timeout, "the daemon to start")
        return self.port

    def exit_code(self, timeout: float = 30) -> int:
        return self.proc.wait(timeout)

    def refusal(self) -> str:
        """The last line it logged (why it refused to start)."""
        return self.log().strip().splitlines()[-1]

    def signal(self, signum: int, timeout: float = 30) -> int:
        os.kill(self.proc.pid, signum)
        return self.proc.wait(timeout)

    @property
    def events(self) -> str:
        """Where Slack's HTTP mode sends this daemon its requests."""
        return f"{self.url}/slack/events"

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM and its exit status; SIGKILL and an AssertionError if it ignores it."""
        if self.proc.poll() is not None:
            return self.proc.returncode
        try:
            return self.signal(signal.SIGTERM, timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"pitcrew ignored SIGTERM for {timeout:g}s") from None

    def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer would: nothing of it runs after this."""
        if self.proc.poll() is None:
            self.signal(signal.SIGKILL)

    def rss(self) -> int:
        """Resident memory now, in bytes (`VmRSS` of /proc/<pid>/status); 0 once gone."""
        try:
            status = Path(f"/proc/{self.proc.pid}/status").read_text()
        except OSError:
            return 0
        found = re.search(r"^VmRSS:\s+(\d+) kB$", status, re.MULTILINE)
        return int(found.group(1)) * 1024 if found else 0


def cards(daemon: Daemon) -> list[tuple[str, bool]]:
    """(card ref, is an update) for every card the console chat printed."""
    return [(m.group(1), bool(m.group(2))) for m in CARD.finditer(daemon.output())]


def posts(daemon: Daemon) -> int:
    """How many cards the daemon posted (updates not counted)."""
    return sum(1 for _, updated in cards(daemon) if not updated)


@pytest.fixture
def daemons() -> Iterator[list[Daemon]]:
    """Append each Daemon started; whatever still runs at teardown is killed by pid."""
    started: list[Daemon] = []
    yield started
    for daemon in started:
        daemon.kill()
