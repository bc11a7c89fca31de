"""The values that flow through pitcrew's pipeline (docs/design.md, "The data model").

signals -> findings -> incidents -> proposals -> reports. All are immutable;
stages take values and return new ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from bot.core.taxonomy import Category

EMPTY: Mapping[str, str] = MappingProxyType({})


def frozen_map(values: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A read-only copy, so values stay immutable once built."""
    return MappingProxyType(dict(values or {}))


class SourceKind(StrEnum):
    """Where a signal was observed (docs/design.md, "The data model", says what each is)."""

    K8S_EVENT = "k8s_event"
    POD_STATUS = "pod_status"
    NODE_STATUS = "node_status"
    RAY_JOB = "ray_job"
    RAY_CLUSTER = "ray_cluster"
    RAY_ACTOR = "ray_actor"
    DRIVER_LOG = "driver_log"
    WORKER_LOG = "worker_log"
    ALERT = "alert"  # an Alertmanager alert (bot.core.inputs.alerts)


LOG_SOURCES = frozenset({SourceKind.DRIVER_LOG, SourceKind.WORKER_LOG})


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    CRITICAL = "critical"

    @property
    def weight(self) -> int:
        return _SEVERITY_WEIGHT[self]


_SEVERITY_WEIGHT = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2, Severity.CRITICAL: 3}


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """A Kubernetes object or a Ray entity (kind `RayJobSubmission`, `RayActor`)."""

    kind: str
    name: str
    namespace: str = ""

    def __str__(self) -> str:
        scope = f"{self.namespace}/" if self.namespace else ""
        return f"{scope}{self.kind.lower()}/{self.name}"


@dataclass(frozen=True, slots=True)
class Signal:
    """One normalized observation: a pod status, an event, a job status, a log window."""

    source: SourceKind
    text: str
    reason: str = ""
    fields: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    obj: ObjectRef | None = None
    workload: ObjectRef | None = None
    cluster: str = ""
    time: datetime | None = None
    origin: str = ""
    line: int | None = None

    @property
    def namespace(self) -> str:
        for ref in (self.workload, self.obj):
            if ref is not None and ref.namespace:
                return ref.namespace
        return ""


@dataclass(frozen=True, slots=True)
class Evidence:
    """A line (or a few) that made a playbook match, with where it came from."""

    text: str
    source: SourceKind
    origin: str = ""
    line: int | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    """A playbook matched one or more signals of one input or workload."""

    playbook: str
    category: Category
    severity: Severity
    title: str
    signature: str
    source: SourceKind
    captures: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    evidence: tuple[Evidence, ...] = ()
    count: int = 1
    weak: bool = False
    obj: ObjectRef | None = None
    workload: ObjectRef | None = None
    fields: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    time: datetime | None = None
    reason: str = ""
    explained_by: tuple[Category, ...] = ()
    """Causes that, found too, make this finding their symptom (its signatures' `suppressed_by`)."""

    @property
    def strength(self) -> str:
        """`strong` (a status reason, an exit code with its reason, an exception type) or
        `weak` (boilerplate lists of possible causes, prose): only weak signatures matched."""
        return "weak" if self.weak else "strong"


class Role(StrEnum):
    PRIMARY = "primary"
    SECONDARY = "secondary"


@dataclass(frozen=True, slots=True)
class RankedFinding:
    finding: Finding
    role: Role
    symptom_of: Category | None = None
    """The root cause (or a finding it explains) that this secondary finding follows from."""
    why: str = ""
    """One line saying why this finding is a symptom of `symptom_of`."""


@dataclass(frozen=True, slots=True)
class ActionOffer:
    """An action a playbook may offer, and whether the engine offers it here and why not."""

    action: str
    params: Mapping[str, Any]
    offered: bool
    reason: str
    playbook: str
    preview: str = ""
    # The live fact (a `FACTS` id) the action is withheld for, only because it is unknown.
    pending_fact: str = ""
    # What this pitcrew lacks to run it (an executor kind, an approver: the setting to
    # configure), when that is why it is withheld (`bot.core.actions.reach`).
    lacks: str = ""


@dataclass(frozen=True, slots=True)
class RenderFailure:
    """A playbook's diagnosis template that failed or ran over its render budget: its
    finding's line of the explanation is the plain fallback text instead."""

    playbook: str
    source: str
    """The playbook's file, with the line of its `diagnosis` when known (`path:line`)."""
    reason: str


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """The engine's verdict on one body of evidence: ranked findings, actions, explanation."""

    findings: tuple[RankedFinding, ...]
    actions: tuple[ActionOffer, ...]
    text: str
    unrendered: tuple[RenderFailure, ...] = ()
    """The renders of `text` that fell back to plain text, one per finding, and why."""
    cause: str = ""
    """The root cause's own explanation (its playbook's `diagnosis`, rendered)."""
    remediation: tuple[str, ...] = ()
    """The root cause's playbook's `remediation:` steps, for people."""
    runbook: tuple[str, ...] = ()
    """The root cause's playbook's `runbook:` links."""
    unknown: tuple[str, ...] = ()
    """With no finding: the input's lines that look like a failure no playbook knows
    (`origin:line  text`), so the answer is "pitcrew does not know this failure", not
    "No failure found"."""

    @property
    def primary(self) -> Finding | None:
        for ranked in self.findings:
            if ranked.role is Role.PRIMARY:
                return ranked.finding
        return None

    @property
    def secondary(self) -> tuple[Finding, ...]:
        return tuple(r.finding for r in self.findings if r.role is Role.SECONDARY)

    @property
    def categories(self) -> frozenset[str]:
        """The classes the evidence shows on their own: findings listed only because a
        found cause explains them (their `suppressed_by`) are left out."""
        return frozenset(
            str(r.finding.category)
            for r in self.findings
            if r.symptom_of is None or r.symptom_of not in r.finding.explained_by
        )


