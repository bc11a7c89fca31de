"""Session fixtures shared by the end-to-end tests: one real Ray head (marker `ray`)
and the runner that submits the scenario scripts to it, used by tests/e2e/ray, by the
Slack end-to-end tests in tests/e2e/slack and by tests/e2e/kubernetes. Nothing starts
unless a test asks for them.

The head runs `ray start --head --block` on 127.0.0.1 with free ports in its own
temporary directory and process group (bot.adapters.ray.local.LocalRayHead); teardown
signals that group and, by pid, whatever Ray started outside it, never `ray stop`,
and asserts that nothing it started is still running."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.adapters.ray.local import LocalRayHead, is_running, process_table
from tests.support.ray_jobs import Jobs, write_scripts


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


@pytest.fixture(scope="session")
def jobs(ray_head: LocalRayHead, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jobs]:
    working_dir = tmp_path_factory.mktemp("ray-jobs")
    write_scripts(working_dir)
    runner = Jobs(ray_head.url, working_dir)
    # Warm up outside the scenarios' time: upload the working_dir once, start the
    # first supervisor and driver processes.
    runner.wait(runner.submit("warmup.py"))
    yield runner
    runner.dashboard.close()
