"""Submitting the scenario scripts to a real Ray head and waiting on what they do; the
session's head and job runner are fixtures of tests/conftest.py (`ray_head`, `jobs`),
shared by the Ray tests and the Slack end-to-end tests."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bot.adapters.ray.client import TERMINAL, RayDashboard
from tests.support.ray_scripts import SCRIPTS


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


def write_scripts(directory: Path) -> None:
    for name, code in SCRIPTS.items():
        (directory / name).write_text(code.lstrip())
