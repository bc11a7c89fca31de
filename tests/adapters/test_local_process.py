"""The shared lifecycle of a throwaway local server (`bot/adapters/local_process.py`), on
a real child process (this interpreter running a short script): its output is the end of
its log, a process that dies before it is ready fails with that output, one never ready
is stopped and named (its directory, log included, is gone by then), and a stop ends the process by pid and removes its directory."""

from __future__ import annotations

import os
import socket
import sys
import tempfile
from pathlib import Path

import pytest

from bot.adapters.local_process import LocalProcess, free_port


class ScriptError(RuntimeError):
    pass


class Script(LocalProcess):
    """`python -c script` in a temporary directory; ready when `ready` exists there."""

    what = "script"
    log_name = "script.log"
    error = ScriptError
    output_limit = 12
    poll_every = 0.05

    def __init__(self, script: str, tmp: Path) -> None:
        self.script = script
        self.tmp = tmp
        self.where = tmp

    def start(self, timeout: float = 10.0) -> str:
        self._dir = Path(tempfile.mkdtemp(prefix="script-", dir=self.tmp))
        self._launch([sys.executable, "-c", self.script])
        self.where = self._dir
        self._wait_ready(timeout)
        return str(self._dir)

    def _ready(self) -> bool:
        return self._dir is not None and (self._dir / "ready").exists()


READY = "import time; print('started', flush=True); open('ready', 'w').close(); time.sleep(60)"


def test_a_ready_process_runs_in_its_directory_and_stop_ends_it_and_removes_it(
    tmp_path: Path,
) -> None:
    with Script(READY, tmp_path) as server:
        pid = server.pid
        directory = server.where
        assert (directory / "ready").exists()
        assert server.output() == "started\n"
        assert Path(f"/proc/{pid}").exists()
    assert server.pid == 0
    assert not directory.exists()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.parametrize(
    ("script", "timeout", "message"),
    [
        pytest.param(
            "print('no such config file: x.yml')",
            10.0,
            "script exited: file: x.yml\n",
            id="exits before it is ready: the end of its output",
        ),
        pytest.param(
            "import time; print('waiting', flush=True); time.sleep(60)",
            2.0,
            "script was not ready in 2 s: waiting\n",
            id="never ready: stopped and named with the end of its output",
        ),
    ],
)
def test_a_process_that_is_not_ready_fails_with_its_output(
    tmp_path: Path, script: str, timeout: float, message: str
) -> None:
    server = Script(script, tmp_path)
    with pytest.raises(ScriptError) as failed:
        server.start(timeout)
    assert str(failed.value) == message
    server.stop()
    assert server.pid == 0
    assert list(tmp_path.iterdir()) == []


def test_a_free_port_can_be_bound_on_loopback() -> None:
    port = free_port()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        assert listener.getsockname() == ("127.0.0.1", port)
