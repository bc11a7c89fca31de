"""The main flow, readable top to bottom, on one thread that owns the open incidents.

Why this exists: everything pitcrew observes ends here, and the order of the
steps is the product's promise (DESIGN.md "The pipeline"):

    observation -> the RayJobs its signals name as owners of Ray jobs (Correlator.own)
                -> classify (Engine) -> findings
                -> correlate (Correlator.add) -> incident changes
                -> store the incident and its findings
                -> offers waiting on a live fact: handed to the live checks (`check_live`)
                -> proposals for the actions it now offers (approvals.reconcile)
                -> the card: build_report -> notify.decide -> outbox (with the delivery record)

    live facts  -> assess again (Correlator.learn) -> the same steps from "store"

Sources, the HTTP ingest, the scheduler's ticks, the service's refreshes and
the live checks' answers all put items on one queue (`bot.daemon.feed`); this
thread takes them one at a time, so the Correlator and the delivery records need
no locks. It never waits on a cluster: a live fact is asked for, and its answer
(or "did not answer in time") arrives later as one more item (`bot.daemon.live_checks`);
meanwhile only that incident's card waits, other cards go out. Nor does it wait
past a budget on its own pure work: classifying, assessing an incident (its
playbook texts rendered) and building a card run on a worker within
`pipeline.step_budget` per item (`bot.daemon.budget`), while every store write
stays on this thread; an item over it is quarantined. Ticks resolve
quiet incidents, send what `notify.decide` asked to be decided later (group
wait, update interval, reminders), pick up silences, and notice proposal
changes other threads or processes made (a `pitcrew approve` in another
shell moves a proposal in the store; the next tick updates its card).

On start, `restore` takes back the open incidents and unfinished cards from
the store and reports actions a crash interrupted in their card's thread;
those are never run again. The store is reached through `bot.daemon.ports`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta

from bot.core.actions import approvals, memory_evidence
from bot.core.diagnosis.analysis import findings_from_hits
from bot.core.diagnosis.engine import Engine
from bot.core.diagnosis.unmatched import part_lines
from bot.core.errors import PitcrewError
from bot.core.incidents.correlator import Change, ChangeKind, Correlator
from bot.core.incidents.notify import Delivery, NotifyConfig, decide, evidence_hold
from bot.core.incidents.rayjob_owners import owners_named
from bot.core.incidents.reports import build_report
from bot.core.model import (
    ActionOffer,
    Finding,
    Incident,
    IncidentState,
    Notification,
    NotificationKind,
    Proposal,
    ProposalState,
    Signal,
    Silence,
    SourceKind,
    frozen_map,
)
from bot.daemon.budget import Budget, BudgetedClassifier, OverBudgetError
from bot.daemon.capture import CaptureWorker
from bot.daemon.feed import (
    Captured,
    Healthy,
    Item,
    LiveFacts,
    Measured,
    Observation,
    Refresh,
    Tick,
)
from bot.daemon.memory_worker import MemoryWorker, thread_text
from bot.daemon.metrics import Metrics
from bot.daemon.ports import Clock, PipelineStore, ProposalChange
from bot.daemon.taking import Forgetful, Keeper, Taking

log = logging.getLogger("pitcrew.pipeline")

S = ProposalState
# Proposal moves a person is waiting to see on the card (the update interval is skipped).
_URGENT = frozenset({S.APPROVED, S.RUNNING, S.SUCCEEDED, S.FAILED, S.REJECTED})
# Changes after which the incident may offer other actions than before.
_RESHAPED = frozenset({ChangeKind.OPENED, ChangeKind.UPDATED})


def _nothing() -> None:
    return None


def _unchecked(incident_id: str, offers: Sequence[ActionOffer]) -> bool:
    return False  # without live checks, an offer waiting on a fact stays withheld


class Pipeline(Taking):
    """Consumes the queue on its own thread (`bot.daemon.taking`); `process` handles one
    item (tests and the benchmark call it directly with a hand-driven clock)."""

    def __init__(
        self,
        *,
        engine: Engine,
        correlator: Correlator,
        store: PipelineStore,
        notify: NotifyConfig,
        clock: Clock,
        metrics: Metrics | None = None,
        proposal_ttl: timedelta = approvals.DEFAULT_TTL,
        propose: bool = True,
        queue_size: int = 10000,
        queued: Callable[[], None] = _nothing,
        memory: MemoryWorker | None = None,
        capture: CaptureWorker | None = None,
        check_live: Callable[[str, Sequence[ActionOffer]], bool] = _unchecked,
        live_hold: timedelta = timedelta(seconds=30),
        queue_bytes: int = 256 << 20,
        busy_limit: float = 120.0,
        keeper: Keeper | None = None,
        budget: Budget | None = None,
        fresh_engine: Callable[[], Engine] | None = None,
    ) -> None:
        """`queue_size` items and `queue_bytes` bytes of log text may wait (beyond either,
        `submit` refuses); one item taking over `busy_limit` seconds makes `alive` false;
        `keeper` keeps each item until it is taken in (`bot.daemon.taking`); each item's
        classification, correlation (the `correlator`'s assessment, made with
        `bot.daemon.budget.budgeted_assess`) and rendering run within `budget`, log text
        on a `fresh_engine` after a classification ran over (none: no budget)."""
        super().__init__(
            metrics=metrics or Metrics(),
            queue_size=queue_size,
            queue_bytes=queue_bytes,
            busy_limit=busy_limit,
            keeper=keeper or Forgetful(),
        )
        self._budget = budget or Budget(0.0)
        self._classifier = BudgetedClassifier(engine, self._budget, fresh_engine)
        self._correlator = correlator
        self._store = store
        self._notify = notify
        self._clock = clock
        self._ttl = proposal_ttl
        self._propose = propose
        self._queued = queued  # called after notifications were queued (wakes the outbox)
        self._check_live = check_live  # True when an answer will come as LiveFacts
        self._live_hold = live_hold  # longest a card waits for that answer
        self._waiting: dict[str, tuple[datetime, int]] = {}  # id -> (held since, answers due)
        self._deliveries: dict[str, Delivery] = {}
        self._due: dict[str, datetime] = {}  # incident id -> when to decide about its card
        self._resolved: dict[str, Incident] = {}  # resolved, card not final yet
        self._silences: tuple[Silence, ...] = ()
        self._seen_change = 0
        self._memory = memory  # memory evidence for memory incidents, fetched off this thread
        self._measured: dict[str, Measured] = {}
        self._evidence_due: dict[str, datetime] = {}  # id -> the first post waits until then
        self._charts: dict[str, Measured] = {}  # charts waiting for their card to be posted
        self._capture = capture  # evidence bundles of RayJobs and RayClusters, off this thread
        self._bundles: dict[str, list[Captured]] = {}  # waiting for their card to be posted

    def capture_with(self, capture: CaptureWorker | None) -> None:
        """Capture evidence bundles with `capture` (set before `start`)."""
        self._capture = capture

    # -- after a restart -----------------------------------------------------------------

    def restore(self) -> None:
        """Take back open incidents and unfinished cards; report interrupted actions."""
        now = self._clock()
        open_incidents = self._store.open_incidents()
        self._correlator.restore(open_incidents)
        self._seen_change = self._store.last_proposal_change()
        self._silences = self._store.active_silences(now)
        for delivery in self._store.pending_deliveries():
            self._deliveries[delivery.incident_id] = delivery
            self._due[delivery.incident_id] = now
        for incident in open_incidents:
            self._due[incident.id] = now
        self._recover_interrupted(now)
        for incident in open_incidents:  # the evidence is asked for again, off this thread
            self._ask_memory(incident, now)
        self._metrics.open_incidents.set(len(self._correlator))
        log.info(
            "restored %d open incidents and %d unfinished cards",
            len(open_incidents),
            len(self._deliveries),
        )

    def _recover_interrupted(self, now: datetime) -> None:
        running = {p.id: p for p in self._store.proposals_in_state(S.RUNNING)}
        for failed in approvals.recover(running.values(), now):
            try:
                self._store.record_decision(failed, running[failed.id].version)
            except approvals.StaleProposalError:
                continue  # another process recovered it
            self._store.mark_interrupted(failed.id, now)
            log.warning("proposal %s (%s) was interrupted by a restart", failed.id, failed.action)
            self._say_in_thread(
                failed.incident_id,
                f"{failed.action} ({failed.id}) was interrupted by a restart while running; "
                "it was not run again. Check its target before approving anything else.",
                now,
            )
            self._due[failed.incident_id] = now

    def stopped(self) -> None:
        self._budget.close()  # its idle worker ends

    # -- one item --------------------------------------------------------------------------

    def process(self, item: Item) -> None:
        now = self._clock()
        self._budget.begin()
        if isinstance(item, Observation):
            self._observe(item, now)
        elif isinstance(item, Healthy):
            self._healthy(item, now)
        elif isinstance(item, Tick):
            self._tick(now)
        elif isinstance(item, Refresh):
            if item.say:
                self._say_in_thread(item.incident_id, item.say, now)
            self._refresh(item.incident_id, now, urgent=item.urgent)
        elif isinstance(item, Measured):
            self._on_measured(item, now)
        elif isinstance(item, LiveFacts):
            self._learn(item, now)
        elif isinstance(item, Captured):
            self._on_captured(item, now)

    def _observe(self, observation: Observation, now: datetime) -> None:
        """All findings of one observation first, then one decision per incident touched:
        a driver log's three findings are one card, not a post and two updates."""
        latest: dict[str, Incident] = {}
        reshaped: set[str] = set()
        for owner in owners_named(observation.parts, observation.context.cluster):
            for change in self._correlator.own(owner, now):  # before the findings it owns
                latest[change.incident.id] = self._keep(change, (), now)
                reshaped.add(change.incident.id)
        findings = self._classify(observation)
        if not findings:
            self._keep_unmatched(observation, now)
        try:
            for finding in findings:
                for change in self._correlator.add(finding, now):
                    latest[change.incident.id] = self._keep(change, (finding,), now)
                    if change.kind in _RESHAPED:
                        reshaped.add(change.incident.id)
        except OverBudgetError:  # what was kept before it still gets its card
            self._follow_all(latest, reshaped, now)
            raise
        self._follow_all(latest, reshaped, now)

    def _follow_all(self, latest: dict[str, Incident], reshaped: set[str], now: datetime) -> None:
        """Each incident an observation touched: its memory evidence, offers and card."""
        for incident_id, incident in latest.items():
            if incident_id in reshaped:
                self._count_unrendered(incident)
            self._ask_memory(incident, now)  # before the card: its first post may wait for it
            self._follow_up(incident, incident_id in reshaped, now)
            if self._capture is not None and incident.state is IncidentState.OPEN:
                self._capture.ask(incident)
        self._metrics.open_incidents.set(len(self._correlator))

    def _keep_unmatched(self, observation: Observation, now: datetime) -> None:
        """Evidence no playbook matched: its failure-looking lines are kept by shape
        (`pitcrew unmatched`), the playbook a team should write next."""
        lines = part_lines(observation.parts)
        if lines:
            try:
                self._store.record_unmatched(lines, now)
            except PitcrewError as error:
                log.warning("could not keep unmatched failures: %s", error)

    def _classify(self, observation: Observation) -> list[Finding]:
        for part in observation.parts:
            self._metrics.signals.labels(source=str(part.source)).inc()
        self.stage = "classification"
        hits = self._classifier.hits(observation.parts)
        self.stage = "correlation"
        findings = [observation.context.apply(f) for f in findings_from_hits(hits)]
        for finding in findings:
            self._metrics.findings.labels(category=str(finding.category)).inc()
        return findings

    def _healthy(self, notice: Healthy, now: datetime) -> None:
        fields = frozen_map({"cluster": notice.cluster} if notice.cluster else {})
        signal = Signal(SourceKind.K8S_EVENT, "", fields=fields, workload=notice.workload)
        for change in self._correlator.healthy(signal, now, notice.reason):
            incident = self._keep(change, (), now)
            self._follow_up(incident, True, now)  # its offers are withheld: withdraw them
        self._metrics.open_incidents.set(len(self._correlator))

    def _learn(self, answer: LiveFacts, now: datetime) -> None:
        """A live check answered: assess the incident again; its card goes out once
        every check it waits for has answered."""
        self._answered(answer.incident_id)
        change = self._correlator.learn(answer.incident_id, answer.answer, now)
        if change is not None:
            self._record(change, (), now)
        else:
            self._refresh(answer.incident_id, now, urgent=False)

    def _tick(self, now: datetime) -> None:
        held = [i for i, (since, _) in self._waiting.items() if now - since >= self._live_hold]
        for incident_id in held:
            del self._waiting[incident_id]  # the answer was lost: the card goes out as it is
            self._due[incident_id] = now
        for incident_id in [i for i, at in self._evidence_due.items() if at <= now]:
            self._no_evidence_in_time(incident_id, now)
        for change in self._correlator.tick(now):
            self._record(change, (), now)
        self._notice_proposal_changes(now)
        self._notice_silences(now)
        for incident_id in [i for i, at in self._due.items() if at <= now]:
            self._refresh(incident_id, now, urgent=False)
        self._metrics.open_incidents.set(len(self._correlator))

    # -- the steps ---------------------------------------------------------------------------

    def _record(self, change: Change, findings: Iterable[Finding], now: datetime) -> None:
        incident = self._keep(change, findings, now)
        if change.kind in _RESHAPED:
            self._count_unrendered(incident)
        self._follow_up(incident, change.kind in _RESHAPED, now)

    def _keep(self, change: Change, findings: Iterable[Finding], now: datetime) -> Incident:
        """Store the incident as it now stands (with its memory evidence), and the findings
        that changed it; ask for the live facts its offers wait on."""
        incident = self._annotated(change.incident)
        self._store.upsert_incident(incident)
        self._store.append_findings(incident.id, findings, now)
        if change.say:
            self._say_in_thread(incident.id, change.say, now)
        if change.asks and self._check_live(incident.id, change.asks):
            self._hold_card(incident.id, now)
        if change.kind is ChangeKind.OPENED:
            self._metrics.incidents.inc()
            log.info("incident %s opened: %s", incident.id, _cause(incident))
        elif change.primary_changed:
            log.info("incident %s: root cause is now %s", incident.id, _cause(incident))
        elif change.kind is ChangeKind.RESOLVED:
            self._resolved[incident.id] = incident
            self._waiting.pop(incident.id, None)  # nothing to wait for: it is over
            log.info("incident %s resolved: %s", incident.id, incident.resolution)
        return incident

    def _count_unrendered(self, incident: Incident) -> None:
        """The incident was assessed again and its card is decided now: each finding
        whose playbook text fell back to plain text is one failed render on that card,
        counted and logged (once per card, however many findings the evidence added)."""
        for failure in incident.diagnosis.unrendered:
            self._metrics.render_failures.labels(playbook=failure.playbook).inc()
            log.warning(
                "incident %s: the text of playbook %s (%s) could not be rendered, "
                "the card shows its plain text: %s",
                incident.id,
                failure.playbook,
                failure.source,
                failure.reason,
            )

    def _hold_card(self, incident_id: str, now: datetime) -> None:
        """The incident's card waits for one more live check's answer."""
        since, due = self._waiting.get(incident_id, (now, 0))
        self._waiting[incident_id] = (since, due + 1)

    def _answered(self, incident_id: str) -> None:
        """One live check's answer in: the card goes out once no other is due."""
        since, due = self._waiting.pop(incident_id, (None, 1))
        if due > 1 and since is not None:
            self._waiting[incident_id] = (since, due - 1)

    def _ask_memory(self, incident: Incident, now: datetime) -> None:
        """Ask for an open incident's memory evidence (off this thread); the first time,
        its card's first post may wait for the answer until `evidence_hold`."""
        if self._memory is None or incident.state is not IncidentState.OPEN:
            return
        if self._memory.ask(incident):
            deadline = timedelta(seconds=self._memory.timeout)
            hold = evidence_hold(incident.opened_at, now, deadline, self._notify)
            self._evidence_due[incident.id] = hold

    def _no_evidence_in_time(self, incident_id: str, now: datetime) -> None:
        """The evidence's deadline passed unanswered: the card goes out, its bump sized by
        the factor, saying why (a late answer still updates it)."""
        del self._evidence_due[incident_id]
        if self._memory is None or incident_id in self._measured:
            return
        seconds = f"{self._memory.timeout:g}"
        problem = f"no memory metrics: Prometheus did not answer within {seconds} s"
        self._on_measured(Measured(incident_id, None, problem), now)

    def _annotated(self, incident: Incident) -> Incident:
        measured = self._measured.get(incident.id)
        if self._memory is None or measured is None:
            return incident
        return self._memory.annotate(incident, measured)

    def _on_measured(self, measured: Measured, now: datetime) -> None:
        """Memory evidence arrived: the card's memory line, the bump resized, the chart
        for the card's thread once the card is out."""
        incident = self._correlator.get(measured.incident_id)
        if incident is None or self._memory is None:
            return
        self._evidence_due.pop(incident.id, None)
        known = self._measured.get(incident.id)
        if measured.evidence is None and known is not None and known.evidence is None:
            return  # the deadline already said so: the card keeps its reason
        charted = bool(incident.memory)  # restored: its chart is in the thread already
        self._measured[incident.id] = measured
        incident = self._annotated(incident)
        self._store.upsert_incident(incident)
        if measured.chart and not charted:
            self._charts[incident.id] = measured
        self._follow_up(incident, True, now)

    def _follow_up(self, incident: Incident, reshaped: bool, now: datetime) -> None:
        """Proposals in step with what the incident now offers, then the card."""
        proposals = self._proposals(incident, reshaped, now)
        self._decide(incident, proposals, now, urgent=False)

    def _proposals(self, incident: Incident, reshaped: bool, now: datetime) -> tuple[Proposal, ...]:
        existing = self._store.proposals_for_incident(incident.id)
        if not self._propose or not reshaped:  # a resolved one is reshaped only by a merge
            return existing
        if self._hold(incident) is not None:  # offered once sized, not twice
            return existing
        changed = approvals.reconcile(incident, existing, now, self._ttl)
        if not changed:
            return existing
        known = {p.id: p for p in existing}
        for proposal in changed:
            if proposal.id not in known:
                self._store.create_proposal(proposal)
                log.info("proposal %s offered: %s", proposal.id, proposal.preview)
                continue
            with contextlib.suppress(approvals.StaleProposalError):  # decided meanwhile
                self._store.record_decision(proposal, known[proposal.id].version)
        return self._store.proposals_for_incident(incident.id)

    def _decide(
        self, incident: Incident, proposals: Iterable[Proposal], now: datetime, *, urgent: bool
    ) -> None:
        """What the chat should see now (notify.decide), queued with its delivery record;
        nothing while the incident waits for a live check's answer."""
        if incident.id in self._waiting:
            return
        stage, self.stage = self.stage, "rendering"
        shown = tuple(proposals)
        report = self._budget.run("rendering", lambda: build_report(incident, shown))
        self.stage = stage
        previous = self._deliveries.get(incident.id) or self._store.delivery(incident.id)
        decision = decide(
            incident,
            report,
            previous,
            self._silences,
            self._notify,
            now,
            urgent=urgent,
            hold_until=self._hold(incident),
        )
        if decision.notifications or decision.delivery != previous or decision.done:
            self._store.save_delivery(decision.delivery, decision.notifications, done=decision.done)
        if decision.done:
            self._forget(incident.id)
        else:
            self._deliveries[incident.id] = decision.delivery
            if decision.next_at is None:
                self._due.pop(incident.id, None)
            else:
                self._due[incident.id] = decision.next_at
        if decision.delivery.posted and incident.id in self._charts:
            self._post_chart(self._charts.pop(incident.id), decision.delivery, now)
        if decision.delivery.posted and incident.id in self._bundles:
            for captured in self._bundles.pop(incident.id):
                self._post_file(
                    captured.incident_id, captured.text, captured.path, decision.delivery, now
                )
        if decision.notifications:
            self._queued()

    def _hold(self, incident: Incident) -> datetime | None:
        """Until when the first post (and the offers on it) waits for the memory evidence
        that sizes its bump; None once it answered, its deadline passed, or the card is out."""
        due = self._evidence_due.get(incident.id)
        if due is None or not memory_evidence.sized_from_evidence(incident):
            return None
        delivery = self._deliveries.get(incident.id) or self._store.delivery(incident.id)
        return None if delivery is not None and delivery.posted else due

    def _post_chart(self, measured: Measured, delivery: Delivery, now: datetime) -> None:
        """The memory chart in the card's thread (queued after the post it answers)."""
        self._post_file(measured.incident_id, thread_text(measured), measured.chart, delivery, now)

    def _post_file(
        self, incident_id: str, text: str, path: str, delivery: Delivery, now: datetime
    ) -> None:
        """A file in the card's thread (queued after the post it answers)."""
        self._store.enqueue(
            Notification(
                incident_id,
                NotificationKind.REPLY,
                delivery.channel,
                None,
                text,
                now,
                attachment=path,
            )
        )
        self._queued()

    def _on_captured(self, captured: Captured, now: datetime) -> None:
        """An evidence bundle was kept: into the card's thread, now or once it is posted."""
        if not captured.path:
            log.warning("%s: %s", captured.incident_id, captured.problem)
            return
        delivery = self._deliveries.get(captured.incident_id) or self._store.delivery(
            captured.incident_id
        )
        if delivery is not None and delivery.posted:
            self._post_file(captured.incident_id, captured.text, captured.path, delivery, now)
        else:
            self._bundles.setdefault(captured.incident_id, []).append(captured)

    def _refresh(self, incident_id: str, now: datetime, *, urgent: bool) -> None:
        incident = (
            self._correlator.get(incident_id)
            or self._resolved.get(incident_id)
            or self._store.incident(incident_id)
        )
        if incident is None:
            self._forget(incident_id)
            return
        incident = self._annotated(incident)
        self._decide(incident, self._store.proposals_for_incident(incident_id), now, urgent=urgent)

    def _notice_proposal_changes(self, now: datetime) -> None:
        """Cards of incidents whose proposals moved since the last look (any process)."""
        urgent: dict[str, bool] = {}
        while True:
            changes = self._store.proposal_changes(self._seen_change)
            for change in changes:
                self._metrics.proposals.labels(state=str(change.to_state)).inc()
                urgent[change.incident_id] = urgent.get(change.incident_id, False) or _is_urgent(
                    change
                )
            if not changes:
                break
            self._seen_change = changes[-1].seq
        for incident_id, is_urgent in urgent.items():
            self._refresh(incident_id, now, urgent=is_urgent)

    def _notice_silences(self, now: datetime) -> None:
        """A silence added, ended or expired: every card is decided again."""
        current = self._store.active_silences(now)
        if {s.id: s.ends_at for s in current} == {s.id: s.ends_at for s in self._silences}:
            return
        self._silences = current
        for incident in self._correlator.open_incidents():
            self._due[incident.id] = now
        for incident_id in self._deliveries:
            self._due[incident_id] = now

    def _say_in_thread(self, incident_id: str, text: str, now: datetime) -> None:
        delivery = self._deliveries.get(incident_id) or self._store.delivery(incident_id)
        if delivery is None or not delivery.posted:
            return  # the card is not out yet; it will show the history when it is
        reply = Notification(incident_id, NotificationKind.REPLY, delivery.channel, None, text, now)
        self._store.enqueue(reply)
        self._queued()

    def _forget(self, incident_id: str) -> None:
        self._waiting.pop(incident_id, None)
        self._measured.pop(incident_id, None)
        self._evidence_due.pop(incident_id, None)
        self._charts.pop(incident_id, None)
        self._deliveries.pop(incident_id, None)
        self._due.pop(incident_id, None)
        self._resolved.pop(incident_id, None)


def _is_urgent(change: ProposalChange) -> bool:
    if change.to_state in _URGENT:
        return True
    return change.to_state is S.OFFERED and change.actor != approvals.SYSTEM_ACTOR


def _cause(incident: Incident) -> str:
    primary = incident.diagnosis.primary
    where = str(incident.workload) if incident.workload else incident.key
    return f"{primary.category if primary else 'no failure'} on {where}"
