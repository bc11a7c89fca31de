"""The operations people ask for, from a chat or the command line.

Why this exists: a Slack button, a slash command and `pitcrew approve ID` must
behave the same, so they all call this module, and its answers are values a
chat can explain: approved, needs a second approver, refused (and why),
already decided by someone, expired, not found. Those values (`Answer`,
`Outcome`, `Status`, ...) are the daemon's ports' (`bot.daemon.ports`), which a
chat adapter imports, and `Service` is the `ChatService` that port describes.

Approving is, in this order: the policy (state, expiry, who may approve,
`policy.may_approve`) -> re-validation against live state (the action's
executor gathers fresh facts and a fresh preview; `approvals.revalidate`) ->
the store's compare-and-swap of the core's decision (`record_decision`: the
version it was made from, the moves `LEGAL` lists; recorded once however many
clicks race, a click that lost deciding again on the stored proposal) ->
execution (in the daemon, `execute` hands the proposal to the action runner;
from another process the daemon's poll picks it up).
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from bot.core.actions import approvals, policy
from bot.core.actions.approvals import (
    Approved,
    Decision,
    LiveCheck,
    NeedsSecondApprover,
    Refused,
    Rejected,
    StaleProposalError,
)
from bot.core.actions.policy import ApprovalPolicy, ChatUser
from bot.core.actions.step import Step
from bot.core.diagnosis.unmatched import UnmatchedShape
from bot.core.incidents import evidence_access, silencing
from bot.core.incidents.notify import SILENCE_KEYS
from bot.core.incidents.outcomes import named
from bot.core.model import ActionResult, Proposal, ProposalState, Silence
from bot.daemon import strays
from bot.daemon.executor import Registry, Stage, checked, outcome_of
from bot.daemon.metrics import Metrics
from bot.daemon.ports import (
    Answer,
    EvidenceFetch,
    History,
    IncidentView,
    Outcome,
    ServiceStore,
    Status,
)
from bot.daemon.runner import no_executor

log = logging.getLogger("pitcrew.service")

S = ProposalState
# Decisions tried per click: each lost compare-and-swap means someone else decided meanwhile.
_ATTEMPTS = 8


def _ignore(proposal_id: str) -> None:
    return None


def _ignore_text(incident_id: str, text: str) -> None:
    return None


class Service:
    def __init__(
        self,
        store: ServiceStore,
        policy: ApprovalPolicy,
        registry: Registry,
        *,
        metrics: Metrics | None = None,
        execute: Callable[[str], object] = _ignore,
        changed: Callable[[str], None] = _ignore,
        tell: Callable[[str, str], None] = _ignore_text,
        offers: Callable[[], Mapping[str, tuple[str, ...]]] | None = None,
    ) -> None:
        """A proposal of another cluster than the store's own (`store.cluster`: a store
        two clusters share) is answered "this is cluster X's" and left as it is."""
        self._store = store
        self._cluster = store.cluster
        self._policy = policy
        self._registry = registry
        self._metrics = metrics or Metrics()
        self._execute = execute  # the daemon runs approved proposals; the CLI leaves it
        self._runs_here = execute is not _ignore
        self._changed = changed  # the daemon refreshes the incident's card at once
        self._tell = tell  # ... and says a refusal in the card's thread
        self._offers = offers  # the actions each playbook offers, by id (silence scopes)

    # -- approvals -----------------------------------------------------------------------

    def approve(self, proposal_id: str, user: ChatUser, now: datetime) -> Answer:
        proposal = self._store.get_proposal(proposal_id)
        if proposal is None:
            return self._refused(Outcome.NOT_FOUND, f"no proposal {proposal_id}", None)
        if elsewhere := self._elsewhere(proposal):
            return elsewhere
        live = self._live_check(proposal, user, now)
        if isinstance(live, Answer):
            return live
        for _ in range(_ATTEMPTS):
            decision = approvals.approve(proposal, user, self._policy, now, live)
            try:
                if isinstance(decision, Refused) and decision.stale:
                    return self._supersede(proposal, live, user, now, decision.stale)
                return self._apply_approval(decision, proposal, user, now)
            except StaleProposalError:  # another click got there first: decide again
                fresh = self._store.get_proposal(proposal_id)
                if fresh is None:
                    return self._refused(Outcome.NOT_FOUND, f"no proposal {proposal_id}", None)
                proposal = fresh
        return self._refused(Outcome.ALREADY_DECIDED, "decided by someone else meanwhile", proposal)

    def reject(self, proposal_id: str, user: ChatUser, now: datetime, reason: str = "") -> Answer:
        proposal = self._store.get_proposal(proposal_id)
        for _ in range(_ATTEMPTS):
            if proposal is None:
                return self._refused(Outcome.NOT_FOUND, f"no proposal {proposal_id}", None)
            if elsewhere := self._elsewhere(proposal):
                return elsewhere
            decision = approvals.reject(proposal, user, self._policy, now, reason)
            try:
                if isinstance(decision, Refused):
                    return self._settle_refusal(decision, proposal.version)
                assert isinstance(decision, Rejected)
                moved = self._store.record_decision(decision.proposal, proposal.version)
            except StaleProposalError:
                proposal = self._store.get_proposal(proposal_id)
                continue
            log.info("proposal %s (%s) rejected by %s", proposal_id, proposal.action, user.id)
            self._changed(moved.incident_id)
            return Answer(Outcome.REJECTED, f"{named(proposal)} rejected by {user.id}", moved)
        return self._refused(Outcome.ALREADY_DECIDED, "decided by someone else meanwhile", proposal)

    def expire(self, now: datetime) -> int:
        """Expire offers past their time (the scheduler's job); returns how many."""
        expired = 0
        offers = {p.id: p for p in self._store.expired_offers(now)}
        for proposal in approvals.expire_due(offers.values(), now):
            try:
                moved = self._store.record_decision(proposal, offers[proposal.id].version)
            except StaleProposalError:
                continue  # decided meanwhile
            expired += 1
            self._changed(moved.incident_id)
        return expired

    # -- silences ------------------------------------------------------------------------

    def silence(
        self,
        matchers: Mapping[str, str],
        duration: timedelta,
        author: str,
        now: datetime,
        reason: str = "",
        user: ChatUser | None = None,
    ) -> Silence:
        """Mute matching incidents for `duration`; raises ValueError for bad matchers, and
        when `user` (who asks) may not silence that long or there (`silencing.may_silence`)."""
        if user is not None:
            muted = self._muted(matchers)
            problem = silencing.may_silence(self._policy, user, duration, muted)
            if problem:
                self._metrics.refused_clicks.labels(reason="silence").inc()
                raise ValueError(problem)
        unknown = sorted(set(matchers) - SILENCE_KEYS)
        if not matchers or unknown:
            known = ", ".join(sorted(SILENCE_KEYS))
            raise ValueError(
                f"silence by {known}" + (f", not {', '.join(unknown)}" if unknown else "")
            )
        if duration <= timedelta(0):
            raise ValueError("a silence needs a positive duration")
        text = repr((sorted(matchers.items()), author, now.isoformat()))
        silence = Silence(
            id=f"s-{hashlib.sha1(text.encode()).hexdigest()[:8]}",
            matchers=dict(matchers),
            starts_at=now,
            ends_at=now + duration,
            author=author,
            reason=reason,
        )
        self._store.add_silence(silence)
        log.info("silence %s by %s until %s: %s", silence.id, author, silence.ends_at, reason)
        return silence

    def unsilence(
        self, silence_id: str, now: datetime, user: ChatUser | None = None
    ) -> Silence | None:
        """End a silence now (None: no such silence); raises ValueError when `user` may
        not end it (`silencing.may_unsilence`)."""
        if user is not None:
            silence = self._store.silence(silence_id)
            if silence is None:
                return None
            muted = self._muted(silence.matchers)
            problem = silencing.may_unsilence(self._policy, user, silence, muted)
            if problem:
                self._metrics.refused_clicks.labels(reason="unsilence").inc()
                raise ValueError(problem)
        ended = self._store.expire_silence(silence_id, now)
        if ended is not None:
            log.info("silence %s ended", silence_id)
        return ended

    def _muted(self, matchers: Mapping[str, str]) -> silencing.Muted:
        """What a silence with `matchers` can mute (`silencing.muted`), from the incident
        its `incident` matcher names and the library's playbooks (read only for a silence
        by playbook)."""
        incident = self._store.incident(matchers["incident"]) if "incident" in matchers else None
        proposals = self._store.proposals_for_incident(incident.id) if incident else ()
        offers = self._offers() if "playbook" in matchers and self._offers else None
        return silencing.muted(matchers, incident, proposals, offers)

    # -- reading -------------------------------------------------------------------------

    def incidents(self, namespace: str | None = None) -> tuple[IncidentView, ...]:
        return tuple(
            IncidentView(incident, self._store.proposals_for_incident(incident.id))
            for incident in self._store.open_incidents(namespace or None)
        )

    def history(self, n: int = 10) -> History:
        return History(
            self._store.recent_incidents(n),
            self._store.recent_actions(n),
            self._store.recent_fetches(n),
        )

    def bundles(self, incident_id: str) -> list[tuple[str, int, datetime]]:
        """The evidence bundles kept for an incident: (name, bytes, captured at)."""
        return self._store.bundle_sizes(incident_id)

    def may_fetch(self, incident_id: str, user: ChatUser, now: datetime, via: str) -> str:
        """Why `user` may not have the incident's evidence, or "" when they may
        (`evidence_access.may_fetch`); either way the ask is audited (`audit_fetch`)."""
        incident = self._store.incident(incident_id)
        if incident is None:
            refusal = f"no incident {incident_id}"
        else:
            workload = str(incident.workload) if incident.workload else ""
            refusal = evidence_access.may_fetch(
                self._policy, user, incident_id, incident.namespace, workload
            )
        outcome = "refused" if refusal else "allowed"
        self.audit_fetch(EvidenceFetch(incident_id, user.id, via, outcome, refusal, now))
        return refusal

    def audit_fetch(self, fetch: EvidenceFetch) -> None:
        """An ask for evidence logged, counted (`pitcrew_evidence_fetches_total{outcome}`)
        and kept in the store (`pitcrew history`)."""
        self._store.record_fetch(fetch)
        self._metrics.evidence_fetches.labels(outcome=fetch.outcome).inc()
        level = logging.WARNING if fetch.outcome == "refused" else logging.INFO
        said = f"{fetch.outcome}: {fetch.detail}" if fetch.detail else fetch.outcome
        log.log(
            level, "evidence of %s, %s by %s: %s", fetch.incident_id, fetch.via, fetch.user, said
        )

    def unmatched(self, n: int = 10) -> tuple[UnmatchedShape, ...]:
        """Failure shapes no playbook matched, most frequent first."""
        return self._store.unmatched(n)

    def status(self, now: datetime) -> Status:
        counts: Counter[str] = Counter()
        for state in (S.OFFERED, S.APPROVED, S.RUNNING):
            counts[str(state)] = len(self._store.proposals_in_state(state))
        return Status(
            open_incidents=len(self._store.open_incidents()),
            proposals=dict(counts),
            pending_notifications=self._store.pending_notifications(),
            active_silences=len(self._store.active_silences(now)),
            executors=self._registry.actions(),
            set_aside=self._store.set_aside_rows(),
            dead_letters=tuple(self._store.dead_letters()),
            given_up=self._store.dead_letter_count(),
            held=tuple(self._store.held_notifications()),
            unchecked=self._store.unchecked_cards(),
            cluster=self._cluster,
            other_clusters=strays.problem(self._store.bookmark(strays.KEY), self._cluster, now),
        )

    def requeue(self, row_id: int | None = None) -> int:
        """Release evidence set aside (all, or row `row_id`): the running daemon takes it
        in within `scheduler.released` (its next start, when none runs)."""
        released = self._store.requeue(row_id)
        log.info("released %d pieces of evidence set aside", released)
        return released

    # -- internals -----------------------------------------------------------------------

    def _elsewhere(self, proposal: Proposal) -> Answer | None:
        """Another cluster's proposal (in a store two clusters share) is its pitcrew's."""
        if not self._cluster or proposal.cluster in ("", self._cluster):
            return None
        text = f"this is cluster {proposal.cluster}'s; its pitcrew answers it"
        return self._refused(Outcome.OTHER_CLUSTER, text, proposal)

    def _live_check(self, proposal: Proposal, user: ChatUser, now: datetime) -> LiveCheck | Answer:
        """Fresh facts from the action's executor, asked only when nothing else refuses."""
        if proposal.state is not S.OFFERED or now >= proposal.expires_at:
            return LiveCheck()  # approvals.approve refuses on state or expiry first
        if policy.may_approve(
            self._policy, user, proposal.namespace, proposal.action, proposal.workload
        ):
            return LiveCheck()  # ... and on authority
        executor = self._registry.get(proposal.action)
        if executor is None:
            return self._refused(Outcome.REFUSED, no_executor(proposal.action), proposal)
        try:  # the very check the offer made (`bot.daemon.executor.checked`)
            found = checked(executor, Step.of_proposal(proposal))
        except Exception as error:  # the seam's one policy: a bug is logged and counted
            what = f"the approval of {proposal.id} ({proposal.action}) by {user.id}"
            _, text = outcome_of(error, Stage.APPROVAL, what, self._metrics)
            return self._unchecked(proposal, user, text)
        if found.outcome is ActionResult.FAILED:  # the target could not be read
            return self._unchecked(proposal, user, found.live.reason)
        return found.live

    def _unchecked(self, proposal: Proposal, user: ChatUser, why: str) -> Answer:
        """The approval is refused: the target's live state could not be checked (`why`),
        said to the approver and in the card's thread."""
        text = f"cannot check the target's live state: {why}"
        self._tell(
            proposal.incident_id,
            f"{user.id}'s approval of {named(proposal)} ({proposal.id}) was refused: {text}",
        )
        return self._refused(Outcome.REFUSED, text, proposal)

    def _supersede(
        self, proposal: Proposal, live: LiveCheck, user: ChatUser, now: datetime, stale: str
    ) -> Answer:
        """Live state no longer matches the offer: it is withdrawn (its buttons go) and,
        when the live check allows, offered again with the current preview; the card's
        thread is told as well as the person who clicked."""
        withdrawn, fresh = approvals.supersede(proposal, live, stale, now)
        moved = self._store.record_decision(withdrawn, proposal.version)
        self._changed(moved.incident_id)
        if fresh is not None and self._store.get_proposal(fresh.id) is None:
            self._store.create_proposal(fresh)
            then = f"offered again with the current preview as {fresh.id}: {fresh.preview}"
        else:
            then = "withdrawn; nothing was changed"
        log.info("proposal %s (%s) superseded: %s", proposal.id, proposal.action, stale)
        self._tell(
            proposal.incident_id,
            f"{user.id}'s approval of {named(proposal)} ({proposal.id}) was refused: "
            f"{stale}. {then[0].upper()}{then[1:]}.",
        )
        return self._refused(Outcome.REFUSED, f"stale: {stale}; {then}", moved)

    def _apply_approval(
        self, decision: Decision, proposal: Proposal, user: ChatUser, now: datetime
    ) -> Answer:
        """Write the core's decision on an approval click (compare-and-swap on the
        version `proposal` was read at) and answer it."""
        if isinstance(decision, Refused):
            return self._settle_refusal(decision, proposal.version)
        assert isinstance(decision, Approved | NeedsSecondApprover)
        moved = self._store.record_decision(decision.proposal, proposal.version)
        self._changed(moved.incident_id)
        if isinstance(decision, NeedsSecondApprover):
            text = f"{named(proposal)}: approval by {user.id} recorded; a second approver is needed"
            return Answer(Outcome.NEEDS_SECOND_APPROVER, text, moved)
        reason = moved.history[-1].reason
        log.info("proposal %s (%s) %s", proposal.id, proposal.action, reason)
        self._execute(proposal.id)
        then = "it runs now" if self._runs_here else "the running daemon runs it"
        return Answer(Outcome.APPROVED, f"{named(proposal)} {reason}; {then}", moved)

    def _settle_refusal(self, refused: Refused, version: int) -> Answer:
        proposal = refused.proposal
        if refused.changed:  # it expired: record that, once
            moved = self._store.record_decision(proposal, version)
            self._changed(moved.incident_id)
            return self._refused(Outcome.EXPIRED, refused.reason, moved)
        if proposal.state is S.EXPIRED:
            return self._refused(Outcome.EXPIRED, refused.reason, proposal)
        if proposal.state is not S.OFFERED:
            return self._refused(Outcome.ALREADY_DECIDED, refused.reason, proposal)
        return self._refused(Outcome.REFUSED, refused.reason, proposal)

    def _refused(self, outcome: Outcome, text: str, proposal: Proposal | None) -> Answer:
        self._metrics.refused_clicks.labels(reason=str(outcome)).inc()
        return Answer(outcome, text, proposal)


def console_user(name: str) -> ChatUser:
    """The identity of a person at the command line, as approval rules name it; the
    chat workspaces of `approvals.teams` do not apply to it."""
    return ChatUser(id=f"console:{name}", console=True)
