"""A throwaway local server: one process in its own temporary directory, on a free port.

Why this exists: the real Prometheus and PostgreSQL the tests, benchmarks and demo start
(and the tests' Alertmanager) are run the same way: the process writes its output to a
log in its directory, is ready when a check of the subclass answers, shows the end of
that log when it fails, and stops by pid (a signal, then a kill) with its directory
removed. This is that way, once; it imports no SDK, so every adapter may build on it.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Self


class LocalService:
    """A local server that a `with` block starts and stops (whatever `start` and `stop`
    mean for it: the Ray head stops a whole process group)."""

    def start(self) -> str:
        raise NotImplementedError

    def stop(self) -> object:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class LocalProcess(LocalService):
    """The lifecycle of one local server; a subclass starts it (`_launch`) and says when
    it is ready (`_ready`), what it is called in messages and which error it raises."""

    what: ClassVar[str]
    log_name: ClassVar[str]
    error: ClassVar[type[RuntimeError]]
    stop_signal: ClassVar[int] = signal.SIGTERM
    output_limit: ClassVar[int] = 2000
    grace: ClassVar[float] = 5.0
    poll_every: ClassVar[float] = 0.2

    port: int = 0
    _dir: Path | None = None
    _proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        return self._proc.pid if self._proc else 0

    def _ready(self) -> bool:
        raise NotImplementedError

    def _launch(self, args: list[str], **popen: Any) -> None:
        """Start `args` in our directory, its output going to our log."""
        assert self._dir is not None
        with (self._dir / self.log_name).open("wb") as log:
            self._proc = subprocess.Popen(
                args,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self._dir,
                **popen,
            )

    def _wait_ready(self, timeout: float) -> None:
        until = time.monotonic() + timeout
        while time.monotonic() < until:
            if self._proc is not None and self._proc.poll() is not None:
                raise self.error(f"{self.what} exited: {self.output()}")
            if self._ready():
                return
            time.sleep(self.poll_every)
        said = self.output()  # read before stop() removes the directory with the log
        self.stop()
        raise self.error(f"{self.what} was not ready in {timeout:g} s: {said}")

    def output(self, limit: int | None = None) -> str:
        """The end of the process's output (`output_limit` characters unless told)."""
        if self._dir is None or not (self._dir / self.log_name).exists():
            return ""
        text = (self._dir / self.log_name).read_text(errors="replace")
        return text[-(limit if limit is not None else self.output_limit) :]

    def stop(self, grace: float | None = None) -> None:
        """Signal our process by pid (`stop_signal`, then a kill), and remove its directory."""
        wait = grace if grace is not None else self.grace
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(self.stop_signal)
            try:
                self._proc.wait(wait)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(wait)
        self._proc = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the server binds it next)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
