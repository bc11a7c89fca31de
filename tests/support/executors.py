"""Driving one executor the way the daemon does (`bot.daemon.executor`): a `Step` of
parameters, the one live check (`checked`), `execute` of its plan, `verify`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.core.actions.specs import preconditions_of
from bot.core.actions.step import Step
from bot.daemon.executor import checked
from bot.daemon.ports import Executor


def step(executor: Any, params: Any, proposal_id: str = "", approver: str = "") -> Step:
    action = executor.action
    return Step(action, params, "", proposal_id, approver, preconditions_of(action))


def look(executor: Executor, params: Mapping[str, Any] | Any) -> tuple[dict[str, bool], str]:
    """The live check as an offer gets it: the facts, and the live diff (`withheld: why`
    when the plan was refused)."""
    live = checked(executor, step(executor, params)).live
    return dict(live.facts), live.diff


def run(executor: Executor, params: Any, proposal_id: str, approver: str = "") -> str:
    """Plan, then execute that plan, for `proposal_id` approved by `approver`; raises what
    the plan or the execution raises."""
    at = step(executor, params, proposal_id, approver)
    return executor.execute(at, executor.plan(at))


def verified(executor: Executor, params: Any) -> bool:
    return executor.verify(step(executor, params)).ok
