"""Correlation: findings about one workload inside a window become one incident.

Why this exists: people need one card per failure, not one per log line or pod.
A RayJob that dies because a worker pod was OOMKilled produces a driver-log
clash, a SYSTEM_ERROR, an OOMKilled pod status and a RayJob Failed status, in
any order, over a minute or two; a bad memory limit kills 340 pods of one
RayCluster at once. This module folds all of that into one `Incident` per
workload: the most causal finding is primary (re-ranked with
`bot.core.diagnosis.analysis.rank_findings` as evidence arrives, so a clash first seen alone
gives way to the OOM kill that caused it), repeats become counters, and the
incident resolves when the workload is healthy again or has been quiet.

Times are arrival times: the window and the quiet period are measured with the
`now` each call is given, not with a finding's own timestamp, so a replayed or
late signal cannot open an incident in the past.

An action withheld only because a live fact is unknown (is the actor stale?),
or offered with preconditions to confirm (does a node fit the bigger pod?), is
not decided here: the incident's `Change` carries it in `asks`, once per action
and target, for the daemon to check off the pipeline thread; the answer comes
back through `learn`, and the incident is assessed again with it
(`bot.core.actions.facts`).

Pure in the sense that matters here: no I/O, no clock of its own (every call
takes `now`), every result is a new immutable value. The `Correlator` keeps
the open incidents of one pipeline thread in memory (the pipeline owns it, so
no locks); its memory per incident is bounded by the config caps. A call whose
assessment raises (a bug, or the daemon giving it up over its time budget,
`bot.daemon.budget`) changes nothing: the correlator is as it was before it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from bot.core.actions.facts import FactAnswer, awaiting, combined, offer_key, to_confirm
from bot.core.actions.reach import Reach
from bot.core.incidents import alert_facts, kuberay_retries
from bot.core.incidents.assessment import Assess, decided, rank_only
from bot.core.incidents.claims import Claim
from bot.core.incidents.grouping import CorrelationConfig
from bot.core.incidents.placements import Placements, placements_of
from bot.core.incidents.rayjob_owners import Owner, Owners, complete
from bot.core.incidents.tracks import EMPTY_LABELS, Track, identity, merged, trimmed, with_labels
from bot.core.incidents.workloads import (
    Item,
    cluster_of,
    namespace_of,
    submission_id,
    workload_from_key,
    workload_keys,
)
from bot.core.model import (
    ActionOffer,
    Diagnosis,
    Finding,
    Incident,
    IncidentNote,
    IncidentState,
    NotificationKind,
    SourceKind,
)
from bot.core.taxonomy import Category

# -- results -------------------------------------------------------------------


class ChangeKind(StrEnum):
    OPENED = "opened"  # a new incident: the card must be posted
    UPDATED = "updated"  # what the card says changed (a finding, the root cause, actions)
    COUNTED = "counted"  # only counters moved (a storm): the card's numbers change
    RESOLVED = "resolved"  # healthy again or quiet: the card must say so


@dataclass(frozen=True, slots=True)
class Change:
    """What one input did to one incident, and what the card must do about it."""

    incident: Incident
    kind: ChangeKind
    primary_changed: bool = False
    previous_primary: Category | None = None
    asks: tuple[ActionOffer, ...] = ()  # offers waiting on a live fact, not asked before
    say: str = ""  # said in the card's thread (it became a RayJob's, or was merged)

    @property
    def card(self) -> NotificationKind:
        """POST for a new incident; otherwise the existing card is UPDATED, never re-posted."""
        return NotificationKind.POST if self.kind is ChangeKind.OPENED else NotificationKind.UPDATE


HEALTHY_AGAIN = "the workload is healthy again"
# Signals of a workload's own state (a RayJob's, a RayCluster's): what a live check found
# before it (the RayJob was running, so not rerun) may no longer hold after it.
_STATES = frozenset({SourceKind.RAY_JOB, SourceKind.RAY_CLUSTER})


def incident_id(key: str, opened_at: datetime) -> str:
    """Stable id from the workload key and the opening time (same input, same id)."""
    digest = hashlib.sha1(f"{key}\x1f{opened_at.isoformat()}".encode()).hexdigest()
    return f"inc-{digest[:10]}"


def _duration(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds >= 60:
        return f"{seconds // 60} min"
    return f"{seconds} s"


# -- the correlator ------------------------------------------------------------


class Correlator:
    """The open incidents, keyed by workload; findings in, `Change` values out.

    `add` folds a finding into its workload's incident (or opens one; an alert that
    resolved is a fact on the incident it joins, `bot.core.incidents.alert_facts`),
    `own` learns which RayJob a Ray submission is (`bot.core.incidents.rayjob_owners`),
    and a finding naming its workload and its pod or node places them there
    (`bot.core.incidents.placements`); `healthy` resolves the incidents of a workload
    reported healthy, `tick` resolves quiet ones. `restore` reloads open incidents."""

    def __init__(
        self,
        assess: Assess = rank_only,
        config: CorrelationConfig | None = None,
        reach: Reach | None = None,
    ) -> None:
        """`reach`: what this pitcrew can carry out; an offer it could not finish is
        withheld naming the setting it lacks (`bot.core.actions.reach`)."""
        self.config = config or CorrelationConfig()
        self._assess = assess
        self._reach = reach
        self._tracks: dict[str, Track] = {}
        self._by_key: dict[str, str] = {}
        self._owners = Owners()
        self._places = Placements()

    # -- queries ---------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._tracks)

    def get(self, incident_id: str) -> Incident | None:
        track = self._tracks.get(incident_id)
        return track.incident if track else None

    def find(self, key: str) -> Incident | None:
        """The open incident answering to a workload key, if any."""
        found = self._by_key.get(key)
        return self._tracks[found].incident if found else None

    def open_incidents(self) -> tuple[Incident, ...]:
        return tuple(t.incident for t in self._tracks.values())

    # -- inputs ----------------------------------------------------------------

    def add(self, finding: Finding, now: datetime) -> tuple[Change, ...]:
        """Fold one finding in; usually one change, more when a stale incident of the
        same workload had to be closed first (its window had passed) or one opened on
        the finding's pod or node alone became its workload's. A finding naming only a
        known pod, Job or node, or a Ray submission whose RayJob is known, is theirs."""
        placed = self._places.of(finding, now, self.config.window)
        finding = placed.complete(finding) if placed is not None else finding
        owner = self._owners.of(finding)
        finding = complete(finding, owner) if owner is not None else finding
        if alert_facts.is_resolution(finding):
            return self._alert_resolved(finding, now)
        changes: list[Change] = []
        for placement in placements_of(finding):
            changes.extend(self._claim(placement, now))
            self._places.learn(placement, now)
        keys = workload_keys(finding)
        track = self._track_for(keys)
        with self._all_or_nothing(keys):
            if (
                track is not None
                and now - track.last_seen > self.config.window
                and not kuberay_retries.awaits_retry(track.attempts)
                and not track.incident.unfinished  # its remediation goes on: it stays the one
            ):
                quiet = f"no new findings for {_duration(now - track.last_seen)}"
                changes.append(self._resolve(track, now, quiet))
                track = None
            if track is None:
                changes.append(self._open(finding, keys, now))
            else:
                changes.append(self._absorb(track, finding, keys, now))
        return tuple(changes)

    def own(self, owner: Owner, now: datetime) -> tuple[Change, ...]:
        """Learn that `owner`'s RayJob submitted its Ray job (a `_claim`)."""
        if not self._owners.is_news(owner):
            return ()
        changes = self._claim(owner, now)
        self._owners.learn(owner)
        return changes

    def _claim(self, claim: Claim, now: datetime) -> tuple[Change, ...]:
        """An open incident opened on the claim's stray keys alone becomes its workload's
        (same incident, same card) or, when the workload has one already, is merged into
        it and resolved, saying where."""
        home = self._track_for(claim.home_keys)
        strays = [
            t
            for t in self._tracks_for(claim.stray_keys)
            if t is not home and all(claim.belongs(f) for f in t.reps.values())
        ]
        changes: list[Change] = []
        with self._all_or_nothing((*claim.home_keys, *claim.stray_keys)):
            if home is None and strays:
                home = strays.pop(0)
                changes.append(self._adopt(home, claim, now))
            for stray in strays:
                assert home is not None
                changes.extend(self._fold(stray, home, claim, now))
        return tuple(changes)

    def _alert_resolved(self, finding: Finding, now: datetime) -> tuple[Change, ...]:
        """A resolved alert is a fact on the incident it joins (none: nothing to do); an
        incident whose evidence is only alerts resolves with the last of them."""
        track = self._track_for(workload_keys(finding))
        if track is None:
            return ()
        old = track.incident
        alerts = alert_facts.noted(old.alerts, finding)
        if alerts == old.alerts:
            return ()
        with self._all_or_nothing(track.keys):
            track.notes.append(IncidentNote(now, f"alert {finding.reason} resolved"))
            track.incident = dataclasses.replace(
                old,
                alerts=alerts,
                updated_at=now,
                revision=old.revision + 1,
                notes=tuple(track.notes),
            )
            if not alert_facts.resolves(alerts, track.reps.values()):
                return (Change(track.incident, ChangeKind.UPDATED),)
            return self.healthy(
                track.keys[0], now, f"its alert {alert_facts.names(alerts)} resolved"
            )

    def learn(self, incident_id: str, answer: FactAnswer, now: datetime) -> Change | None:
        """Assess an open incident again with what a live check found (None when it is
        no longer open, or nothing it offers changed)."""
        track = self._tracks.get(incident_id)
        if track is None:
            return None
        with self._all_or_nothing(track.keys):
            track.answer = combined((track.answer, answer))
            old = track.incident
            diagnosis = self._assessed(track)
            if diagnosis == old.diagnosis:
                return None
            track.incident = dataclasses.replace(
                old, diagnosis=diagnosis, updated_at=now, revision=old.revision + 1
            )
            return Change(track.incident, ChangeKind.UPDATED, asks=self._asks(track))

    def remediated(self, incident_id: str, unfinished: str, now: datetime) -> Change | None:
        """Learn what the incident's remediation left undone (`progress.unfinished`; ""
        once nothing is): while something is, later evidence of the workload joins this
        incident however long after it comes. None when it is not open or nothing changed."""
        track = self._tracks.get(incident_id)
        if track is None or track.incident.unfinished == unfinished:
            return None
        if unfinished:
            track.notes.append(IncidentNote(now, f"left undone: {unfinished}"))
        return Change(track.amend(now, unfinished=unfinished), ChangeKind.UPDATED)

    def unexplained(self, incident_id: str, lines: Sequence[str], now: datetime) -> Change | None:
        """Failure-looking lines no playbook knows that came with the incident's evidence,
        kept (twice `max_evidence` at most) for a card whose cause is unknown
        (`bot.core.incidents.wrappers`). None when it is not open or nothing is new."""
        track = self._tracks.get(incident_id)
        old = track.incident.unexplained if track is not None else ()
        kept = tuple(dict.fromkeys((*old, *lines)))[: 2 * self.config.max_evidence]
        if track is None or kept == old:
            return None
        return Change(track.amend(now, unexplained=kept), ChangeKind.UPDATED)

    def healthy(
        self, item: Item | str, now: datetime, reason: str = HEALTHY_AGAIN
    ) -> tuple[Change, ...]:
        """Resolve the open incidents of the workload(s) `item` names (a signal, a finding
        or a workload key) because that workload was reported healthy.

        Call it for workload-level health (a RayJob running or succeeded, a RayCluster
        ready, a Deployment available): one healthy pod of a RayCluster is not that.
        What the incident offered is withheld: the failure it was for is over (or its
        workload is gone), so an Approve left on its card must not act. (An incident
        resolved only by quiet keeps its offers until they expire: nothing says the
        failure ended.)"""
        keys = (item,) if isinstance(item, str) else workload_keys(item)
        ids = dict.fromkeys(self._by_key[k] for k in keys if k in self._by_key)
        changes: list[Change] = []
        for incident_id in ids:
            track = self._tracks[incident_id]
            track.incident = dataclasses.replace(
                track.incident,
                diagnosis=_withheld(track.incident.diagnosis, f"the incident resolved: {reason}"),
            )
            changes.append(self._resolve(track, now, reason))
        return tuple(changes)

    def tick(self, now: datetime) -> tuple[Change, ...]:
        """Resolve incidents that have had no new finding for the quiet period."""
        quiet = self.config.quiet_period
        stale = [t for t in self._tracks.values() if now - t.last_seen >= quiet]
        reason = f"no new findings for {_duration(quiet)}"
        return tuple(self._resolve(track, now, reason) for track in stale)

    def next_due(self) -> datetime | None:
        """When `tick` will next have something to resolve."""
        if not self._tracks:
            return None
        return min(t.last_seen for t in self._tracks.values()) + self.config.quiet_period

    def restore(self, incidents: Iterable[Incident]) -> None:
        """Take back open incidents from the store after a restart. Distinct-object
        counting continues from the stored numbers (names seen before are not kept)."""
        for incident in incidents:
            if incident.state is IncidentState.OPEN and incident.id not in self._tracks:
                track = Track(incident, self.config.max_notes)
                self._tracks[incident.id] = track
                for key in track.keys:
                    self._by_key.setdefault(key, incident.id)

    # -- internals -------------------------------------------------------------

    @contextmanager
    def _all_or_nothing(self, keys: Sequence[str]) -> Iterator[None]:
        """What a call changes (on the tracks `keys` reach), undone when it raises: an
        assessment given up over its budget or a bug leaves the correlator as it was."""
        tracks, by_key = dict(self._tracks), dict(self._by_key)
        for track in self._tracks_for(keys):
            tracks[track.incident.id] = track.copy()
        try:
            yield
        except BaseException:
            self._tracks, self._by_key = tracks, by_key
            raise

    def _track_for(self, keys: Sequence[str]) -> Track | None:
        for key in keys:
            found = self._by_key.get(key)
            if found is not None:
                return self._tracks[found]
        return None

    def _tracks_for(self, keys: Sequence[str]) -> list[Track]:
        found = dict.fromkeys(self._by_key[k] for k in keys if k in self._by_key)
        return [self._tracks[i] for i in found]

    def _adopt(self, track: Track, claim: Claim, now: datetime) -> Change:
        """The incident opened on the claim's stray key becomes its workload's."""
        old = track.incident
        home_key = claim.home_keys[0]
        self._by_key[home_key] = old.id
        track.keys = [home_key, *(k for k in track.keys if k != home_key)]
        self._link(track, claim.home_keys)
        track.reps = {p: claim.complete(f) for p, f in track.reps.items()}
        diagnosis = self._assessed(track)
        changed_from = _moved(track, old.diagnosis, diagnosis, now)
        said = f"{claim.why}: this incident is now that {claim.workload.kind}'s"
        track.notes.append(IncidentNote(now, said))
        track.incident = self._rebuild(
            track,
            now,
            diagnosis,
            key=home_key,
            workload=claim.workload,
            cluster=claim.cluster or old.cluster,
            namespace=claim.namespace or old.namespace,
            ray_job_id=old.ray_job_id or claim.ray_job_id,
        )
        return Change(
            track.incident,
            ChangeKind.UPDATED,
            primary_changed=changed_from is not None,
            previous_primary=changed_from,
            asks=self._asks(track),
            say=f"{said}.",
        )

    def _fold(self, stray: Track, home: Track, claim: Claim, now: datetime) -> tuple[Change, ...]:
        """`stray` (opened on the claim's stray key) merged into `home`, the workload's:
        its findings, counters, alerts and keys move, it resolves saying where they went,
        and what it offered is withheld (the workload's incident offers what holds)."""
        moved_to = f"merged into incident {home.incident.id}"
        stray.incident = dataclasses.replace(
            stray.incident, diagnosis=_withheld(stray.incident.diagnosis, moved_to)
        )
        gone = self._resolve(stray, now, f"{moved_to}: {claim.whose}")
        old = home.incident
        for playbook, finding in stray.reps.items():
            home.reps[playbook] = self._folded(home.reps.get(playbook), claim.complete(finding))
        home.take_counts(stray)
        self._link(home, (*stray.keys, *claim.home_keys))
        diagnosis = self._assessed(home)
        changed_from = _moved(home, old.diagnosis, diagnosis, now)
        said = f"merged in incident {stray.incident.id}: {claim.ours}"
        home.notes.append(IncidentNote(now, said))
        alerts = old.alerts
        for fact in stray.incident.alerts:
            alerts = alert_facts.added(alerts, fact)
        home.incident = self._rebuild(home, now, diagnosis, alerts=alerts)
        kept = Change(
            home.incident,
            ChangeKind.UPDATED,
            primary_changed=changed_from is not None,
            previous_primary=changed_from,
            asks=self._asks(home),
            say=f"{said[0].upper()}{said[1:]}.",
        )
        moved = dataclasses.replace(gone, say=f"This incident is {gone.incident.resolution}.")
        return (moved, kept)

    def _open(self, finding: Finding, keys: tuple[str, ...], now: datetime) -> Change:
        key = keys[0]
        first = trimmed(finding, self.config.max_evidence)
        diagnosis = self._assess([first])
        workload = workload_from_key(key)
        namespace = namespace_of(finding)
        where = str(workload) if workload else f"namespace {namespace or '(unknown)'}"
        note = IncidentNote(now, f"opened: {finding.category} on {where}")
        incident = Incident(
            id=incident_id(key, now),
            key=key,
            opened_at=now,
            updated_at=now,
            diagnosis=diagnosis,
            workload=workload,
            cluster=cluster_of(finding),
            namespace=namespace,
            ray_job_id=submission_id(finding),
            last_seen_at=now,
            labels=with_labels(EMPTY_LABELS, finding, self.config.max_labels),
            notes=(note,),
            alerts=alert_facts.noted((), finding),
        )
        track = Track(incident, self.config.max_notes)
        track.reps = {first.playbook: first}
        track.counts = {finding.playbook: finding.count}
        track.keys = [key]
        self._tracks[incident.id] = track
        self._link(track, keys)
        track.count_object(finding, self.config.max_objects)
        track.attempts = kuberay_retries.recorded(track.attempts, finding)
        track.incident = self._rebuild(track, now, self._decided(diagnosis, track))
        return Change(track.incident, ChangeKind.OPENED, asks=self._asks(track))

    def _absorb(
        self, track: Track, finding: Finding, keys: tuple[str, ...], now: datetime
    ) -> Change:
        playbook = finding.playbook
        track.counts[playbook] = track.counts.get(playbook, 0) + finding.count
        track.count_object(finding, self.config.max_objects)
        self._link(track, keys)
        old = track.incident
        rep = track.reps.get(playbook)
        folded = self._folded(rep, finding)
        attempts = kuberay_retries.recorded(track.attempts, finding)
        reshaped = folded is not rep or attempts is not track.attempts
        track.attempts = attempts
        diagnosis = old.diagnosis
        if reshaped:
            track.reps[playbook] = folded
            if finding.source in _STATES and track.answer:  # answered before this state
                track.answer, track.asked = FactAnswer(), set()  # so its offers are checked again
            diagnosis = self._assessed(track)
            if rep is None or rep.category is not folded.category:
                track.notes.append(IncidentNote(now, f"also seen: {folded.category}"))
        changed_from = _moved(track, old.diagnosis, diagnosis, now)
        incident = self._rebuild(
            track,
            now,
            diagnosis,
            labels=with_labels(old.labels, finding, self.config.max_labels),
            alerts=alert_facts.noted(old.alerts, finding),
            cluster=old.cluster or cluster_of(finding),
            namespace=old.namespace or namespace_of(finding),
            ray_job_id=old.ray_job_id or submission_id(finding),
        )
        track.incident = incident
        return Change(
            incident,
            ChangeKind.UPDATED if reshaped else ChangeKind.COUNTED,
            primary_changed=changed_from is not None,
            previous_primary=changed_from,
            asks=self._asks(track) if reshaped else (),
        )

    def _folded(self, rep: Finding | None, finding: Finding) -> Finding:
        """The playbook's representative once `finding` is in (`rep` itself: no change)."""
        limit = self.config.max_evidence
        return trimmed(finding, limit) if rep is None else merged(rep, finding, limit)

    def _assessed(self, track: Track) -> Diagnosis:
        """The incident's findings assessed with the live facts found so far; offers
        whose check gave no answer are decided (withheld, with the reason)."""
        return self._decided(self._assess(list(track.reps.values()), track.answer.facts), track)

    def _decided(self, diagnosis: Diagnosis, track: Track) -> Diagnosis:
        return decided(diagnosis, track.answer, self._reach, track.attempts, track.incident)

    def _asks(self, track: Track) -> tuple[ActionOffer, ...]:
        """The incident's offers waiting on a live fact, and its offered actions whose
        preconditions need confirming, that were not asked about yet."""
        diagnosis = track.incident.diagnosis
        offers = (*awaiting(diagnosis), *to_confirm(diagnosis))
        new = [o for o in offers if offer_key(o) not in track.asked]
        track.asked.update(offer_key(o) for o in new)
        return tuple(new)

    def _rebuild(
        self, track: Track, now: datetime, diagnosis: Diagnosis, **changes: Any
    ) -> Incident:
        old = track.incident
        return dataclasses.replace(
            old,
            **changes,
            updated_at=now,
            last_seen_at=now,
            diagnosis=diagnosis,
            counts=MappingProxyType(dict(track.counts)),
            objects=MappingProxyType(dict(track.objects)),
            object_kinds=MappingProxyType(
                {p: MappingProxyType(dict(k)) for p, k in track.kinds.items()}
            ),
            objects_capped=tuple(sorted(track.capped)),
            keys=tuple(track.keys[1:]),
            revision=old.revision + 1,
            attempts=track.attempts,
            notes=tuple(track.notes),
        )

    def _resolve(self, track: Track, now: datetime, reason: str) -> Change:
        incident = track.incident
        self._tracks.pop(incident.id, None)
        for key in track.keys:
            if self._by_key.get(key) == incident.id:
                del self._by_key[key]
        track.notes.append(IncidentNote(now, f"resolved: {reason}"))
        resolved = dataclasses.replace(
            incident,
            state=IncidentState.RESOLVED,
            resolved_at=now,
            updated_at=now,
            resolution=reason,
            revision=incident.revision + 1,
            notes=tuple(track.notes),
        )
        return Change(resolved, ChangeKind.RESOLVED)

    def _link(self, track: Track, keys: Sequence[str]) -> None:
        """Let the incident answer to every workload key the finding names (a RayJob
        status names its RayCluster and submission), unless another incident has it."""
        for key in keys:
            if len(track.keys) >= self.config.max_keys:
                return
            if key not in self._by_key:
                self._by_key[key] = track.incident.id
                if key not in track.keys:
                    track.keys.append(key)


def _moved(track: Track, before: Diagnosis, after: Diagnosis, now: datetime) -> Category | None:
    """The category the root cause moved away from (noted on the incident), if it did."""
    previous, current = before.primary, after.primary
    if previous is None or current is None or identity(previous) == identity(current):
        return None
    track.notes.append(
        IncidentNote(now, f"root cause is now {current.category} (was {previous.category})")
    )
    return previous.category


def _withheld(diagnosis: Diagnosis, reason: str) -> Diagnosis:
    """`diagnosis` with every action it offers withheld for `reason`."""
    actions = tuple(
        dataclasses.replace(o, offered=False, reason=reason) if o.offered else o
        for o in diagnosis.actions
    )
    return dataclasses.replace(diagnosis, actions=actions)
