"""The runner: runs an approved action exactly once, and says how it ended.

Why this exists: an approval is a promise that the action runs once, after a
person said so, and that a crash never makes it run twice. The executors
(`bot.daemon.executor`, one per action in the `Registry`) know how to plan, check,
execute and verify one action; this module owns the order around them:

    APPROVED --CAS--> RUNNING (only the daemon that wins it runs it)
    ledger STARTED -> checked (plan, check, revalidate) -> execute -> verify
    ledger and proposal: SUCCEEDED, or FAILED as refused | failed | bug

How an action ended is told apart everywhere (`ActionResult`): *refused* (a
precondition no longer holds: nothing was changed), *failed* (the world said no),
*bug* (pitcrew's own fault: logged with its traceback). A proposal found RUNNING
after a restart was interrupted; the pipeline reports it and it is never run again
(`approvals.recover`), except under leader election, where a new leader finishes what
the old one was running (`take_over`). An action with no executor fails with a reason saying so.

Executor kinds are named in the config (`actions.executors`); which kinds exist
and how each is built is `bot.app.factories`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from bot.core.actions import approvals
from bot.core.actions.approvals import SYSTEM_ACTOR
from bot.core.actions.step import Step, approver_of
from bot.core.model import (
    ActionResult,
    LedgerEntry,
    PlanStep,
    Proposal,
    ProposalState,
    StepOutcome,
)
from bot.daemon.executor import Registry, Stage, checked, outcome_of
from bot.daemon.metrics import Metrics
from bot.daemon.ports import Clock, RunnerStore

log = logging.getLogger("pitcrew.actions")

S = ProposalState


def no_executor(action: str) -> str:
    return f"no executor is configured for {action} (actions.executors in the config)"


def _stopped(
    proposal: Proposal, done: list[StepOutcome], stop: StepOutcome
) -> tuple[StepOutcome, ...]:
    """Each step of a run stopped at `stop`: those done, it, then the rest not run."""
    actions = (proposal.action, *(step.action for step in proposal.then))
    return (*done, stop, *(StepOutcome(a) for a in actions[len(done) + 1 :]))


def _ignore(incident_id: str) -> None:
    return None


def _say_nothing(incident_id: str, text: str) -> None:
    return None


class Runner:
    """Runs approved proposals, each exactly once, and records them in the ledger."""

    def __init__(
        self,
        store: RunnerStore,
        registry: Registry,
        *,
        clock: Clock,
        enabled: bool = True,
        metrics: Metrics | None = None,
        changed: Callable[[str], None] = _ignore,
        tell: Callable[[str, str], None] = _say_nothing,
    ) -> None:
        self._store = store
        self._tell = tell  # says in the card's thread where a plan stopped
        self._registry = registry
        self._clock = clock
        self._enabled = enabled
        self._metrics = metrics
        self._changed = changed
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False

    def run(self, proposal_id: str) -> Proposal | None:
        """Run the proposal's action if it is APPROVED and this call wins it; returns the
        finished proposal, or None when it was not approved or someone else runs it."""
        if self._closed:
            return None  # shutting down: the next start picks it up
        approved = self._store.get_proposal(proposal_id)
        if approved is None or approved.state is not S.APPROVED:
            return None
        refusal = self._refusal(approved)
        decided = (
            approvals.transition(
                approved,
                S.FAILED,
                SYSTEM_ACTOR,
                self._clock(),
                refusal,
                ActionResult.REFUSED,
                _stopped(approved, [], StepOutcome(approved.action, ActionResult.REFUSED, refusal)),
            )
            if refusal
            else approvals.start(approved, self._clock())
        )
        try:
            moved = self._store.record_decision(decided, approved.version)
        except approvals.StaleProposalError:
            return None  # another thread or process won it
        self._changed(moved.incident_id)
        if refusal:
            log.warning("proposal %s (%s) refused: %s", proposal_id, approved.action, refusal)
            self._count(approved.action, ActionResult.REFUSED)
            return moved
        return self._execute(moved)

    def take_over(self) -> int:
        """A new leader's first duty (leader election: `bot.daemon.elector`): finish the
        actions the deposed leader was running. Each RUNNING proposal is checked again and
        carried out from there: a change in place already is verified, not made again
        (`LiveCheck.done`: its target carries the proposal's `pitcrew.io/last-proposal`),
        one the old leader never made is made once; the old leader's late writes are
        refused by the store (fencing) and its late patch by the target's `test`
        operations. Returns how many it finished."""
        finished = 0
        for proposal in self._store.proposals_in_state(S.RUNNING):
            if self._closed:
                break
            log.warning(
                "proposal %s (%s) was running when the leader changed; finishing it",
                proposal.id,
                proposal.action,
            )
            self._tell(
                proposal.incident_id,
                f"{proposal.action} ({proposal.id}) was running when pitcrew's leader changed; "
                "the new leader finishes it (a change already made is verified, not made again).",
            )
            entry = self._store.action_entry(proposal.id)
            if entry is None:  # claimed, never started: it starts now
                self._store.start_action(self._entry(proposal))
            elif entry.result is not ActionResult.STARTED:  # ended; the proposal not yet
                self._settle(proposal, entry)
                finished += 1
                continue
            self._carry_out(proposal)
            finished += 1
        return finished

    def _settle(self, proposal: Proposal, entry: LedgerEntry) -> None:
        """The proposal of an action the ledger says ended is moved to how it ended."""
        at = entry.finished_at or self._clock()
        ended = approvals.finish(proposal, at, entry.result, entry.detail)
        self._store.record_decision(ended, proposal.version)
        self._count(proposal.action, entry.result)
        self._changed(proposal.incident_id)

    def run_approved(self) -> int:
        """Run every APPROVED proposal (the daemon's poll); returns how many it ran."""
        ran = 0
        for proposal in self._store.proposals_in_state(S.APPROVED):
            if self.run(proposal.id) is not None:
                ran += 1
        return ran

    def submit(self, proposal_id: str) -> Future[Proposal | None] | None:
        """Run in the background (one action at a time), for callers that must answer fast;
        None when shutting down (the proposal stays APPROVED for the next start)."""
        with self._lock:
            if self._closed:
                return None
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pitcrew-action")
            return self._pool.submit(self._run_logged, proposal_id)

    def close(self, wait: bool = True) -> None:
        """Start nothing more; with `wait`, let the action that is running finish."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=wait, cancel_futures=not wait)

    # -- internals -----------------------------------------------------------------------

    def _run_logged(self, proposal_id: str) -> Proposal | None:
        try:
            return self.run(proposal_id)
        except Exception as error:
            log.error("running proposal %s failed: %s", proposal_id, error)
            raise

    def _refusal(self, proposal: Proposal) -> str:
        if not self._enabled:
            return "actions are disabled in this pitcrew's config (actions.enabled: false)"
        if self._registry.get(proposal.action) is None:
            return no_executor(proposal.action)
        return ""  # a plan's later step without an executor stops the plan there

    def _entry(self, proposal: Proposal) -> LedgerEntry:
        """The ledger's claim of the proposal's action, before anything runs."""
        return LedgerEntry(
            proposal_id=proposal.id,
            action=proposal.action,
            approver=approver_of(proposal),
            started_at=self._clock(),
            result=ActionResult.STARTED,
            detail=proposal.preview,
        )

    def _execute(self, proposal: Proposal) -> Proposal | None:
        self._store.start_action(self._entry(proposal))
        return self._carry_out(proposal)

    def _carry_out(self, proposal: Proposal) -> Proposal | None:
        """A RUNNING proposal whose ledger entry is STARTED: its action (or plan), then the
        ledger and the proposal say how it ended."""
        log.info("running %s for proposal %s: %s", proposal.action, proposal.id, proposal.preview)
        if proposal.then:
            result, detail, steps = self._plan(proposal)
        else:
            result, detail = self._apply(proposal, Step.of_proposal(proposal), proposal)
            steps = (StepOutcome(proposal.action, result, detail),)
        finished_at = self._clock()
        self._store.finish_action(proposal.id, result, finished_at, detail)
        final = self._store.record_decision(
            approvals.finish(proposal, finished_at, result, detail, steps), proposal.version
        )
        log.info("proposal %s (%s) %s: %s", proposal.id, proposal.action, result, detail)
        self._count(proposal.action, result)
        self._changed(proposal.incident_id)
        return final

    def _plan(self, proposal: Proposal) -> tuple[ActionResult, str, tuple[StepOutcome, ...]]:
        """A plan's steps in order, each checked, executed and verified before the next;
        the first that does not succeed stops the plan, and the card's thread is told
        where. Returns how the plan ended and how each step did."""
        first = Step.of_proposal(proposal)
        steps: list[tuple[Step, Proposal | PlanStep]] = [(first, proposal)]
        for number, then in enumerate(proposal.then, 2):
            step = Step(
                then.action,
                then.params,
                then.preview,
                f"{proposal.id}-step{number}",  # each step idempotent on its own
                first.approver,
                then.preconditions,
            )
            steps.append((step, then))
        done: list[str] = []
        ended: list[StepOutcome] = []
        total = len(steps)
        for number, (step, offered) in enumerate(steps, 1):
            result, detail = self._apply(proposal, step, offered)
            ended.append(StepOutcome(step.action, result, detail))
            line = f"step {number} of {total} ({step.action})"
            if result is not ActionResult.SUCCEEDED:
                where = f"the plan stopped at {line}, {result}: {detail}"
                if done:
                    ran = "step 1 was" if number == 2 else f"steps 1 to {number - 1} were"
                    where += f"; {ran} applied and verified"
                left = [s.action for s, _ in steps[number:]]
                if left:
                    where += f"; not run: {', '.join(left)}"
                self._tell(proposal.incident_id, f"{proposal.id}: {where}")
                outcomes = (*ended, *(StepOutcome(a) for a in left))
                return result, "\n".join([where, *done]), outcomes
            done.append(f"{line} applied and verified: {detail}")
        return ActionResult.SUCCEEDED, "\n".join(done), tuple(ended)

    def _apply(
        self, proposal: Proposal, step: Step, offered: Proposal | PlanStep
    ) -> tuple[ActionResult, str]:
        """Check (the same call as the offer's and the approval's), execute, verify."""
        executor = self._registry.get(step.action)
        if executor is None:
            return ActionResult.REFUSED, no_executor(step.action)
        try:
            found = checked(executor, step)
            if found.outcome is not None:
                return found.outcome, found.live.reason
            stale = approvals.revalidate(offered, found.live)
            if stale:
                return ActionResult.REFUSED, f"{stale}; nothing was changed"
            # In place already (a run a failover cut short): verified, not applied again.
            done = found.live.done or executor.execute(step, found.plan)
        except Exception as error:
            return self._ended(proposal, error)
        try:
            verified = executor.verify(step)
        except Exception as error:
            result, text = self._ended(proposal, error)
            return result, f"{done}; verification failed: {text}"
        if not verified.ok:
            return ActionResult.FAILED, f"{done}; not verified: {verified.detail}"
        return ActionResult.SUCCEEDED, f"{done}; {verified.detail}" if verified.detail else done

    def _ended(self, proposal: Proposal, error: Exception) -> tuple[ActionResult, str]:
        what = f"proposal {proposal.id} ({proposal.action})"
        return outcome_of(error, Stage.ACTION, what, self._metrics)

    def _count(self, action: str, result: ActionResult) -> None:
        if self._metrics is not None:
            self._metrics.actions.labels(action=action, result=str(result)).inc()
