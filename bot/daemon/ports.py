"""The ports: every interface the daemon's workers depend on and the adapters implement,
so the daemon never imports an adapter.

Why this exists: the pipeline, the outbox worker, the service and the action runner need
durable state, a chat, sources, a queue to put things on and executors, but only the adapters
talk to the world. They name what they need here, as Protocols the adapters satisfy
structurally (`bot.adapters.store.store.Store` the stores, on SQLite or PostgreSQL,
`bot.adapters.slack.chat` and `bot.adapters.console` the `Chat`, the Kubernetes, Ray and
KubeRay sources the `Source`, the Kubernetes, Ray and echo executors the `Executor`, which
`bot.daemon.executor` dispatches to); tests and benchmarks may pass anything that does too. A
source puts what it sees into a `Sink` (the pipeline's queue); which kinds of source exist and
how each is built is `bot.app.factories`, what they put on the queue `bot.daemon.feed`. The
clock is a port as well: every worker asks it for `now`, so tests can drive time by hand. The
other way round, a chat that takes commands and clicks (Slack) calls the daemon's
`ChatService` (`bot.daemon.service.Service`) and explains its answers (`Answer`, its
`Outcome`, `Status`, ...), defined here so the adapter uses the service's own values. Pure:
values and Protocols only (the Lease's: `bot.daemon.lease`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from bot.core.actions.approvals import LiveCheck
from bot.core.actions.policy import ChatUser
from bot.core.actions.step import Step
from bot.core.diagnosis.unmatched import FailureLine, UnmatchedShape
from bot.core.errors import PermanentError, StaleTermError, TransientError
from bot.core.incidents.notify import Delivery
from bot.core.model import (
    ActionResult,
    Finding,
    Incident,
    LedgerEntry,
    Notification,
    ObjectRef,
    Proposal,
    ProposalState,
    Report,
    Silence,
)
from bot.daemon.feed import Item

Clock = Callable[[], datetime]
"""Returns the current time, timezone-aware."""


def utcnow() -> datetime:
    """The real clock."""
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class ProposalChange:
    """One recorded transition of a proposal, with the store's sequence number."""

    seq: int
    proposal_id: str
    incident_id: str
    to_state: ProposalState
    actor: str
    at: datetime


@dataclass(frozen=True, slots=True)
class SpooledRow:
    """Evidence kept in the store until the pipeline has taken it in (`bot.daemon.spool`
    says what `meta` and `body` hold)."""

    id: int
    meta: str
    body: bytes
    takes: int = 0  # times the pipeline began on it and did not finish


@dataclass(frozen=True, slots=True)
class SetAside:
    """Kept evidence a bug or a budget stopped (`pitcrew status`): `failed` is taken in
    again at the next start, `quarantined` only once `pitcrew requeue` releases it."""

    id: int
    state: str
    stage: str
    problem: str
    at: datetime | None
    takes: int
    size: int


class IntakeStore(Protocol):
    """Accepted evidence on disk before it is acknowledged, until it is taken in."""

    def spool(self, meta: str, body: bytes, at: datetime) -> int: ...

    def unspool(self, row_id: int) -> None: ...

    def spooled(self, after: int = 0, limit: int = 64) -> tuple[SpooledRow, ...]: ...

    def queue_all(self) -> int: ...

    def take_released(self, limit: int = 64) -> tuple[SpooledRow, ...]: ...

    def taking(self, row_id: int) -> None: ...

    def set_aside(
        self, row_id: int, state: str, stage: str, problem: str, at: datetime
    ) -> None: ...


class QueuedMessage(Protocol):
    """An undelivered notification as the outbox returns it."""

    @property
    def notification(self) -> Notification: ...

    @property
    def attempts(self) -> int: ...

    @property
    def last_error(self) -> str: ...

    @property
    def held(self) -> str: ...


class ProposalStore(Protocol):
    """Proposals and the compare-and-swap that moves them once."""

    def get_proposal(self, proposal_id: str) -> Proposal | None: ...

    def proposals_for_incident(self, incident_id: str) -> tuple[Proposal, ...]: ...

    def proposals_in_state(self, state: ProposalState) -> tuple[Proposal, ...]: ...

    def create_proposal(self, proposal: Proposal) -> Proposal: ...

    def record_decision(self, decided: Proposal, expected_version: int) -> Proposal:
        """Write a decision of `bot.core.actions.approvals` made from the proposal at
        `expected_version`; raises `approvals.StaleProposalError` when someone wrote it
        first and `approvals.IllegalTransitionError` for a move `LEGAL` does not list."""
        ...


