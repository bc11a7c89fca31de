"""A throwaway Ray head on loopback: started in its own process group, stopped by pid.

Why this exists: the Ray tests, the Ray benchmark and (later) `pitcrew run --ray
local` / `pitcrew demo` need a real Ray cluster that is theirs alone: free ports,
its own temporary directory, and a stop that leaves nothing running without
touching any other Ray on the machine. So it never calls `ray stop` (which stops
every Ray of the user) and never kills by name: it signals its own process group
and then, by pid, whatever it started that left the group (Ray starts job drivers
in new sessions), found through /proc by parentage, process group or its unique
temporary directory.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

from bot.adapters.local_process import LocalService

_PROC = Path("/proc")
_PORT_NAMES = (
    "port",
    "dashboard-port",
    "node-manager-port",
    "object-manager-port",
    "ray-client-server-port",
    "dashboard-agent-listen-port",
    "dashboard-agent-grpc-port",
    "runtime-env-agent-port",
    "metrics-export-port",
)
_WORKER_PORTS = 200


class LocalRayError(RuntimeError):
    """The local Ray head did not start (the message holds the end of its output)."""


class LocalRayHead(LocalService):
    """`ray start --head --block` on 127.0.0.1 with free ports in a temporary directory."""

    def __init__(
        self,
        *,
        num_cpus: int = 2,
        temp_parent: str = "/tmp",
        env: dict[str, str] | None = None,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.num_cpus = num_cpus
        self.temp_parent = temp_parent
        self.extra_env = dict(env or {})
        self.extra_args = extra_args
        self.temp_dir = ""
        self.ports: dict[str, int] = {}
        self.process: subprocess.Popen[bytes] | None = None
        self.survivors: list[int] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.ports['dashboard-port']}"

    @property
    def pid(self) -> int:
        return self.process.pid if self.process else 0

    def start(self, timeout: float = 90.0) -> str:
        """Start the head and wait until its Jobs API answers; returns the dashboard URL."""
        # A short path: Ray's unix sockets live below it and must stay under 107 bytes.
        ray = str(Path(sys.executable).with_name("ray"))
        if not os.access(ray, os.X_OK):
            raise LocalRayError(
                f"no `ray` command beside {sys.executable}: a local Ray head needs Ray, "
                "which pitcrew's runtime does not install: pip install 'pitcrew[demo]'"
            )
        self.temp_dir = tempfile.mkdtemp(prefix="pcray-", dir=self.temp_parent)
        self.ports = _free_ports(_PORT_NAMES)
        low = _free_range(_WORKER_PORTS)
        args = [
            ray,
            "start",
            "--head",
            "--block",
            "--node-ip-address=127.0.0.1",
            "--dashboard-host=127.0.0.1",
            "--include-dashboard=true",
            f"--num-cpus={self.num_cpus}",
            f"--temp-dir={self.temp_dir}",
            f"--min-worker-port={low}",
            f"--max-worker-port={low + _WORKER_PORTS - 1}",
            "--disable-usage-stats",
            *(f"--{name}={port}" for name, port in self.ports.items()),
            *self.extra_args,
        ]
        env = dict(os.environ)
        # Job entrypoints run `python`: make it this interpreter, which has Ray.
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        env.update(self.extra_env)
        output = open(Path(self.temp_dir) / "ray-start.log", "wb")  # noqa: SIM115
        with output:
            self.process = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self.url

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise LocalRayError(
                    f"ray start exited ({self.process.returncode}):\n{self.output()}"
                )
            with contextlib.suppress(requests.RequestException):
                if requests.get(self.url + "/api/jobs/", timeout=2).status_code == 200:
                    return
            time.sleep(0.25)
        raise LocalRayError(f"the Ray dashboard did not answer in {timeout:g}s:\n{self.output()}")

    def output(self, limit: int = 4000) -> str:
        path = Path(self.temp_dir) / "ray-start.log"
        try:
            return path.read_bytes()[-limit:].decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self, grace: float = 3.0) -> list[int]:
        """Stop everything this head started; returns the pids that survived SIGKILL
        (none, normally), also kept in `survivors`. Idempotent."""
        process = self.process
        if process is None:
            return self.survivors
        pgid = process.pid  # start_new_session: the leader's pid is the group id
        ours = self._ours(pgid)
        started = {pid: _start_time(pid) for pid in ours}
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(grace)
        for pid in self._ours(pgid) - ours:
            started[pid] = _start_time(pid)
            ours.add(pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        for pid in sorted(ours):
            # Same start time as when found: never a pid reused by someone else since.
            if started[pid] is not None and _start_time(pid) == started[pid]:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(5)
        deadline = time.monotonic() + 5
        alive = [pid for pid in ours if is_running(pid)]
        while alive and time.monotonic() < deadline:
            time.sleep(0.1)
            alive = [pid for pid in alive if is_running(pid)]
        self.survivors = sorted(alive)
        self.process = None
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        return self.survivors

    def _ours(self, pgid: int) -> set[int]:
        """Pids of this head's processes: descendants of the head, members of its process
        group, and anything whose command line or working directory is in its temp dir."""
        table = process_table()
        children: dict[int, list[int]] = {}
        for pid, (ppid, _) in table.items():
            children.setdefault(ppid, []).append(pid)
        found: set[int] = set()
        stack = [pgid]
        while stack:
            pid = stack.pop()
            for child in children.get(pid, []):
                if child not in found:
                    found.add(child)
                    stack.append(child)
        found |= {pid for pid, (_, group) in table.items() if group == pgid}
        found |= {pid for pid in table if self._in_temp_dir(pid)}
        found.discard(os.getpid())
        return found

    def _in_temp_dir(self, pid: int) -> bool:
        if not self.temp_dir:
            return False
        try:
            cmdline = (_PROC / str(pid) / "cmdline").read_bytes()
        except OSError:
            return False
        if self.temp_dir.encode() in cmdline:
            return True
        try:
            return os.readlink(_PROC / str(pid) / "cwd").startswith(self.temp_dir)
        except OSError:
            return False


def process_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, process group) of every process /proc shows (Linux)."""
    table: dict[int, tuple[int, int]] = {}
    if not _PROC.is_dir():
        return table
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) >= 3:
            table[int(entry.name)] = (int(fields[1]), int(fields[2]))
    return table


def _start_time(pid: int) -> int | None:
    """A process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[19]) if len(fields) > 19 else None


def is_running(pid: int) -> bool:
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[:1] != ["Z"]


def _free_ports(names: tuple[str, ...]) -> dict[str, int]:
    sockets: list[socket.socket] = []
    try:
        for _ in names:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return {name: s.getsockname()[1] for name, s in zip(names, sockets, strict=True)}
    finally:
        for s in sockets:
            s.close()


def _free_range(size: int, attempts: int = 50) -> int:
    """The first port of `size` consecutive free ports between 20000 and 30000."""
    for _ in range(attempts):
        low = random.randrange(20000, 30000 - size)
        if all(_port_free(port) for port in range(low, low + size)):
            return low
    raise LocalRayError(f"no {size} consecutive free ports found for Ray workers")


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
