"""The built-in `echo` executor: runs nothing, records each execution.

Why this exists: the daemon's approval and execution path (policy, re-validation,
compare-and-swap, ledger, card updates, restart safety) must be testable and
demonstrable before the Kubernetes and Ray executors exist, and without a
cluster. Select it per action in the config:

    actions:
      executors: {"k8s.bump_memory": echo}
      echo: {record: /tmp/pitcrew-echo.log, delay: 0s}

It claims every precondition holds and that the preview is unchanged, so never
select it for a real cluster. Each execution appends one JSON line to `record`.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from bot.core.actions.approvals import LiveCheck
from bot.core.actions.step import Step
from bot.daemon.ports import Verification


class EchoExecutor:
    """Any action: it plans nothing, finds every precondition holding and the preview
    unchanged, and records each execution."""

    def __init__(self, record: Path | None = None, delay: float = 0.0) -> None:
        self.record = record
        self.delay = delay
        self.executed: list[str] = []
        self._lock = threading.Lock()

    def plan(self, step: Step) -> None:
        return None

    def check(self, step: Step, plan: None) -> LiveCheck:
        facts = dict.fromkeys(step.preconditions, True)
        return LiveCheck(facts=facts, preview=step.preview)

    def execute(self, step: Step, plan: None) -> str:
        if self.delay:
            time.sleep(self.delay)
        with self._lock:
            self.executed.append(step.proposal_id)
            if self.record is not None:
                line = {"proposal": step.proposal_id, "action": step.action}
                with self.record.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(line, sort_keys=True) + "\n")
                    out.flush()
                    os.fsync(out.fileno())
        return f"echo: {step.preview or step.action}"

    def verify(self, step: Step) -> Verification:
        return Verification(True, "echo: nothing to verify")
