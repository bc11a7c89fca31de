"""The pipeline's pure work runs on a worker within a budget per step of one item:
what finishes in time is answered as if called inline, what does not is given up at
the budget (`OverBudgetError`, naming the step) while the next call goes to a new
worker at once, and each item starts with every step's budget whole again."""

from __future__ import annotations

import threading
import time

import pytest

from bot.daemon.budget import Budget, OverBudgetError


def _sleeping(seconds: float, answer: str = "done") -> str:
    time.sleep(seconds)
    return answer


def test_work_within_its_budget_is_answered_from_a_worker() -> None:
    budget = Budget(1.0)
    assert budget.run("correlation", lambda: threading.current_thread().name) == (
        "pitcrew-budgeted"
    )
    assert budget.abandoned == 0


def test_without_a_budget_work_runs_inline() -> None:
    budget = Budget(0.0)
    assert budget.run("rendering", lambda: threading.current_thread().name) == (
        threading.current_thread().name
    )


def test_work_over_its_budget_is_given_up_at_the_budget_and_the_next_call_is_not_held() -> None:
    budget = Budget(0.2)
    heard: list[str] = []
    budget.on_abandon(heard.append)
    started = time.monotonic()
    with pytest.raises(OverBudgetError) as over:
        budget.run("rendering", lambda: _sleeping(2.0))
    given_up_after = time.monotonic() - started
    budget.begin()
    assert budget.run("rendering", lambda: "next") == "next"
    next_after = time.monotonic() - started
    assert str(over.value) == "rendering took over its budget of 0.2s"
    assert over.value.stage == "rendering"
    assert 0.2 <= given_up_after < 0.2 + 0.5
    assert next_after < 1.0  # the abandoned worker still sleeps: a new one answered
    assert (budget.abandoned, heard) == (1, ["rendering"])


@pytest.mark.parametrize(
    ("began_between", "second"),
    [(False, "over"), (True, "done")],
    ids=["one-item-spends-it", "the-next-item-has-it-whole"],
)
def test_a_step_has_its_budget_once_per_item(began_between: bool, second: str) -> None:
    budget = Budget(0.6)
    budget.begin()
    assert budget.run("correlation", lambda: _sleeping(0.35)) == "done"
    assert budget.run("classification", lambda: _sleeping(0.35)) == "done"  # a budget of its own
    if began_between:
        budget.begin()
    try:
        answer = budget.run("correlation", lambda: _sleeping(0.35))
    except OverBudgetError:
        answer = "over"
    assert answer == second


def test_what_the_work_raises_is_raised_to_the_caller() -> None:
    def broken() -> str:
        raise ZeroDivisionError("division by zero")

    budget = Budget(1.0)
    with pytest.raises(ZeroDivisionError, match="division by zero"):
        budget.run("correlation", broken)
    assert budget.run("correlation", lambda: "still working") == "still working"
    assert budget.abandoned == 0
