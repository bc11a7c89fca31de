"""The console chat's card in a pipe or a pod's log, where no width is known: whole
lines, none wrapped at 80 columns; with a width (or on a terminal), the panel."""

from __future__ import annotations

import io

from bot.adapters.console.chat import ConsoleChat
from bot.core.model import Report, Severity

LONG = "x" * 120
REPORT = Report(
    title=f"Pod OOMKilled at its memory limit: RayCluster ml-train/{LONG}",
    severity=Severity.CRITICAL,
    status="open",
    where={"namespace": "ml-train"},
    primary="pod_oom_killed: Pod OOMKilled at its memory limit",
    secondary=(),
    evidence=(f"worker.describe.txt: container ray-worker last terminated: OOMKilled {LONG}",),
    diagnosis="",
    cause=f"Pod ml-train/{LONG} was OOMKilled at its 16Gi memory limit (exit code 137).",
)


def test_in_a_pipe_a_card_is_whole_lines() -> None:
    out = io.StringIO()
    ConsoleChat(out).post("pitcrew", REPORT)
    assert out.getvalue().splitlines() == [
        f"== Pod OOMKilled at its memory limit: RayCluster ml-train/{LONG} [open] (card pitcrew/1)",
        "namespace: ml-train",
        f"What broke: Pod ml-train/{LONG} was OOMKilled at its 16Gi memory limit (exit code 137).",
        "Root cause: pod_oom_killed: Pod OOMKilled at its memory limit",
        f"  worker.describe.txt: container ray-worker last terminated: OOMKilled {LONG}",
    ]


def test_with_a_width_the_card_is_a_panel_of_that_width() -> None:
    out = io.StringIO()
    ConsoleChat(out, width=100).post("pitcrew", REPORT)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("╭─ Pod OOMKilled")
    assert {len(line) for line in lines} == {100}


def test_a_thread_reply_in_a_pipe_is_one_line() -> None:
    out = io.StringIO()
    ConsoleChat(out).reply("pitcrew/1", f"the plan stopped at step 2 of 2: {LONG}")
    assert out.getvalue() == f"  ↳ [pitcrew/1] the plan stopped at step 2 of 2: {LONG}\n"
