"""One real Ray head for the whole session (marker `ray`), and helpers to submit jobs.

The head runs `ray start --head --block` on 127.0.0.1 with free ports in its own
temporary directory and process group (bot.sources.ray_local.LocalRayHead); teardown
signals that group and, by pid, whatever Ray started outside it, never `ray stop`,
and asserts that nothing it started is still running."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.diagnose import Engine
from bot.playbooks import load_builtin
from bot.sources.ray_client import TERMINAL, RayDashboard
from bot.sources.ray_local import LocalRayHead, is_running, process_table
from tests.ray.scripts import SCRIPTS


@pytest.fixture(scope="session")
def ray_head() -> Iterator[LocalRayHead]:
    head = LocalRayHead(num_cpus=2)
    head.start()
    pgid = head.pid
    temp_dir = head.temp_dir
    try:
        yield head
    finally:
        survivors = head.stop()
        assert survivors == [], f"Ray processes survived teardown: {survivors}"
        # Zombies awaiting reaping by init are dead already: only running ones count.
        leftovers = [
            pid
            for pid, (_, group) in process_table().items()
            if (group == pgid or _mentions(pid, temp_dir)) and is_running(pid)
        ]
        assert leftovers == [], f"processes of the test Ray head still running: {leftovers}"


def _mentions(pid: int, text: str) -> bool:
    try:
        return text.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


class Jobs:
    """Submits the scenario scripts through the Jobs API (JobSubmissionClient uploads
    the working_dir once) and waits on the real cluster."""

    def __init__(self, url: str, working_dir: Path) -> None:
        from ray.job_submission import JobSubmissionClient

        self.url = url
        self.working_dir = working_dir
        self.client = JobSubmissionClient(url)
        self.dashboard = RayDashboard(url)

    def submit(self, script: str, **options: Any) -> str:
        assert script in SCRIPTS, script
        return str(
            self.client.submit_job(
                entrypoint=f"python {script}",
                runtime_env={"working_dir": str(self.working_dir)},
                **options,
            )
        )

    def wait(
        self, submission_id: str, statuses: frozenset[str] = TERMINAL, timeout: float = 60
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            job = self.dashboard.get_job(submission_id) or {}
            if job.get("status") in statuses:
                return job
            if time.monotonic() > deadline:
                raise AssertionError(f"{submission_id} still {job.get('status')} after {timeout}s")
            time.sleep(0.2)

    def wait_actor(
        self, name: str, namespace: str, state: str = "ALIVE", timeout: float = 30
    ) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if any(a.state == state for a in self.dashboard.actors(name=name, namespace=namespace)):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"actor {name} in {namespace} never {state}")
            time.sleep(0.2)


@pytest.fixture(scope="session")
def jobs(ray_head: LocalRayHead, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jobs]:
    working_dir = tmp_path_factory.mktemp("ray-jobs")
    for name, code in SCRIPTS.items():
        (working_dir / name).write_text(code.lstrip())
    runner = Jobs(ray_head.url, working_dir)
    # Warm up outside the scenarios' time: upload the working_dir once, start the
    # first supervisor and driver processes.
    runner.wait(runner.submit("warmup.py"))
    yield runner
    runner.dashboard.close()


@pytest.fixture(scope="session")
def engine() -> Engine:
    return Engine(load_builtin([]))
