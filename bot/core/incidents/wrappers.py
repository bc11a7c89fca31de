"""A failed run whose findings only say that it failed, not why: pitcrew does not know.

Why this exists: a RayJob that failed for a reason no playbook knows (a license server
refusing connections) was carded as "Application error in the job's own code", rated
strong, on the entrypoint's exit-code line alone, with the line that said why dropped.
That line is what a person needs. KubeRay's `AppFailed`, a Ray job `FAILED` and the
Jobs API's "Job entrypoint command failed with exit code N" / "Job failed due to an
application error" are wrappers (docs/failure-classes.md, `rayjob_cr_failure`: "AppFailed
→ read the driver logs"): they say that the run failed. When they are all an incident has,
its card says "pitcrew does not know why", shows the failure-looking lines of its
evidence no playbook knows (`Incident.unexplained`), and offers nothing: a rerun of a
failure nobody understands fails the same way. The submitter pod's own status line
("container ray-job-submitter terminated: Error (exit code 1)") is the same wrapper
as the pod sees it, and is never one of those lines (`says_only_it_failed`). Pure.
"""

from __future__ import annotations

import dataclasses
import re

from bot.core.model import Diagnosis, Finding
from bot.core.taxonomy import Category

# RayJob, Ray job and RayCluster statuses that say it failed and nothing of why.
_WRAPPING_REASONS = frozenset({"", "AppFailed", "Failed", "FAILED", "failed"})
# What an application error's wrapper signatures capture (the exit code): a capture
# beyond these names something of the job's own (its exception, script, command).
_WRAPPER_CAPTURES = frozenset({"exit_code", "entrypoint_exit"})

UNKNOWN_WHY = "pitcrew does not know why it failed"

# A container's end as its pod's status says it with nothing of why: Kubernetes' `Error`
# (or no reason) and the exit code, no termination message (bot.core.inputs.pods).
_BARE_EXIT = re.compile(
    r"container \S+ (?:last )?terminated: (?:Error|no reason given)(?: \(exit code \d+\))?"
)


def is_wrapper(finding: Finding) -> bool:
    """A finding that only says a run failed: a RayJob or Ray job failed status, or an
    application error that names nothing of the job's own."""
    if finding.category is Category.RAYJOB_CR_FAILURE and finding.reason not in _WRAPPING_REASONS:
        return False
    wrapping = (Category.RAYJOB_CR_FAILURE, Category.APPLICATION_ERROR)
    return finding.category in wrapping and set(finding.captures) <= _WRAPPER_CAPTURES


def says_only_it_failed(line: str) -> bool:
    """Whether a line only says that a container exited (its status's reason `Error` and
    exit code): a wrapper's line, whichever source read it."""
    return _BARE_EXIT.fullmatch(" ".join(line.split())) is not None


def cause_unknown(diagnosis: Diagnosis) -> bool:
    """Whether the diagnosis has findings and every one is a wrapper."""
    found = [r.finding for r in diagnosis.findings]
    return bool(found) and all(is_wrapper(f) for f in found)


def unknown_withheld(diagnosis: Diagnosis) -> Diagnosis:
    """With the cause unknown, every offer withheld saying so; else as it is."""
    if not cause_unknown(diagnosis) or not any(o.offered for o in diagnosis.actions):
        return diagnosis
    why = f"{UNKNOWN_WHY}: run again, it would most likely fail the same way"
    actions = tuple(
        dataclasses.replace(o, offered=False, reason=why, pending_fact="") if o.offered else o
        for o in diagnosis.actions
    )
    return dataclasses.replace(diagnosis, actions=actions)
