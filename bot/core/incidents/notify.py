"""Notification policy: when a card is posted, updated or repeated, where, and when not.

Why this exists: correlation says what an incident *is*; this module decides
what the chat should *see*, in the spirit of Alertmanager's dispatcher. The
first post waits `group_wait` so a burst arrives as one card with its
counters; later changes are sent at most once per `group_interval` as an
update of that card; a still-open incident is brought up again in its thread
every `repeat_interval`; silences mute by playbook, category, namespace,
workload or incident until they expire; routes pick the channel from the
namespace and labels, with a default channel.

Pure: `decide` takes the incident, the card it would show now (a `Report`),
what was sent so far (a `Delivery`), the silences, `now` and what the card waits
for besides its own timing (one `Hold`: memory evidence, or a live check's
answer), and returns the notifications to enqueue plus the new `Delivery`, and,
when nothing went out that would have, which wait held it (`DeliveryPlan.held`):
"why is this card late?" has this one answer. Nothing is sent from here.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from fnmatch import fnmatchcase

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bot.core.incidents.reports import details_text
from bot.core.incidents.workloads import key_text
from bot.core.model import (
    Incident,
    IncidentState,
    Notification,
    NotificationKind,
    Report,
    Silence,
)

# -- labels, silences and routes ------------------------------------------------

SILENCE_KEYS = frozenset({"playbook", "category", "namespace", "workload", "incident"})


def labels(incident: Incident) -> dict[str, str]:
    """The label set silences and routes match against.

    `playbook`, `category` and `severity` are the primary finding's (silencing a
    playbook does not mute an incident where it is only a symptom); `workload` is
    `namespace/kind/name`; the incident's own labels (from the workload) are added
    without overriding these."""
    found: dict[str, str] = {
        "incident": incident.id,
        "namespace": incident.namespace,
        "cluster": incident.cluster,
    }
    if incident.workload is not None:
        found["workload"] = str(incident.workload)
        found["kind"] = incident.workload.kind
        found["name"] = incident.workload.name
    primary = incident.diagnosis.primary
    if primary is not None:
        found["playbook"] = primary.playbook
        found["category"] = str(primary.category)
        found["severity"] = str(primary.severity)
    if incident.ray_job_id:
        found["ray_job_id"] = incident.ray_job_id
    for key, value in incident.labels.items():
        found.setdefault(key, value)
    return found


def _workload_forms(workload: str) -> tuple[str, ...]:
    """`ns/kind/name` also answers to `kind/name` and `name`."""
    parts = workload.split("/")
    return tuple("/".join(parts[i:]) for i in range(len(parts)))


def _matches(key: str, pattern: str, found: Mapping[str, str]) -> bool:
    value = found.get(key)
    if value is None:
        return False
    pattern = pattern.lower()
    if key == "workload":
        return any(fnmatchcase(form.lower(), pattern) for form in _workload_forms(value))
    return fnmatchcase(value.lower(), pattern)


def silence_active(silence: Silence, now: datetime) -> bool:
    return silence.starts_at <= now < silence.ends_at


def silence_matches(silence: Silence, incident: Incident) -> bool:
    """Every matcher must match (shell-style wildcards, case-insensitive). A silence
    without matchers, or with a key it does not know, matches nothing."""
    if not silence.matchers or not set(silence.matchers) <= SILENCE_KEYS:
        return False
    found = labels(incident)
    return all(_matches(k, v, found) for k, v in silence.matchers.items())


def silenced_by(incident: Incident, silences: Iterable[Silence], now: datetime) -> Silence | None:
    """The active silence that mutes `incident` (the one lasting longest), if any."""
    muting = [s for s in silences if silence_active(s, now) and silence_matches(s, incident)]
    return max(muting, key=lambda s: s.ends_at) if muting else None


class Route(BaseModel):
    """Incidents whose namespace and labels match go to `channel` (wildcards allowed).

    Empty `namespaces` means every namespace; every entry of `labels` must match."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    channel: str = Field(min_length=1)
    namespaces: tuple[str, ...] = ()
    labels: dict[str, str] = Field(default_factory=dict)

    def matches(self, found: Mapping[str, str]) -> bool:
        if self.namespaces and not any(
            _matches("namespace", pattern, found) for pattern in self.namespaces
        ):
            return False
        return all(_matches(k, v, found) for k, v in self.labels.items())


