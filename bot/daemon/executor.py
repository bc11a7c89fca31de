"""The one seam for actions: which executor (`bot.daemon.ports.Executor`) runs which action,
and the one live check an offer, an approval and a run all make.

Why this exists: every action, whatever it touches, is run through four calls, each
given the `Step` (action, parameters, preview, proposal and approver):

- `plan(step)`: read live state and work out what would be done (read-only). Raises
  `ActionRefusedError` when it cannot be done now, `ActionFailedError` (or another
  `PitcrewError` of the adapter's API) when the world cannot be read;
- `check(step, plan)`: from that plan, the facts the action's spec names as
  preconditions, its preview recomputed (None when it cannot differ), the
  parameters it would be offered with now, and the live diff;
- `execute(step, plan)`: carry the plan out, idempotent per proposal id;
- `verify(step)`: whether the change took effect.

`checked` is plan-then-check: the offer's live check (`bot.daemon.live_checks`), the
approval's re-check (`bot.daemon.service`) and the runner's check before it executes
are that one call. `Registry` maps each action of the specs to its one executor:
dispatch by action name happens here and nowhere else.

What an exception met at any of the three means is decided in one place, `outcome_of`:
refused (`ActionRefusedError`), failed (another `PitcrewError`: the world said no) or
a bug (anything else: pitcrew's own fault), which is logged with its traceback, counted
in `pitcrew_internal_errors_total{stage}` (`Stage`) and said as "pitcrew bug: ..."; the
offer is then withheld, the approval refused and the run failed with those words.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bot.core.actions.approvals import LiveCheck
from bot.core.actions.specs import ACTION_SPECS, ActionSpec
from bot.core.actions.step import Step
from bot.core.errors import ActionFailedError, ActionRefusedError, PitcrewError
from bot.core.model import ActionResult
from bot.daemon.metrics import Metrics
from bot.daemon.ports import Executor

log = logging.getLogger("pitcrew.actions")


class Stage(StrEnum):
    """Where at the action seam an exception was met (the `stage` label of a bug)."""

    LIVE_CHECK = "live_check"  # the offer's live check
    APPROVAL = "approval"  # the approval's re-check
    ACTION = "action"  # the run


class Registry:
    """The executor of each action, by action id: the one dispatch. Only actions with
    a spec (`specs`, ACTION_SPECS unless a test adds one) can be registered."""

    def __init__(
        self,
        executors: Mapping[str, Executor] | None = None,
        specs: Mapping[str, ActionSpec] = ACTION_SPECS,
    ) -> None:
        self.specs = specs
        self._executors: dict[str, Executor] = {}
        for action, executor in (executors or {}).items():
            self.register(action, executor)

    def register(self, action: str, executor: Executor) -> None:
        if action not in self.specs:
            raise PitcrewError(f"cannot register an executor for unknown action {action!r}")
        self._executors[action] = executor

    def get(self, action: str) -> Executor | None:
        return self._executors.get(action)

    def actions(self) -> tuple[str, ...]:
        return tuple(sorted(self._executors))

    def preconditions(self, action: str) -> tuple[str, ...]:
        spec = self.specs.get(action)
        return spec.preconditions if spec is not None else ()


@dataclass(frozen=True, slots=True)
class Checked:
    """What `checked` found: the live check, and the plan `execute` carries out (None
    when the plan could not be made: `refused` or `failed` says why)."""

    live: LiveCheck
    plan: Any = None
    outcome: ActionResult | None = None  # REFUSED or FAILED when there is no plan


def checked(executor: Executor, step: Step) -> Checked:
    """The one live check: `plan` then `check`. A plan refused, or a world that cannot
    be read, makes every precondition of the step false with the reason. Any other
    exception propagates: its caller says what it means with `outcome_of`."""
    try:
        plan = executor.plan(step)
    except ActionRefusedError as error:
        return Checked(_not_now(error, step.preconditions), outcome=ActionResult.REFUSED)
    except PitcrewError as error:
        return Checked(_not_now(error, step.preconditions), outcome=ActionResult.FAILED)
    return Checked(executor.check(step, plan), plan)


def _not_now(error: Exception, preconditions: tuple[str, ...]) -> LiveCheck:
    reason = str(error) or type(error).__name__
    facts = dict.fromkeys(preconditions, False)
    return LiveCheck(facts=facts, reason=reason, diff=f"withheld: {reason}")


def outcome_of(
    error: BaseException, stage: Stage, what: str, metrics: Metrics | None = None
) -> tuple[ActionResult, str]:
    """The one error policy at the action seam: how an exception met in `stage` ends
    `what` (the live check of an offer, an approval, a run), and what to say. Refused
    (`ActionRefusedError`), failed (another `PitcrewError`: the adapters' API errors are
    ones) or bug (anything else): a bug is logged with its traceback, counted in
    `metrics` (`pitcrew_internal_errors_total{stage}`) and said as "pitcrew bug: ..."."""
    text = str(error) or type(error).__name__
    if isinstance(error, ActionRefusedError):
        return ActionResult.REFUSED, text
    if isinstance(error, ActionFailedError | PitcrewError):
        return ActionResult.FAILED, text
    where = traceback.extract_tb(error.__traceback__)
    at = f" at {where[-1].filename}:{where[-1].lineno}" if where else ""
    said = f"pitcrew bug: {type(error).__name__}: {text}{at}"
    log.error("%s: %s", what, said, exc_info=error)
    if metrics is not None:
        metrics.internal_errors.labels(stage=stage).inc()
    return ActionResult.BUG, said
