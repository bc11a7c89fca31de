"""The Ray job the live-fact tests share (tests/daemon/test_live_facts.py and
test_live_checks.py): a job whose driver hit verl's register-center clash, its diagnosis
(whose kill and resubmit wait on live facts), and a daemon config whose `ray.*` actions
run an executor kind the test registers."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from bot.core.inputs.reader import read_stream
from bot.core.model import Diagnosis
from tests.support.daemon import engine

SUBMISSION = "raysubmit_clash1"
JOB = (
    '{"type": "SUBMISSION", "submission_id": "' + SUBMISSION + '", "status": "FAILED", '
    '"entrypoint": "python train.py", "message": "Job entrypoint command failed with exit '
    "code 1, last available logs (truncated to 20,000 chars):\\nValueError: The name "
    "trainer_register_center (namespace=rl-train) is already taken. Please use a different "
    "name or get the existing actor using ray.get_actor('trainer_register_center', "
    'namespace=\'rl-train\')", "error_type": "JOB_ENTRYPOINT_COMMAND_ERROR"}\n'
)
KILL_FACTS = ("ray.holder_explicit", "ray.not_live_verl", "ray.actor_stale", "ray.namespace_idle")


def clash_parts() -> list[Any]:
    """The job's record, read as `GET /api/jobs/` answers it."""
    return list(read_stream(io.BytesIO(JOB.encode()), "job.json"))


def clash() -> Diagnosis:
    return engine().diagnose(clash_parts())


def offer(diagnosis: Diagnosis, action: str) -> Any:
    return next(a for a in diagnosis.actions if a.action == action)


def config(tmp_path: Path, ray_kind: str, *extra: str) -> Path:
    """A daemon config with everything in `tmp_path`, the console chat and `ray.*` run by
    the executor kind `ray_kind`; each of `extra` is one more top-level YAML line."""
    path = tmp_path / "pitcrew.yaml"
    lines = "".join(f"{line}\n" for line in extra)
    path.write_text(
        f"""\
store: {{path: {tmp_path / "state.db"}}}
http: {{port: 0}}
chat: {{kind: console}}
notify: {{group_wait: 0s, group_interval: 1s}}
{lines}approvals:
  approvers: [{{users: ["console:tester"]}}]
actions:
  executors: {{"ray.*": {ray_kind}}}
scheduler: {{tick: 200ms, approved: 200ms, outbox: 1s, expiry: 1s}}
"""
    )
    return path
