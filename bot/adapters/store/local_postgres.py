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
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from bot.adapters.local_process import LocalProcess, free_port

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
class LocalPostgres(LocalProcess):
    """`postgres` with a fresh cluster in a temporary directory, on a free port; stopped
    by an immediate shutdown (no checkpoint: the data goes with the directory)."""

    what = "postgres"
    log_name = "postgres.log"
    error = LocalPostgresError
    stop_signal = signal.SIGQUIT
    grace = 10.0
    poll_every = 0.1

    temp_parent: str = "/tmp"
    port: int = 0
    _dir: Path | None = None
    _proc: subprocess.Popen[bytes] | None = None
    _made: int = 0
    _as: dict[str, Any] = field(default_factory=dict)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}:{PASSWORD}@127.0.0.1:{self.port}/{database}"

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
        self.port = free_port()
        settings = [arg for s in SERVER_SETTINGS for arg in ("-c", s)]
        self._launch(
            [str(bindir / "postgres"), "-D", str(data), "-p", str(self.port), *settings],
            **self._as,
        )
        self._wait_ready(timeout)
        return self.url()

    def database(self) -> str:
        """A new empty database; its URL."""
        self._made += 1
        name = f"pitcrew_{os.getpid()}_{self._made}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def _ready(self) -> bool:
        try:
            with psycopg.connect(self.url(), connect_timeout=1):
                return True
        except psycopg.OperationalError:
            return False


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
