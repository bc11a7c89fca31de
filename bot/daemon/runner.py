"""Executors: what runs an approved action, and the runner that runs it exactly once.

Why this exists: an approval is a promise that the action runs once, after a
person said so, and that a crash never makes it run twice. Executors (the
Kubernetes and Ray ones are `bot.adapters.kubernetes.executors` and
`bot.adapters.ray.executors`)
only know how to check live facts, apply and verify one action; this module
keeps them in a registry keyed by action id and owns the order around them:

    APPROVED --CAS--> RUNNING (only the daemon that wins it runs it)
    ledger STARTED -> execute -> verify -> ledger SUCCEEDED | FAILED
    RUNNING -> SUCCEEDED | FAILED

A proposal found RUNNING after a restart was interrupted; the pipeline reports
it and it is never run again (`approvals.recover`). An action with no executor
fails with a reason saying so.

Executor kinds are named in the config (`actions.executors`); which kinds exist
and how each is built is `bot.app.factories`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from bot.core import approvals
from bot.core.actions.catalog import CATALOG
from bot.core.approvals import SYSTEM_ACTOR, LiveCheck
from bot.core.errors import PitcrewError
from bot.core.facts import FactAnswer, awaiting, settle, to_confirm
from bot.core.model import ActionResult, Diagnosis, LedgerEntry, Proposal, ProposalState
from bot.daemon import live_checks
from bot.daemon.metrics import Metrics
from bot.daemon.ports import Clock, RunnerStore

log = logging.getLogger("pitcrew.actions")

S = ProposalState


@dataclass(frozen=True, slots=True)
class Verification:
    ok: bool
    detail: str = ""


class Executor(Protocol):
    """Runs actions of some ids; one object may serve several actions."""

    def check(self, proposal: Proposal) -> LiveCheck:
        """The live facts the proposal's preconditions name, and its preview recomputed
        from live state (for `approvals.revalidate` at approval time)."""
        ...

    def execute(self, proposal: Proposal) -> str:
        """Apply the action, idempotent per proposal id; returns what was done. Raises
        on failure (the message is shown on the card)."""
        ...

    def verify(self, proposal: Proposal) -> Verification:
        """Whether the change took effect."""
        ...


class Registry:
    """Executors keyed by action id."""

    def __init__(self, executors: Mapping[str, Executor] | None = None) -> None:
        self._executors: dict[str, Executor] = {}
        for action, executor in (executors or {}).items():
            self.register(action, executor)

    def register(self, action: str, executor: Executor) -> None:
        if action not in CATALOG:
            raise PitcrewError(f"cannot register an executor for unknown action {action!r}")
        self._executors[action] = executor

    def get(self, action: str) -> Executor | None:
        return self._executors.get(action)

    def actions(self) -> tuple[str, ...]:
        return tuple(sorted(self._executors))


def live_facts(diagnosis: Diagnosis, registry: Registry, now: datetime) -> dict[str, bool]:
    """The live facts that the actions `diagnosis` withholds only for want of one need,
    from each action's executor (`check` of a not yet stored proposal for the offer),
    asked at once (`bot.daemon.live_checks.ask`; the daemon asks off the pipeline thread). A
    fact two checks disagree on is false (the cautious reading); an action without an
    executor, or whose check fails, stays withheld."""
    checks = live_checks.executor_checks(registry, lambda: now)
    return dict(live_checks.ask(awaiting(diagnosis), checks).answer.facts)


def check_offers(diagnosis: Diagnosis, registry: Registry, now: datetime) -> Diagnosis:
    """The diagnosis with every offered action whose preconditions its executor finds
    false now shown as withheld, with the executor's reason ("no node matches the
    template's nodeSelector ...", "RayCluster ml/x does not exist"): an offer is only
    made when approving it could succeed. A check that cannot answer leaves the offer
    (approval checks again). Asked at once; the daemon asks off the pipeline thread."""
    checks = live_checks.executor_checks(registry, lambda: now)
    answer = live_checks.ask(to_confirm(diagnosis), checks).answer
    return settle(diagnosis, FactAnswer(refused=answer.refused))


def no_executor(action: str) -> str:
    return f"no executor is configured for {action} (actions.executors in the config)"


def _approver(proposal: Proposal) -> str:
    if proposal.approvals:
        return ", ".join(proposal.approvals)
    return next((t.actor for t in proposal.history if t.to_state is S.APPROVED), "")


def _ignore(incident_id: str) -> None:
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
    ) -> None:
        self._store = store
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
            approvals.transition(approved, S.FAILED, SYSTEM_ACTOR, self._clock(), refusal)
            if refusal
            else approvals.start(approved, self._clock())
        )
        try:
            moved = self._store.record_decision(decided, approved.version)
        except approvals.StaleProposalError:
            return None  # another thread or process won it
        self._changed(moved.incident_id)
        if refusal:
            log.warning("proposal %s (%s) failed: %s", proposal_id, approved.action, refusal)
            self._count(approved.action, ActionResult.FAILED)
            return moved
        return self._execute(moved)

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
        return ""

    def _execute(self, proposal: Proposal) -> Proposal | None:
        executor = self._registry.get(proposal.action)
        assert executor is not None
        started = self._clock()
        self._store.start_action(
            LedgerEntry(
                proposal_id=proposal.id,
                action=proposal.action,
                approver=_approver(proposal),
                started_at=started,
                result=ActionResult.STARTED,
                detail=proposal.preview,
            )
        )
        log.info("running %s for proposal %s: %s", proposal.action, proposal.id, proposal.preview)
        ok, detail = self._apply(executor, proposal)
        result = ActionResult.SUCCEEDED if ok else ActionResult.FAILED
        finished_at = self._clock()
        self._store.finish_action(proposal.id, result, finished_at, detail)
        final = self._store.record_decision(
            approvals.finish(proposal, finished_at, ok, detail), proposal.version
        )
        log.info("proposal %s (%s) %s: %s", proposal.id, proposal.action, result, detail)
        self._count(proposal.action, result)
        self._changed(proposal.incident_id)
        return final

    def _apply(self, executor: Executor, proposal: Proposal) -> tuple[bool, str]:
        try:
            done = executor.execute(proposal)
        except Exception as error:
            return False, str(error) or type(error).__name__
        try:
            verified = executor.verify(proposal)
        except Exception as error:
            return False, f"{done}; verification failed: {error}"
        if not verified.ok:
            return False, f"{done}; not verified: {verified.detail}"
        return True, f"{done}; {verified.detail}" if verified.detail else done

    def _count(self, action: str, result: ActionResult) -> None:
        if self._metrics is not None:
            self._metrics.actions.labels(action=action, result=str(result)).inc()