class NotifyConfig(BaseModel):
    """Timing and routing of cards; Alertmanager's names and meanings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    group_wait: timedelta = Field(
        default=timedelta(seconds=30), description="how long a new incident gathers before posting"
    )
    group_interval: timedelta = Field(
        default=timedelta(minutes=1), description="at most one update of a card per interval"
    )
    repeat_interval: timedelta = Field(
        default=timedelta(hours=4), description="remind in the thread while an incident stays open"
    )
    default_channel: str = Field(default="pitcrew", min_length=1)
    routes: tuple[Route, ...] = ()

    @model_validator(mode="after")
    def _sane(self) -> NotifyConfig:
        if self.group_wait < timedelta(0):
            raise ValueError("group_wait cannot be negative")
        if self.group_interval <= timedelta(0):
            raise ValueError("group_interval must be positive")
        if self.repeat_interval < self.group_interval:
            raise ValueError("repeat_interval cannot be shorter than group_interval")
        return self


def route(incident: Incident, config: NotifyConfig) -> str:
    """The channel of the first route that matches, else the default channel."""
    found = labels(incident)
    for candidate in config.routes:
        if candidate.matches(found):
            return candidate.channel
    return config.default_channel


# -- what was sent, and the decision ----------------------------------------------


@dataclass(frozen=True, slots=True)
class Delivery:
    """What the chat has seen of one incident: kept by the caller between decisions."""

    incident_id: str
    channel: str = ""
    posted_at: datetime | None = None
    sent_at: datetime | None = None  # last POST or UPDATE
    digest: str = ""  # of the report last posted or updated
    reminded_at: datetime | None = None  # last repeat in the thread

    @property
    def posted(self) -> bool:
        return self.posted_at is not None


class Wait(StrEnum):
    """What held back a card that would otherwise have gone out now."""

    GROUP_WAIT = "group_wait"  # a new incident gathers its burst before its first post
    EVIDENCE = "evidence"  # memory evidence that sizes the bump its first post offers
    LIVE_CHECK = "live_check"  # a live check's answer on the offers the card would show
    GROUP_INTERVAL = "group_interval"  # a posted card changes at most once per interval


@dataclass(frozen=True, slots=True)
class Hold:
    """Evidence the card should show is outstanding until `until` (`wait` says which):
    `EVIDENCE` holds only the first post, and a person's click goes past it as past
    `group_wait`; `LIVE_CHECK` holds every post, update and reminder, clicks included
    (the card would show offers nobody checked), until the incident resolves."""

    wait: Wait
    until: datetime


@dataclass(frozen=True, slots=True)
class DeliveryPlan:
    """Notifications to enqueue now, the delivery record to keep, and when to ask again;
    `held` says what kept back a card that would otherwise have gone out now."""

    notifications: tuple[Notification, ...]
    delivery: Delivery
    next_at: datetime | None = None  # None: nothing is pending for this incident
    muted_by: Silence | None = None
    done: bool = False  # resolved and the card says so (or it never needed posting)
    held: Wait | None = None


def digest(report: Report) -> str:
    """Identity of what a card shows, to tell whether an update is due."""
    return hashlib.sha1(repr(report).encode()).hexdigest()[:16]


def _summary(incident: Incident) -> str:
    primary = incident.diagnosis.primary
    cause = str(primary.category) if primary else "no failure"
    where = str(incident.workload) if incident.workload else key_text(incident.key)
    objects = incident.objects.get(primary.playbook, 0) if primary else 0
    count = f" (x{objects})" if objects > 1 else ""
    state = "resolved: " if incident.state is IncidentState.RESOLVED else ""
    return f"{state}{cause}{count} on {where}"


def decide(
    incident: Incident,
    report: Report,
    delivery: Delivery | None,
    silences: Iterable[Silence],
    config: NotifyConfig,
    now: datetime,
    *,
    urgent: bool = False,
    hold: Hold | None = None,
) -> DeliveryPlan:
    """What to send about `incident` at `now`.

    - Waiting for a live check's answer (`hold`, `LIVE_CHECK`): nothing until it came
      or `hold.until`, not even for a click; a resolved incident waits for nothing.
    - Not posted yet: wait until `opened_at + group_wait` (and, while memory evidence
      that sizes its bump is outstanding, until `hold.until`: `evidence_hold`), then
      POST to the routed channel. An incident resolved before it was ever posted is
      dropped.
    - Posted: when the card would change, UPDATE it, at most once per
      `group_interval` (`urgent`, for a person's click, skips the wait).
    - Open, unchanged, and nothing said for `repeat_interval`: REPLY in the thread.
    - Silenced: nothing, except that a posted card is still marked resolved (so a
      muted incident never looks open forever) and still answers a person's click.
    """
    record = delivery or Delivery(incident.id)
    if hold is not None and _live_check_pending(incident, hold, now):
        return DeliveryPlan((), record, next_at=hold.until, held=Wait.LIVE_CHECK)
    silence = silenced_by(incident, silences, now)
    if not record.posted:
        evidence = hold if hold is not None and hold.wait is Wait.EVIDENCE else None
        return _first_post(incident, report, record, silence, config, now, urgent, evidence)
    if digest(report) != record.digest:
        return _update(incident, report, record, silence, config, now, urgent)
    if silence is not None:
        resolved = incident.state is IncidentState.RESOLVED
        return DeliveryPlan((), record, next_at=silence.ends_at, muted_by=silence, done=resolved)
    return _reminder(incident, report, record, config, now)


def _live_check_pending(incident: Incident, hold: Hold, now: datetime) -> bool:
    """A live check's answer is still due (a resolved incident waits for nothing)."""
    resolved = incident.state is IncidentState.RESOLVED
    return hold.wait is Wait.LIVE_CHECK and now < hold.until and not resolved


def _first_post(
    incident: Incident,
    report: Report,
    record: Delivery,
    silence: Silence | None,
    config: NotifyConfig,
    now: datetime,
    urgent: bool,
    evidence: Hold | None,
) -> DeliveryPlan:
    """Post the card once `group_wait` and the `evidence` hold, if any, have passed (the
    later of the two is what holds it); drop an incident resolved unseen."""
    if incident.state is IncidentState.RESOLVED:
        return DeliveryPlan((), record, done=True)
    if silence is not None:
        return DeliveryPlan((), record, next_at=silence.ends_at, muted_by=silence)
    due, wait = incident.opened_at + config.group_wait, Wait.GROUP_WAIT
    if evidence is not None and evidence.until > due:
        due, wait = evidence.until, Wait.EVIDENCE
    if now < due and not urgent:
        return DeliveryPlan((), record, next_at=due, held=wait)
    channel = route(incident, config)
    posted = Notification(
        incident.id, NotificationKind.POST, channel, report, _summary(incident), now
    )
    sent: tuple[Notification, ...] = (posted,)
    if text := details_text(report):  # the full evidence and explanation, in the thread
        sent += (Notification(incident.id, NotificationKind.REPLY, channel, None, text, now),)
    record = Delivery(incident.id, channel, now, now, digest(report))
    return DeliveryPlan(sent, record, next_at=_next(incident, record, config))


def evidence_hold(
    opened_at: datetime, asked_at: datetime, deadline: timedelta, config: NotifyConfig
) -> datetime:
    """How long a first post may wait for evidence asked for at `asked_at` that answers
    within `deadline` (an OOM kill's memory, which sizes the bump the card offers): until
    that deadline, and never past the card's own `group_wait` plus it."""
    return min(asked_at + deadline, opened_at + config.group_wait + deadline)


def _update(
    incident: Incident,
    report: Report,
    record: Delivery,
    silence: Silence | None,
    config: NotifyConfig,
    now: datetime,
    urgent: bool,
) -> DeliveryPlan:
    """Update a posted card that would change, at most once per `group_interval`; a
    silence holds it back unless the incident resolved or a person clicked."""
    resolved = incident.state is IncidentState.RESOLVED
    if silence is not None and not (resolved or urgent):
        return DeliveryPlan((), record, next_at=silence.ends_at, muted_by=silence)
    assert record.sent_at is not None
    due = record.sent_at + config.group_interval
    if now < due and not urgent:
        return DeliveryPlan((), record, next_at=due, muted_by=silence, held=Wait.GROUP_INTERVAL)
    update = Notification(
        incident.id, NotificationKind.UPDATE, record.channel, report, _summary(incident), now
    )
    record = dataclasses.replace(record, sent_at=now, digest=digest(report))
    return DeliveryPlan(
        (update,),
        record,
        next_at=None if resolved else _next(incident, record, config),
        muted_by=silence,
        done=resolved,
    )


def _reminder(
    incident: Incident, report: Report, record: Delivery, config: NotifyConfig, now: datetime
) -> DeliveryPlan:
    """An unchanged open card is brought up in its thread every `repeat_interval`."""
    if incident.state is IncidentState.RESOLVED:
        return DeliveryPlan((), record, done=True)
    remind_at = _remind_at(record, config)
    if now < remind_at:
        return DeliveryPlan((), record, next_at=remind_at)
    reminder = Notification(
        incident.id,
        NotificationKind.REPLY,
        record.channel,
        report,
        f"Still open: {_summary(incident)}",
        now,
    )
    record = dataclasses.replace(record, reminded_at=now)
    return DeliveryPlan((reminder,), record, next_at=_next(incident, record, config))


def _remind_at(record: Delivery, config: NotifyConfig) -> datetime:
    last = max(t for t in (record.sent_at, record.reminded_at) if t is not None)
    return last + config.repeat_interval


def _next(incident: Incident, record: Delivery, config: NotifyConfig) -> datetime | None:
    if incident.state is IncidentState.RESOLVED:
        return None
    return _remind_at(record, config)
