"""The demo's Ray jobs: small programs that fail the real way on the local Ray head.

They are written to a working directory and submitted through Ray's Jobs API
(`JobSubmissionClient` uploads the directory once), exactly as a person would submit
`python train.py`; pitcrew only sees what the cluster reports about them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bot.adapters.ray.client import TERMINAL, RayDashboard
from bot.core.inputs.ray_actors import ActorInfo

NAMESPACE = "rl-train"
REGISTER_CENTER = "trainer_register_center"
MISSING_MODULE = "flash_attn"

_CENTER = f'''
import ray

ray.init(namespace="{NAMESPACE}")


@ray.remote(num_cpus=0)
class RegisterCenter:
    def ping(self):
        return "ok"
'''

SCRIPTS: Mapping[str, str] = {
    # An earlier run's launcher: leaves its register center behind, detached, and exits.
    "launch_register_center.py": _CENTER
    + f'''
center = RegisterCenter.options(name="{REGISTER_CENTER}", lifetime="detached").remote()
print("register center up:", ray.get(center.ping.remote()))
''',
    # The training run: creates the register center in the same pinned namespace.
    "train.py": _CENTER
    + f'''
center = RegisterCenter.options(name="{REGISTER_CENTER}", namespace="{NAMESPACE}").remote()
print("register center:", ray.get(center.ping.remote()), flush=True)
for step in range(1, 4):
    print(f"step:{{step}} - actor/pg_loss:{{0.05 / step:.4f}}", flush=True)
print("training finished")
''',
    # A run whose code needs a package the cluster's image does not have.
    "train_flash.py": f"""
print("loading the model code", flush=True)
import {MISSING_MODULE}  # noqa: F401
""",
}


class Jobs:
    """Submits the demo's scripts to one Ray cluster and watches them there."""

    def __init__(self, url: str, working_dir: Path) -> None:
        from ray.job_submission import JobSubmissionClient  # heavy: only when the demo runs

        working_dir.mkdir(parents=True, exist_ok=True)
        for name, code in SCRIPTS.items():
            (working_dir / name).write_text(code.lstrip())
        self.url = url
        self.working_dir = working_dir
        self.client = JobSubmissionClient(url)
        self.dashboard = RayDashboard(url)

    def close(self) -> None:
        self.dashboard.close()

    def submit(self, script: str, **options: Any) -> str:
        return str(
            self.client.submit_job(
                entrypoint=f"python {script}",
                runtime_env={"working_dir": str(self.working_dir)},
                **options,
            )
        )

    def job(self, submission_id: str) -> dict[str, Any]:
        return self.dashboard.get_job(submission_id) or {}

    def wait(
        self,
        submission_id: str,
        statuses: frozenset[str] = TERMINAL,
        timeout: float = 120.0,
    ) -> dict[str, Any]:
        """The job once its status is one of `statuses`; TimeoutError after `timeout`."""
        found: dict[str, Any] = until(
            lambda: _in(self.job(submission_id), statuses),
            timeout,
            f"Ray job {submission_id} to finish",
        )
        return found

    def actors(self, name: str, namespace: str) -> list[ActorInfo]:
        return self.dashboard.actors(name=name, namespace=namespace)

    def wait_actor(self, name: str, namespace: str, state: str, timeout: float = 60.0) -> None:
        until(
            lambda: any(a.state == state for a in self.actors(name, namespace)),
            timeout,
            f"actor {name} in namespace {namespace} to be {state}",
        )

    def resubmission_of(self, submission_id: str) -> dict[str, Any] | None:
        """The newest job pitcrew resubmitted in place of `submission_id`, if any."""
        mine = [
            j
            for j in self.dashboard.list_jobs()
            if (j.get("metadata") or {}).get("pitcrew.resubmit_of") == submission_id
        ]
        return max(mine, key=lambda j: int(j.get("start_time") or 0)) if mine else None


def _in(job: dict[str, Any], statuses: frozenset[str]) -> dict[str, Any] | None:
    return job if job.get("status") in statuses else None


def until(check: Callable[[], Any], timeout: float, what: str, every: float = 0.2) -> Any:
    """`check()` once it is truthy; TimeoutError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(every)