class IncidentState(StrEnum):
    OPEN = "open"
    RESOLVED = "resolved"


@dataclass(frozen=True, slots=True)
class IncidentNote:
    """One line of an incident's own history (opened, root cause changed, resolved)."""

    at: datetime
    text: str


@dataclass(frozen=True, slots=True)
class RayJobAttempt:
    """One run of a RayJob under KubeRay's `backoffLimit` retries, on its own RayCluster
    (`bot.core.incidents.kuberay_retries`)."""

    cluster: str
    number: int = 0
    """`status.failed` once KubeRay counted this attempt's failure; 0 while it runs."""
    reason: str = ""  # the failure's status.reason
    cause: str = ""  # the most causal class seen on this attempt's RayCluster
    detail: str = ""  # what else identifies the cause (an OOM's memory limit)
    backoff_limit: int = 0  # spec.backoffLimit as of the failure
    deployment: str = ""  # jobDeploymentStatus as of the failure (Retrying, Failed …)


@dataclass(frozen=True, slots=True)
class AlertFact:
    """An Alertmanager alert an incident's card shows: its name, state and links, and the
    labels a silence in Alertmanager would match (`bot.core.incidents.alert_facts`)."""

    name: str
    fingerprint: str
    status: str  # firing | resolved
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    summary: str = ""
    generator_url: str = ""  # the rule's expression in Prometheus
    external_url: str = ""  # the Alertmanager that sent it
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY)


