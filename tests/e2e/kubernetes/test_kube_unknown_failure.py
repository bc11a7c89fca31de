"""A RayJob that fails with a cause no playbook knows, live on kmock's emulator through the
official `kubernetes` client: `pitcrew run` with actions configured reads the failed
submitter's log (the driver log) and posts a card saying pitcrew does not know why, with
the line that looks like the cause (a license server refusing the connection), never the
entrypoint's exit-code wrapper as the evidence, and offers nothing."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.app import wiring
from bot.app.demo import seed
from bot.app.settings.loading import load
from tests.e2e.kubernetes.conftest import Emulator, wait_for, write_daemon_config
from tests.support.daemon import RecordingChat, engine

pytestmark = [pytest.mark.kube, pytest.mark.slow]

LICENSE_LOG = (
    b"(TaskRunner pid=1187) step 0: loading the tokenizer\n"
    b"(TaskRunner pid=1187) ERROR flexlm: cannot check out feature 'sim' from "
    b"27000@license.corp.example: connection refused\n"
    b"Job entrypoint command failed with exit code 1, last available logs (truncated to "
    b"20,000 chars):\n"
)
TITLE = "pitcrew does not know why it failed: RayJob ml-train/sim-train"


def failed_rayjob() -> dict[str, Any]:
    """The seed's RayJob renamed, failed with only the entrypoint's exit code to say why."""
    rayjob = copy.deepcopy(seed.seed_rayjob())
    rayjob["metadata"].update(name="sim-train", uid="uid-sim-train")
    rayjob["status"] = {
        "jobDeploymentStatus": "Failed",
        "jobStatus": "FAILED",
        "reason": "AppFailed",
        "message": "Job entrypoint command failed with exit code 1, last available logs "
        "(truncated to 20,000 chars):\nsetup done\n",
        "jobId": "raysubmit_L1c3nse9Xk",
    }
    return rayjob


def test_a_failed_rayjob_of_unknown_cause_gets_a_card_naming_the_line_and_no_action(
    tmp_path: Path, kuberay: Emulator
) -> None:
    path = write_daemon_config(tmp_path, kuberay)
    settings: dict[str, Any] = yaml.safe_load(path.read_text())
    executors = {"k8s.*": "kubernetes", "kuberay.*": "kuberay", "ray.*": "ray"}
    settings["actions"] = {"enabled": True, "executors": executors}
    settings["approvals"] = {"approvers": [{"users": ["console:tester"]}]}
    path.write_text(yaml.safe_dump(settings))
    rayjob = failed_rayjob()
    job, pod = seed.submitter(rayjob)
    kuberay.serve_log(seed.NS, pod["metadata"]["name"], LICENSE_LOG)
    for obj in (rayjob, job, pod):
        kuberay.create(obj)
    chat = RecordingChat()
    daemon = wiring.build(load(path, {}), chat=chat, engine=engine())
    daemon.start()
    try:
        card = wait_for(
            lambda: [c.report for c in chat.calls if c.report and c.report.title == TITLE],
            60,
            "the card of the failed RayJob",
        )[-1]
        assert card.cause == (
            "RayJob ml-train/sim-train failed (its entrypoint exited with code 1) and pitcrew "
            "does not know why: the lines below look like the cause."
        )
        assert card.evidence == (  # not the pod's nor the entrypoint's exit code
            "pod/sim-train-x9z2k [ray-job-submitter] current log:2: (TaskRunner pid=1187) "
            "ERROR flexlm: cannot check out feature 'sim' from 27000@license.corp.example: "
            "connection refused",
        )
        assert card.primary.startswith("likely application_error: ")  # never strong
        assert (
            card.sureness
            == "unknown: only the job's failed status and exit code say that it failed"
        )
        assert card.actions == ()
        (view,) = daemon.service.incidents()
        assert daemon.store.proposals_for_incident(view.incident.id) == ()
    finally:
        daemon.stop()