class LedgerStore(Protocol):
    """The action ledger: started before an action runs, finished after; a proposal's
    entry read back (`action_entry`, None: never started)."""

    def start_action(self, entry: LedgerEntry) -> None: ...

    def action_entry(self, proposal_id: str) -> LedgerEntry | None: ...

    def finish_action(
        self, proposal_id: str, result: ActionResult, at: datetime, detail: str = ""
    ) -> LedgerEntry | None: ...

    def mark_interrupted(self, proposal_id: str, at: datetime) -> LedgerEntry | None: ...


class RunnerStore(ProposalStore, LedgerStore, Protocol):
    """What the action runner needs."""


class PipelineStore(ProposalStore, LedgerStore, Protocol):
    """What the pipeline thread needs: incidents, findings, proposals, silences and the
    delivery records written together with the notifications they queue."""

    def upsert_incident(self, incident: Incident) -> None: ...

    def incident(self, incident_id: str) -> Incident | None: ...

    def open_incidents(
        self, namespace: str | None = None, workload: ObjectRef | None = None
    ) -> tuple[Incident, ...]: ...

    def append_findings(
        self, incident_id: str, findings: Iterable[Finding], at: datetime
    ) -> None: ...

    def active_silences(self, now: datetime) -> tuple[Silence, ...]: ...

    def enqueue(self, notification: Notification) -> Notification: ...

    def save_delivery(
        self,
        delivery: Delivery,
        notifications: Iterable[Notification] = (),
        *,
        done: bool = False,
    ) -> tuple[Notification, ...]: ...

    def delivery(self, incident_id: str) -> Delivery | None: ...

    def pending_deliveries(self) -> tuple[Delivery, ...]: ...

    def proposal_changes(self, after: int, limit: int = 1000) -> tuple[ProposalChange, ...]: ...

    def last_proposal_change(self) -> int: ...

    def record_unmatched(self, lines: Iterable[FailureLine], now: datetime) -> int: ...


class OutboxStore(Protocol):
    """The notification outbox and the chat references of delivered cards."""

    def next_due(self, now: datetime) -> QueuedMessage | None: ...

    def mark_delivered(self, message_id: int, chat_ref: str, at: datetime) -> bool: ...

    def mark_failed(
        self, message_id: int, error: str, next_attempt_at: datetime, held: str = ""
    ) -> bool: ...

    def mark_abandoned(self, message_id: int, error: str, at: datetime) -> bool: ...

    def chat_ref(self, incident_id: str, channel: str | None = None) -> str | None: ...

    def pending_notifications(self) -> int: ...


class ServiceStore(ProposalStore, Protocol):
    """What the operations people and chats call need."""

    cluster: str  # this pitcrew's cluster, which its proposals and actions name

    def expired_offers(self, now: datetime) -> tuple[Proposal, ...]: ...

    def open_incidents(
        self, namespace: str | None = None, workload: ObjectRef | None = None
    ) -> tuple[Incident, ...]: ...

    def recent_incidents(self, n: int) -> tuple[Incident, ...]: ...

    def incident(self, incident_id: str) -> Incident | None: ...

    def unmatched(self, limit: int = 50) -> tuple[UnmatchedShape, ...]: ...

    def bundle_sizes(self, incident_id: str) -> list[tuple[str, int, datetime]]:
        """(name, bytes, captured at) of each evidence bundle kept for the incident."""
        ...

    def recent_actions(self, n: int) -> tuple[LedgerEntry, ...]: ...

    def add_silence(self, silence: Silence) -> None: ...

    def silence(self, silence_id: str) -> Silence | None: ...

    def active_silences(self, now: datetime) -> tuple[Silence, ...]: ...

    def expire_silence(self, silence_id: str, at: datetime) -> Silence | None: ...

    def pending_notifications(self) -> int: ...

    def dead_letters(self, limit: int = 20) -> Sequence[QueuedMessage]: ...

    def dead_letter_count(self) -> int: ...

    def held_notifications(self) -> Sequence[QueuedMessage]: ...  # waiting for a person

    def record_fetch(self, fetch: EvidenceFetch) -> None: ...

    def recent_fetches(self, limit: int = 10) -> tuple[EvidenceFetch, ...]: ...

    def unchecked_cards(self) -> KeptUnchecked:
        """Cards posted while Slack's history did not answer, not yet checked."""
        ...

    def set_aside_rows(self) -> tuple[SetAside, ...]: ...

    def requeue(self, row_id: int | None = None) -> int: ...

    def bookmark(self, key: str) -> str | None: ...

    def cleanup(self, now: datetime, retention: timedelta = ...) -> object: ...

    def ping(self) -> None: ...


class Bookmarks(Protocol):
    """Durable string values by key (the store's bookmarks), for sources and executors
    that must remember what they reported or did across restarts. Thread-safe."""

    def get(self, key: str) -> str | None: ...

    def set(self, key: str, value: str) -> None: ...