@dataclass(frozen=True, slots=True)
class Incident:
    """Findings about one workload inside a correlation window, with one primary cause."""

    id: str
    key: str
    opened_at: datetime
    updated_at: datetime
    diagnosis: Diagnosis
    workload: ObjectRef | None = None
    cluster: str = ""
    namespace: str = ""
    ray_job_id: str = ""
    counts: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    state: IncidentState = IncidentState.OPEN
    resolved_at: datetime | None = None
    # Added for correlation and notification (bot.core.incidents.correlator and .notify);
    # all optional.
    last_seen_at: datetime | None = None
    keys: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    objects: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    objects_capped: tuple[str, ...] = ()
    # Per playbook, how many distinct objects of each kind (`{"RayJob": 1, "Pod": 1}`).
    object_kinds: Mapping[str, Mapping[str, int]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    revision: int = 0
    resolution: str = ""
    notes: tuple[IncidentNote, ...] = ()
    memory: str = ""  # what the pod's memory did before the kill (bot.core.actions.memory_evidence)
    attempts: tuple[RayJobAttempt, ...] = ()  # a RayJob's runs under KubeRay's retries
    alerts: tuple[AlertFact, ...] = ()  # the Alertmanager alerts among its evidence
    # What a remediation left undone (a plan stopped part way, a change whose pods are
    # not renewed yet): while it is, later evidence of the workload joins this incident.
    unfinished: str = ""
    # With no known cause: the failure-looking lines of its evidence no playbook knows
    # (`origin:line: text`), the lines a person reads first.
    unexplained: tuple[str, ...] = ()


class ProposalState(StrEnum):
    OFFERED = "offered"
    APPROVED = "approved"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    REJECTED = "rejected"
    EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """How one step of a run ended (`result` None: not run, an earlier step stopped it)."""

    action: str
    result: ActionResult | None = None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Transition:
    to_state: ProposalState
    at: datetime
    actor: str = ""
    reason: str = ""
    from_state: ProposalState | None = None
    outcome: str = ""  # of a move to FAILED: an `ActionResult` (refused, failed or bug)
    steps: tuple[StepOutcome, ...] = ()  # of a move to SUCCEEDED or FAILED: each step's end


@dataclass(frozen=True, slots=True)
class PlanStep:
    """A further step of a plan: run, checked and verified after the steps before it."""

    action: str
    params: Mapping[str, Any]
    preview: str
    preconditions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Proposal:
    """An offered action with its concrete target, parameters, preview and history; a
    plan when `then` names further steps (one Approve runs them all, in order)."""

    id: str
    incident_id: str
    action: str
    params: Mapping[str, Any]
    preview: str
    state: ProposalState
    created_at: datetime
    expires_at: datetime
    target: ObjectRef | None = None
    preconditions: tuple[str, ...] = ()
    history: tuple[Transition, ...] = field(default=())
    # Added for approvals (bot.core.actions.approvals); all optional.
    namespace: str = ""
    workload: str = ""  # the incident's, `namespace/kind/name` (approval scopes match it)
    playbook: str = ""
    reason: str = ""
    approvals: tuple[str, ...] = ()
    version: int = 0
    supersedes: str = ""  # the offer this one replaced when its preview went stale
    rank: int = 0  # its place among the incident's offers (`bot.core.actions.order`)
    then: tuple[PlanStep, ...] = ()  # a plan's steps after this action, in order
    cluster: str = ""  # whose pitcrew offered it; "" (stored before clusters): the local one


@dataclass(frozen=True, slots=True)
class ReportAction:
    proposal_id: str
    action: str
    preview: str
    state: ProposalState
    impact: str = ""
    steps: tuple[str, ...] = ()  # a plan's steps in order, one line each: `action: preview`
    remains: str = ""  # a change offered alone: what happens then, and what would complete it


@dataclass(frozen=True, slots=True)
class ReportStep:
    """One step of what happened last: `state` in words (applied and verified, refused,
    failed, not run, running, waiting), `detail` what it did or why not."""

    action: str
    state: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class ReportOutcome:
    """What happened last on a card: the decision on an offer (a plan's or one action's)
    and, once it ran, each step's end; `next` says what to do now."""

    proposal_id: str
    action: str  # the action, or a plan's actions in order (`a → b`)
    state: ProposalState
    said: str  # one line: who decided, and how it ended
    steps: tuple[ReportStep, ...] = ()
    next: str = ""


@dataclass(frozen=True, slots=True)
class ReportAlert:
    """One alert on a card: `text` says which and how it stands; the links are URLs."""

    text: str
    source: str = ""  # generatorURL: the rule's expression in Prometheus
    alertmanager: str = ""  # the alert in Alertmanager's UI
    silence: str = ""  # Alertmanager's new-silence form, prefilled with the alert's labels


@dataclass(frozen=True, slots=True)
class Report:
    """What a card shows, neutral of the chat that renders it."""

    title: str
    severity: Severity
    status: str
    where: Mapping[str, str]
    primary: str
    secondary: tuple[str, ...]
    evidence: tuple[str, ...]
    diagnosis: str
    actions: tuple[ReportAction, ...] = ()
    withheld: tuple[str, ...] = ()
    history: tuple[str, ...] = ()
    memory: str = ""
    # The three questions a card answers first: what broke (one sentence naming the
    # object and the number), what to do when no action fits (the playbook's first
    # remediation steps and runbook links), and how sure (strong or likely, and why).
    cause: str = ""
    steps: tuple[str, ...] = ()
    runbook: tuple[str, ...] = ()
    sureness: str = ""
    # Every evidence line, for the card's thread (`evidence` keeps the decisive few).
    details: tuple[str, ...] = ()
    # Which incident the card is for, and since when: a chat can find a card it may
    # already have posted (an answer lost to a timeout or a crash) before posting again.
    incident_id: str = ""
    opened_at: datetime | None = None
    # The Alertmanager alerts among the evidence, one line each (name, state, since), with
    # their links: the rule in Prometheus, the alert in Alertmanager, a prefilled silence.
    alerts: tuple[ReportAlert, ...] = ()
    # What happened last (the card leads with it), and what this pitcrew lacks to act on
    # the card (each a setting to configure), when that is why nothing can be approved.
    latest: ReportOutcome | None = None
    configure: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Silence:
    """Mutes notifications whose labels match every key of `matchers` until `ends_at`.

    Keys: `playbook`, `category`, `namespace`, `workload`, `incident`."""

    id: str
    matchers: Mapping[str, str]
    starts_at: datetime
    ends_at: datetime
    author: str
    reason: str = ""


class NotificationKind(StrEnum):
    POST = "post"
    UPDATE = "update"
    REPLY = "reply"


@dataclass(frozen=True, slots=True)
class Notification:
    """A message for the chat, queued in the outbox until delivered."""

    incident_id: str
    kind: NotificationKind
    channel: str
    report: Report | None
    text: str = ""
    created_at: datetime | None = None
    id: int | None = None
    attachment: str = ""  # a file (a chart) posted with a reply, its text as the comment


class ActionResult(StrEnum):
    """How an action ended. Three ways to not succeed, told apart everywhere (the
    proposal's history, the card, the ledger, the metrics): *refused*, a precondition
    no longer held and nothing was changed; *failed*, the world said no (an API
    server, a remediation job); *bug*, pitcrew's own fault (its traceback is logged)."""

    STARTED = "started"
    SUCCEEDED = "succeeded"
    REFUSED = "refused"
    FAILED = "failed"
    BUG = "bug"
    INTERRUPTED = "interrupted"


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """What an executed action did, for the audit trail."""

    proposal_id: str
    action: str
    approver: str
    started_at: datetime
    result: ActionResult
    detail: str = ""
    finished_at: datetime | None = None
    cluster: str = ""  # where it ran; "" (stored before clusters): the local one
