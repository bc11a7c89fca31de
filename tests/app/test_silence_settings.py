"""`pitcrew config check` refuses a Silence button longer than the policy allows: every
click would be refused (chat.slack.silence_for above approvals.max_silence); and a
silencer's workload pattern that no `namespace/kind/name` can match."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.app.cli_app import app as cli_app


@pytest.mark.parametrize(
    ("text", "exit_code", "said"),
    [
        (
            "chat: {slack: {silence_for: 8h}}\napprovals: {max_silence: 2h}\n",
            2,
            "pitcrew.yaml:1: (top level): chat.slack.silence_for (8h) is longer than "
            "approvals.max_silence (2h): every Silence click would be refused",
        ),
        (
            "chat: {slack: {silence_for: 90m}}\napprovals: {max_silence: 1h}\n",
            2,
            "pitcrew.yaml:1: (top level): chat.slack.silence_for (90m) is longer than "
            "approvals.max_silence (1h): every Silence click would be refused",
        ),
        ("chat: {slack: {silence_for: 2h}}\napprovals: {max_silence: 2h}\n", 0, ""),
        (
            "approvals:\n  silencers:\n    - {users: [U1], workloads: [nightly]}\n",
            2,
            "pitcrew.yaml:3: approvals.silencers[0].workloads: workload 'nightly' matches no "
            "workload: a workload is namespace/kind/name (ml-train/rayjob/nightly or */*/nightly)",
        ),
        ("approvals:\n  silencers:\n    - {users: [U1], workloads: [ml-train/*]}\n", 0, ""),
    ],
    ids=["8h-over-2h", "90m-over-1h", "equal", "workload-matching-nothing", "workloads"],
)
def test_a_silence_setting_that_would_refuse_every_click_is_refused(
    tmp_path: Path, text: str, exit_code: int, said: str
) -> None:
    path = tmp_path / "pitcrew.yaml"
    path.write_text(text)
    checked = CliRunner().invoke(cli_app, ["config", "check", str(path)])
    assert checked.exit_code == exit_code, checked.output
    assert said in checked.output