@dataclass(frozen=True)
class CallableBookmarks:
    """Bookmarks from two functions: `CallableBookmarks(store.bookmark, store.set_bookmark)`."""

    getter: Callable[[str], str | None]
    setter: Callable[[str, str], None]

    def get(self, key: str) -> str | None:
        return self.getter(key)

    def set(self, key: str, value: str) -> None:
        self.setter(key, value)


# -- fencing: a deposed leader's late writes are refused -------------------------------


class Fenced(Protocol):
    """The storage side of fencing, on both stores. A leader elected with term T calls
    `fence(T)` on its store before it acts; from then on every write of that store
    object (a ledger claim or a proposal's compare-and-swap as much as an outbox row or
    a bookmark: every write transaction) first checks, inside its own transaction, that
    T is at least the newest term recorded, and records T as the newest; so once a
    newer leader has fenced the store, each late write of the old one raises
    `bot.core.errors.StaleTermError` and nothing of it is written. A store object never
    fenced (the commands, a standby that only records clicks) writes without a term and
    is never refused."""

    def fence(self, term: int, refused: Callable[[StaleTermError], None] | None = None) -> None:
        """Carry `term` on every later write (`fence` is itself such a write: it raises
        `StaleTermError` at once when a newer term is recorded). `refused` is called with
        the error before it is raised, whatever thread met it (a deposed leader exits)."""
        ...

    def term(self) -> int:
        """The newest term any writer carried (0: never fenced)."""
        ...


# -- keeping what /ingest acknowledged ------------------------------------------------


class WriteFailure(Protocol):
    def write_failure(self) -> str | None: ...


class KeepingStore(IntakeStore, WriteFailure, Protocol):
    """The store's intake rows, and why its last write failed."""


# -- the chat -----------------------------------------------------------------------


class ChatUnavailableError(TransientError):
    """The chat could not take a message now; the outbox keeps it and retries later.

    `retry_after` is the delay the chat asked for (e.g. Slack's 429 Retry-After)."""


class ChatRejectedError(PermanentError):
    """The chat refused a message for good (unknown channel, revoked token): retrying the
    same message cannot help, so the outbox abandons it instead of blocking its queue."""


@dataclass(frozen=True, slots=True)
class Attempt:
    """One try at delivering an outbox message to a card's thread.

    `message_id` names the message the same way on every try and in every process, so
    the chat can mark what it sends with it and, when `uncertain` (an earlier try may
    have reached the chat: it went unanswered, or a process died with it in flight),
    find it in the thread instead of sending it twice. `queued_at` bounds that look."""

    message_id: int
    incident_id: str
    queued_at: datetime | None = None
    uncertain: bool = False


@dataclass(frozen=True, slots=True)
class UncheckedCard:
    """A card posted while the channel's history did not answer, so without the look for
    an earlier card of its incident: until it is checked, the channel may hold two.
    `ts` is the card the chat keeps ("" for a post that went unanswered: one may be in
    the channel, which one is kept is not known yet); `since` bounds the look."""

    channel_id: str
    ts: str
    incident_id: str
    since: datetime | None


@dataclass(frozen=True, slots=True)
class KeptUnchecked:
    """What the store holds of cards posted unchecked: the cards, and a sentence for
    each row it cannot read (left where it is, for a person to look at)."""

    cards: tuple[UncheckedCard, ...]
    unreadable: tuple[str, ...] = ()


class UncheckedCards(Protocol):
    """Where a chat keeps the cards it posted unchecked (the store), so a restart before
    the history answers again still ends with one card per incident. One row per
    channel and incident: a later unchecked card of the incident replaces it."""

    def remember_unchecked(self, card: UncheckedCard, at: datetime) -> None: ...

    def unchecked_cards(self) -> KeptUnchecked: ...

    def forget_unchecked(self, card: UncheckedCard) -> None:
        """The card is checked; a later card of its incident remembered since stays."""
        ...


class Chat(Protocol):
    name: str

    def post(self, channel: str, report: Report) -> str:
        """Post a new card; returns the chat's reference to it (for updates and replies)."""
        ...

    def update(self, ref: str, report: Report) -> None:
        """Replace the card at `ref` with a new rendering of the report."""
        ...

    def reply(self, ref: str, text: str, attempt: Attempt | None = None) -> None:
        """Add a message to the card's thread (once per `attempt.message_id`)."""
        ...

    def attach(self, ref: str, path: str, text: str, attempt: Attempt | None = None) -> None:
        """Add a file (a PNG chart) to the card's thread, with `text` as its comment."""
        ...

    def healthy(self) -> bool:
        """False when the chat connection is known to be down."""
        ...


# -- what a chat's commands and buttons call, and what they are answered --------------


class Outcome(StrEnum):
    APPROVED = "approved"
    NEEDS_SECOND_APPROVER = "needs_second_approver"
    REJECTED = "rejected"
    REFUSED = "refused"
    ALREADY_DECIDED = "already_decided"
    EXPIRED = "expired"
    NOT_FOUND = "not_found"
    OTHER_CLUSTER = "other_cluster"


