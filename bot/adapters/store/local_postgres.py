"""A throwaway PostgreSQL on loopback, for the tests and benchmarks of the shared store.

Why this exists: the PostgreSQL store must be tested against a real server (Debian's
`postgresql` package, which `make postgresql` installs), not a stand-in. This makes a
cluster with `initdb` in a temporary directory, starts `postgres` on a free 127.0.0.1
port (no Unix socket, no fsync: nothing here outlives the session), hands out a fresh
database per caller (`database()`), and stops the server by pid. PostgreSQL refuses
to run as root: run as root (as CI is), the cluster belongs to the `postgres` user the
package creates, and the server runs as that user.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import psycopg

SUPERUSER = "pitcrew"
PASSWORD = "pitcrew-local-only"  # password authentication, as a real server has (scram)
SERVER_SETTINGS = (
    "listen_addresses=127.0.0.1",
    "unix_socket_directories=",
    "fsync=off",
    "synchronous_commit=off",
    "full_page_writes=off",
    "max_connections=200",
)


class LocalPostgresError(RuntimeError):
    """PostgreSQL is missing or did not start (the message says which, and its output)."""


def binaries() -> Path | None:
    """The directory of `initdb` and `postgres`: on the PATH, else Debian's newest
    /usr/lib/postgresql/<version>/bin (the package does not put them on the PATH)."""
    found = shutil.which("initdb")
    if found and shutil.which("postgres"):
        return Path(found).resolve().parent
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    return Path(candidates[-1]).parent if candidates else None


def installed() -> bool:
    return binaries() is not None


@dataclass
class LocalPostgres:
    """`postgres` with a fresh cluster in a temporary directory, on a free port."""

    temp_parent: str = "/tmp"
    port: int = 0
    _dir: Path | None = None
    _proc: subprocess.Popen[bytes] | None = None
    _made: int = 0
    _as: dict[str, Any] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self._proc.pid if self._proc else 0

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}:{PASSWORD}@127.0.0.1:{self.port}/{database}"

    def __enter__(self) -> LocalPostgres:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self, timeout: float = 60.0) -> str:
        bindir = binaries()
        if bindir is None:
            raise LocalPostgresError(
                "PostgreSQL is not installed (apt-get install -y postgresql, or make postgresql)"
            )
        self._as = _unprivileged()
        self._dir = Path(tempfile.mkdtemp(prefix="pitcrew-pg-", dir=self.temp_parent))
        data = self._dir / "data"
        secret = self._dir / "password"
        secret.write_text(PASSWORD + "\n")
        if self._as:
            os.chown(self._dir, self._as["user"], self._as["group"])
            os.chown(secret, self._as["user"], self._as["group"])
        init = subprocess.run(
            [str(bindir / "initdb"), "-D", str(data), "-U", SUPERUSER, f"--pwfile={secret}",
             "--auth=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync"],
            capture_output=True, text=True, timeout=timeout, cwd=self._dir, **self._as,
        )  # fmt: skip
        if init.returncode != 0:
            raise LocalPostgresError(f"initdb failed: {(init.stdout + init.stderr)[-2000:]}")
        self.port = _free_port()
        log = (self._dir / "postgres.log").open("wb")
        settings = [arg for s in SERVER_SETTINGS for arg in ("-c", s)]
        self._proc = subprocess.Popen(
            [str(bindir / "postgres"), "-D", str(data), "-p", str(self.port), *settings],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self._dir,
            **self._as,
        )  # fmt: skip
        log.close()
        self._wait_ready(timeout)
        return self.url()

    def database(self) -> str:
        """A new empty database; its URL."""
        self._made += 1
        name = f"pitcrew_{os.getpid()}_{self._made}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def _wait_ready(self, timeout: float) -> None:
        until = time.monotonic() + timeout
        while time.monotonic() < until:
            if self._proc is not None and self._proc.poll() is not None:
                raise LocalPostgresError(f"postgres exited: {self.output()}")
            try:
                with psycopg.connect(self.url(), connect_timeout=1):
                    return
            except psycopg.OperationalError:
                time.sleep(0.1)
        self.stop()
        raise LocalPostgresError(f"postgres was not ready in {timeout:g} s: {self.output()}")

    def output(self, limit: int = 2000) -> str:
        if self._dir is None or not (self._dir / "postgres.log").exists():
            return ""
        return (self._dir / "postgres.log").read_text(errors="replace")[-limit:]

    def stop(self, grace: float = 10.0) -> None:
        """Stop our server by pid, and remove its directory. An immediate shutdown (no
        checkpoint: the data goes with the directory), then a kill."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGQUIT)
            try:
                self._proc.wait(grace)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(grace)
        self._proc = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def _unprivileged() -> dict[str, Any]:
    """Popen's arguments to run as the `postgres` user when we are root, else none."""
    if os.geteuid() != 0:
        return {}
    try:
        account = pwd.getpwnam("postgres")
    except KeyError:
        raise LocalPostgresError(
            "PostgreSQL refuses to run as root and there is no `postgres` user "
            "(the postgresql package creates it: apt-get install -y postgresql)"
        ) from None
    return {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
