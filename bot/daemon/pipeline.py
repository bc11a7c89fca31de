"""The main flow, readable top to bottom, on one thread that owns the open incidents.

Why this exists: everything pitcrew observes ends here, and the order of the
steps is the product's promise (docs/design.md, "The pipeline"):

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

What it keeps about each incident until its card is final is one record
(`bot.daemon.tracked`), forgotten whole; what a card waits for besides its own
timing (a live check's answer, memory evidence) is one `Hold` that
`notify.decide` weighs with `group_wait` (`tracked(id).held` says which held it).

On start, `restore` takes back the open incidents and unfinished cards from
the store and reports actions a crash interrupted in their card's thread;
those are never run again. The store is reached through `bot.daemon.ports`.
The queue and the thread are `bot.daemon.taking`'s, which hands each item to
`process`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from bot.core.actions import approvals, policy, progress
from bot.core.diagnosis.analysis import findings_from_hits
from bot.core.incidents.correlator import Change, ChangeKind, Correlator
from bot.core.incidents.notify import (
    Delivery,
    Hold,
    NotifyConfig,
    decide,
    evidence_hold,
)
from bot.core.incidents.rayjob_owners import owners_named
from bot.core.incidents.reports import build_report
from bot.core.incidents.workloads import key_text
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
from bot.daemon.budget import BudgetedClassifier, OverBudgetError
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
from bot.daemon.tracked import Tracked, Tracking
from bot.daemon.unexplained import Unexplained

log = logging.getLogger("pitcrew.pipeline")

S = ProposalState
# Proposal moves a person is waiting to see on the card (the update interval is skipped).
_URGENT = frozenset({S.APPROVED, S.RUNNING, S.SUCCEEDED, S.FAILED, S.REJECTED})
# Changes after which the incident may offer other actions than before.
_RESHAPED = frozenset({ChangeKind.OPENED, ChangeKind.UPDATED})
_OPENED = "incident %s opened: %s; its card is posted after notify.group_wait (%s s)"
_UNRENDERED = (
    "incident %s: the text of playbook %s (%s) could not be rendered, "
    "the card shows its plain text: %s"
)


def _nothing() -> None:
    return None


def _unchecked(incident_id: str, offers: Sequence[ActionOffer]) -> bool:
    return False  # without live checks, an offer waiting on a fact stays withheld


@dataclass(frozen=True)
class PipelineConfig:
    """How the pipeline decides: when cards go out (`notify`), whether it offers
    actions (`propose`) and how long an offer stands (`proposal_ttl`), and how long a
    card waits for a live check's answer before it goes out as it is (`live_hold`)."""

    notify: NotifyConfig = field(default_factory=NotifyConfig)
    propose: bool = True
    proposal_ttl: timedelta = policy.DEFAULT_TTL
    live_hold: timedelta = timedelta(seconds=30)
    resume_running: bool = False  # a new leader finishes RUNNING proposals: not interrupted


@dataclass(frozen=True)
class Workers:
    """The other threads the pipeline works with, each answering later on its queue:
    the outbox it wakes once notifications are queued, the live checks an offer waits
    on (`check_live` is True when an answer will come as `LiveFacts`), the memory
    evidence of memory incidents and the evidence bundles of RayJobs and RayClusters."""

    wake_outbox: Callable[[], None] = _nothing
    check_live: Callable[[str, Sequence[ActionOffer]], bool] = _unchecked
    memory: MemoryWorker | None = None
    capture: CaptureWorker | None = None