@dataclass(frozen=True, slots=True)
class Answer:
    """What happened to a click or command, in words for the person who sent it."""

    outcome: Outcome
    text: str
    proposal: Proposal | None = None

    @property
    def ok(self) -> bool:
        return self.outcome in (Outcome.APPROVED, Outcome.NEEDS_SECOND_APPROVER, Outcome.REJECTED)


@dataclass(frozen=True, slots=True)
class IncidentView:
    incident: Incident
    proposals: tuple[Proposal, ...]


@dataclass(frozen=True, slots=True)
class EvidenceFetch:
    """One ask for an incident's evidence, audited: who, how, `allowed` or `refused`, why."""

    incident_id: str
    user: str
    via: str
    outcome: str
    detail: str
    at: datetime


@dataclass(frozen=True, slots=True)
class History:
    incidents: tuple[Incident, ...]
    actions: tuple[LedgerEntry, ...]
    fetches: tuple[EvidenceFetch, ...] = ()  # evidence asked for, newest first


@dataclass(frozen=True, slots=True)
class Status:
    open_incidents: int
    proposals: Mapping[str, int]
    pending_notifications: int
    active_silences: int
    executors: tuple[str, ...]
    set_aside: tuple[SetAside, ...] = ()  # evidence a bug or a budget stopped
    dead_letters: tuple[QueuedMessage, ...] = ()  # the newest the outbox gave up on
    given_up: int = 0  # every notification the outbox gave up on
    held: tuple[QueuedMessage, ...] = ()  # notifications waiting for a person to act
    unchecked: KeptUnchecked = KeptUnchecked(())  # cards awaiting the duplicate check
    cluster: str = ""  # whose pitcrew this is
    other_clusters: str = ""  # clicks for other clusters came lately: why, and the fix


class ChatService(Protocol):
    """The operations behind a chat's commands and buttons (`bot.daemon.service.Service`):
    approving, rejecting, silencing, and what is open, recent, unmatched or kept."""

    def approve(self, proposal_id: str, user: ChatUser, now: datetime) -> Answer: ...

    def reject(
        self, proposal_id: str, user: ChatUser, now: datetime, reason: str = ""
    ) -> Answer: ...

    def silence(
        self,
        matchers: Mapping[str, str],
        duration: timedelta,
        author: str,
        now: datetime,
        reason: str = "",
        user: ChatUser | None = None,
    ) -> Silence: ...

    def unsilence(
        self, silence_id: str, now: datetime, user: ChatUser | None = None
    ) -> Silence | None: ...

    def incidents(self, namespace: str | None = None) -> tuple[IncidentView, ...]: ...

    def history(self, n: int = 10) -> History: ...

    def unmatched(self, n: int = 10) -> tuple[UnmatchedShape, ...]: ...

    def bundles(self, incident_id: str) -> list[tuple[str, int, datetime]]: ...

    def may_fetch(self, incident_id: str, user: ChatUser, now: datetime, via: str) -> str:
        """Why `user` may not have the incident's evidence ("" when they may); audited."""
        ...

    def status(self, now: datetime) -> Status: ...


# -- sources and where they put what they see ----------------------------------------


class Source(Protocol):
    name: str

    def start(self) -> None:
        """Begin watching (in threads of its own); returns at once."""
        ...

    def stop(self) -> None:
        """Stop watching and join its threads; nothing is put on the queue afterwards."""
        ...

    def healthy(self) -> bool:
        """False while the source cannot observe (for /readyz)."""
        ...


@runtime_checkable
class Polling(Protocol):
    """A source the scheduler calls every `poll_interval`."""

    poll_interval: timedelta

    def poll(self) -> None: ...


class Sink(Protocol):
    """Where sources put items: the pipeline's queue."""

    def submit(self, item: Item) -> bool:
        """Queue `item`; False when the queue stayed full (the caller may retry or drop)."""
        ...


# -- actions: what the runner, the live checks and the service call ------------------


@dataclass(frozen=True, slots=True)
class Verification:
    ok: bool
    detail: str = ""


class Executor(Protocol):
    """Runs one action (an object may serve several: it is registered for each)."""

    def plan(self, step: Step) -> Any:
        """What would be done, read from live state (read-only)."""
        ...

    def check(self, step: Step, plan: Any) -> LiveCheck:
        """The spec's preconditions as facts, the preview recomputed, the parameters
        as offered now and the live diff, all from `plan`."""
        ...

    def execute(self, step: Step, plan: Any) -> str:
        """Carry out `plan`; returns what was done."""
        ...

    def verify(self, step: Step) -> Verification:
        """Whether the change took effect."""
        ...
