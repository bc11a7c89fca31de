"""`pitcrew demo`'s exit status: a scenario the person declined at the prompt is their
choice, said in the summary, and no failure (exit 0); one that did not reach its end is
(exit 1, naming it)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from bot.app.demo.runner import ScenarioDeclinedError, ScenarioFailedError
from bot.app.demo.screen import ScenarioRow, Screen, summary
from bot.app.demo.session import _exit_code, _run


def declining(out: ScenarioRow) -> None:
    out.cause = "named_actor_conflict"
    raise ScenarioDeclinedError(
        "ray.kill_actor → ray.resubmit_job declined at the prompt: nothing was run"
    )


def failing(out: ScenarioRow) -> None:
    raise ScenarioFailedError("the card's root cause is none")


def screen() -> tuple[Screen, io.StringIO]:
    out = io.StringIO()
    return Screen(Console(file=out, width=100, highlight=False)), out


def test_answering_no_at_the_prompt_ends_the_scenario_and_exits_0(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shown, out = screen()
    row = ScenarioRow("stale named actor (Ray)")
    _run(declining, row, shown)
    assert (row.declined, row.ok, row.result) == (
        True,
        False,
        "ray.kill_actor → ray.resubmit_job declined at the prompt: nothing was run",
    )
    assert _exit_code(shown, [row], [], 0) == 0
    assert capsys.readouterr().err == ""
    summary(shown.console, [row], [])
    table = out.getvalue()[out.getvalue().index("pitcrew demo: summary") :]
    assert "│ – ray.kill_actor" in table  # declined, neither ✓ nor ✗
    assert "✗" not in table


def test_a_scenario_that_did_not_reach_its_end_exits_1_naming_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shown, _ = screen()
    row = ScenarioRow("missing dependency (Ray)")
    _run(failing, row, shown)
    assert _exit_code(shown, [row], [], 0) == 1
    assert capsys.readouterr().err == (
        "pitcrew demo: scenario 'missing dependency (Ray)' did not reach its expected end: "
        "stopped: the card's root cause is none\n"
    )