class Pipeline:
    """Takes items in, one at a time (`process`; `bot.daemon.taking` calls it on its
    thread, tests and the benchmark directly with a hand-driven clock)."""

    def __init__(
        self,
        classifier: BudgetedClassifier,
        correlator: Correlator,
        store: PipelineStore,
        clock: Clock,
        *,
        config: PipelineConfig | None = None,
        workers: Workers | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        """`classifier` classifies within its budget, which the correlator's assessment
        (`bot.daemon.budget.budgeted_assess`) and the rendering of cards share."""
        self.stage = "pipeline"  # the step in progress, for the thread's failure policy
        self._classifier = classifier
        self._budget = classifier.budget
        self._correlator = correlator
        self._store = store
        self._clock = clock
        self._config = config or PipelineConfig()
        self._workers = workers or Workers()
        self._memory = self._workers.memory
        self._metrics = metrics or Metrics()
        self._tracked = Tracking()
        self._unexplained = Unexplained(store, correlator, classifier)
        self._silences: tuple[Silence, ...] = ()
        self._seen_change = 0

    def tracked(self, incident_id: str) -> Tracked | None:
        """What the pipeline keeps about an incident until its card is final (None once
        forgotten); its `held` answers "why is this card late?"."""
        return self._tracked.get(incident_id)

    # -- after a restart -----------------------------------------------------------------

    def restore(self) -> None:
        """Take back open incidents and unfinished cards; report interrupted actions."""
        now = self._clock()
        open_incidents = self._store.open_incidents()
        self._correlator.restore(open_incidents)
        self._seen_change = self._store.last_proposal_change()
        self._silences = self._store.active_silences(now)
        unfinished = self._store.pending_deliveries()
        for delivery in unfinished:
            tracked = self._tracked.of(delivery.incident_id)
            tracked.delivery, tracked.due = delivery, now
        for incident in open_incidents:
            self._tracked.of(incident.id).due = now
        if not self._config.resume_running:  # else `Runner.take_over` finishes them
            self._recover_interrupted(now)
        for incident in open_incidents:  # the evidence is asked for again, off this thread
            self._ask_memory(incident, now)
        self._metrics.open_incidents.set(len(self._correlator))
        log.info(
            "restored %s and %s",
            _count(len(open_incidents), "open incident"),
            _count(len(unfinished), "unfinished card"),
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
            self._tracked.of(failed.incident_id).due = now

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
        try:
            for finding in findings:
                for change in self._correlator.add(finding, now):
                    latest[change.incident.id] = self._keep(change, (finding,), now)
                    if change.kind in _RESHAPED:
                        reshaped.add(change.incident.id)
            for change in self._unexplained.keep(observation, latest, now):
                latest[change.incident.id] = self._keep(change, (), now)
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
            capture = self._workers.capture
            if capture is not None and incident.state is IncidentState.OPEN:
                capture.ask(incident)
        self._metrics.open_incidents.set(len(self._correlator))

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
        tracked = self._tracked.get(answer.incident_id)
        if tracked is not None and tracked.live_since is not None:
            tracked.answered()
        change = self._correlator.learn(answer.incident_id, answer.answer, now)
        if change is not None:
            self._record(change, (), now)
        elif (incident := self._correlator.get(answer.incident_id)) is not None:
            self._follow_up(self._annotated(incident), True, now)  # offered, now checked
        else:
            self._refresh(answer.incident_id, now, urgent=False)

    def _tick(self, now: datetime) -> None:
        for incident_id, tracked in self._tracked.items():
            live = tracked.live_since
            if live is not None and now - live >= self._config.live_hold:
                tracked.stop_waiting()  # the answer was lost: offers and card go out as they are
                if (incident := self._correlator.get(incident_id)) is not None:
                    self._follow_up(self._annotated(incident), True, now)
            if tracked.evidence_due is not None and tracked.evidence_due <= now:
                self._no_evidence_in_time(incident_id, tracked, now)
        for change in self._correlator.tick(now):
            self._record(change, (), now)
        self._notice_proposal_changes(now)
        self._notice_silences(now)
        due = [i for i, t in self._tracked.items() if t.due is not None and t.due <= now]
        for incident_id in due:
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
        if change.asks and self._workers.check_live(incident.id, change.asks):
            self._tracked.of(incident.id).hold_for_live_check(now)
        if change.kind is ChangeKind.OPENED:
            self._metrics.incidents.inc()
            wait = self._config.notify.group_wait.total_seconds()
            log.info(_OPENED, incident.id, _cause(incident), f"{wait:g}")
        elif change.primary_changed:
            log.info("incident %s: root cause is now %s", incident.id, _cause(incident))
        elif change.kind is ChangeKind.RESOLVED:
            self._tracked.of(incident.id).resolved = incident
            log.info("incident %s resolved: %s", incident.id, incident.resolution)
        return incident

    def _count_unrendered(self, incident: Incident) -> None:
        """The incident was assessed again and its card is decided now: each finding
        whose playbook text fell back to plain text is one failed render on that card,
        counted and logged (once per card, however many findings the evidence added)."""
        for failure in incident.diagnosis.unrendered:
            self._metrics.render_failures.labels(playbook=failure.playbook).inc()
            log.warning(_UNRENDERED, incident.id, failure.playbook, failure.source, failure.reason)

    def _ask_memory(self, incident: Incident, now: datetime) -> None:
        """Ask for an open incident's memory evidence (off this thread); the first time,
        its card's first post may wait for the answer until `evidence_hold`."""
        if self._memory is None or incident.state is not IncidentState.OPEN:
            return
        if self._memory.ask(incident):
            deadline = timedelta(seconds=self._memory.timeout)
            hold = evidence_hold(incident.opened_at, now, deadline, self._config.notify)
            self._tracked.of(incident.id).evidence_due = hold

    def _no_evidence_in_time(self, incident_id: str, tracked: Tracked, now: datetime) -> None:
        """The evidence's deadline passed unanswered: the card goes out, its bump sized by
        the factor, saying why (a late answer still updates it)."""
        tracked.evidence_due = None
        if self._memory is None or tracked.measured is not None:
            return
        seconds = f"{self._memory.timeout:g}"
        problem = f"no memory metrics: Prometheus did not answer within {seconds} s"
        self._on_measured(Measured(incident_id, None, problem), now)

    def _annotated(self, incident: Incident) -> Incident:
        tracked = self._tracked.get(incident.id)
        measured = tracked.measured if tracked is not None else None
        if self._memory is None or measured is None:
            return incident
        return self._memory.annotate(incident, measured)

    def _on_measured(self, measured: Measured, now: datetime) -> None:
        """Memory evidence arrived: the card's memory line, the bump resized, the chart
        for the card's thread once the card is out."""
        incident = self._correlator.get(measured.incident_id)
        if incident is None or self._memory is None:
            return
        tracked = self._tracked.of(incident.id)
        tracked.evidence_due = None
        known = tracked.measured
        if measured.evidence is None and known is not None and known.evidence is None:
            return  # the deadline already said so: the card keeps its reason
        charted = bool(incident.memory)  # restored: its chart is in the thread already
        tracked.measured = measured
        incident = self._annotated(incident)
        self._store.upsert_incident(incident)
        if measured.chart and not charted:
            tracked.chart = measured
        self._follow_up(incident, True, now)

    def _follow_up(self, incident: Incident, reshaped: bool, now: datetime) -> None:
        """Proposals in step with what the incident now offers, then the card."""
        proposals = self._proposals(incident, reshaped, now)
        self._decide(incident, proposals, now, urgent=False)

    def _proposals(self, incident: Incident, reshaped: bool, now: datetime) -> tuple[Proposal, ...]:
        existing = self._store.proposals_for_incident(incident.id)
        if not self._config.propose or not reshaped:  # resolved: reshaped only by a merge
            return existing
        if self._offers_wait(incident):  # offered once checked and sized, not twice
            return existing
        changed = approvals.reconcile(incident, existing, now, self._config.proposal_ttl)
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
        """What the chat should see now (notify.decide, given what the card waits for:
        `_hold`), queued with its delivery record."""
        stage, self.stage = self.stage, "rendering"
        shown = tuple(proposals)
        report = self._budget.run("rendering", lambda: build_report(incident, shown))
        self.stage = stage
        previous = self._delivery(incident.id)
        decision = decide(
            incident,
            report,
            previous,
            self._silences,
            self._config.notify,
            now,
            urgent=urgent,
            hold=self._hold(incident, previous),
        )
        if decision.notifications or decision.delivery != previous or decision.done:
            self._store.save_delivery(decision.delivery, decision.notifications, done=decision.done)
        if decision.done:
            self._tracked.forget(incident.id)
        else:
            tracked = self._tracked.of(incident.id)
            tracked.delivery, tracked.due, tracked.held = (
                decision.delivery,
                decision.next_at,
                decision.held,
            )
            if decision.delivery.posted:
                self._post_waiting_files(tracked, decision.delivery, now)
        if decision.notifications:
            self._workers.wake_outbox()

    def _hold(self, incident: Incident, delivery: Delivery | None) -> Hold | None:
        """What the card waits for besides its own timing (`Tracked.hold`)."""
        tracked = self._tracked.get(incident.id)
        return tracked.hold(incident, delivery, self._config.live_hold) if tracked else None

    def _offers_wait(self, incident: Incident) -> bool:
        """Whether the incident's offers wait for its live checks' answers (a proposal is
        stored only once checked: one proposal per decision) or for the memory evidence
        that sizes its bump."""
        tracked = self._tracked.get(incident.id)
        if tracked is None or tracked.live_since is not None:
            return tracked is not None
        if tracked.evidence_due is None:
            return False
        return tracked.evidence_hold(incident, self._delivery(incident.id)) is not None

    def _delivery(self, incident_id: str) -> Delivery | None:
        """What the chat has seen of the incident (the store's, when not kept)."""
        tracked = self._tracked.get(incident_id)
        known = tracked.delivery if tracked is not None else None
        return known or self._store.delivery(incident_id)

    def _post_waiting_files(self, tracked: Tracked, delivery: Delivery, now: datetime) -> None:
        """The chart and bundles that waited for the card, into its thread now it is out."""
        if tracked.chart is not None:
            chart, tracked.chart = tracked.chart, None
            self._post_file(chart.incident_id, thread_text(chart), chart.chart, delivery, now)
        bundles, tracked.bundles = tracked.bundles, []
        for captured in bundles:
            self._post_file(captured.incident_id, captured.text, captured.path, delivery, now)

    def _post_file(
        self, incident_id: str, text: str, path: str, delivery: Delivery, now: datetime
    ) -> None:
        """A file in the card's thread (queued after the post it answers)."""
        kind, channel = NotificationKind.REPLY, delivery.channel
        reply = Notification(incident_id, kind, channel, None, text, now, attachment=path)
        self._store.enqueue(reply)
        self._workers.wake_outbox()

    def _on_captured(self, captured: Captured, now: datetime) -> None:
        """An evidence bundle was kept: into the card's thread, now or once it is posted
        (an incident forgotten unposted has no thread: the store keeps the bundle)."""
        incident_id = captured.incident_id
        if not captured.path:
            log.warning("%s: %s", incident_id, captured.problem)
            return
        delivery = self._delivery(incident_id)
        if delivery is not None and delivery.posted:
            self._post_file(incident_id, captured.text, captured.path, delivery, now)
        elif incident_id in self._tracked or self._correlator.get(incident_id) is not None:
            self._tracked.of(incident_id).bundles.append(captured)
        else:
            never = "incident %s was never posted: its bundle is kept for `pitcrew bundle %s`"
            log.info(never, incident_id, incident_id)

    def _refresh(self, incident_id: str, now: datetime, *, urgent: bool) -> None:
        tracked = self._tracked.get(incident_id)
        incident = (
            self._correlator.get(incident_id)
            or (tracked.resolved if tracked is not None else None)
            or self._store.incident(incident_id)
        )
        if incident is None:
            self._tracked.forget(incident_id)
            return
        proposals = self._store.proposals_for_incident(incident_id)
        undone = self._correlator.remediated(incident_id, progress.unfinished(proposals), now)
        incident = self._keep(undone, (), now) if undone is not None else incident
        self._decide(self._annotated(incident), proposals, now, urgent=urgent)

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
            self._tracked.of(incident.id).due = now
        for _, tracked in self._tracked.items():
            if tracked.delivery is not None:
                tracked.due = now

    def _say_in_thread(self, incident_id: str, text: str, now: datetime) -> None:
        delivery = self._delivery(incident_id)
        if delivery is None or not delivery.posted:
            return  # the card is not out yet; it will show the history when it is
        reply = Notification(incident_id, NotificationKind.REPLY, delivery.channel, None, text, now)
        self._store.enqueue(reply)
        self._workers.wake_outbox()


def _is_urgent(change: ProposalChange) -> bool:
    if change.to_state in _URGENT:
        return True
    return change.to_state is S.OFFERED and change.actor != approvals.SYSTEM_ACTOR


def _cause(incident: Incident) -> str:
    primary = incident.diagnosis.primary
    where = str(incident.workload) if incident.workload else key_text(incident.key)
    return f"{primary.category if primary else 'no failure'} on {where}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
