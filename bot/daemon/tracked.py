"""What the pipeline keeps about one incident until its card is final, in one record.

Why this exists: the pipeline used to keep eight maps by incident id (the card's
delivery record, when to decide about it next, the incident once resolved, its memory
evidence and that evidence's deadline, a chart and evidence bundles waiting for the
card, the live checks it waited on) and forgot an incident by popping each map by
hand; one was missed, so an incident whose card never posted kept its evidence
bundles for the life of the process. Now each incident the pipeline follows has one
`Tracked` record, and `Tracking.forget` drops it whole. The record also says what
the card waits for besides its own timing (`Tracked.hold`), the one `Hold` that
`notify.decide` weighs with `group_wait`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from bot.core.actions.memory_evidence import sized_from_evidence
from bot.core.incidents.notify import Delivery, Hold, Wait
from bot.core.model import Incident
from bot.daemon.feed import Captured, Measured


@dataclass(slots=True)
class Tracked:
    """One incident's card and the evidence on its way to it."""

    delivery: Delivery | None = None  # what the chat has seen of it (None: not read yet)
    due: datetime | None = None  # when to decide about its card again
    held: Wait | None = None  # what held its card back at the last decision
    resolved: Incident | None = None  # resolved, its card not final yet
    measured: Measured | None = None  # its memory evidence, or why there is none
    evidence_due: datetime | None = None  # the first post waits for that evidence until then
    chart: Measured | None = None  # a memory chart waiting for the card to be posted
    bundles: list[Captured] = field(default_factory=list)  # evidence bundles, likewise
    live_since: datetime | None = None  # waiting for live checks' answers since then
    live_due: int = 0  # how many of those answers are still due

    def hold(
        self, incident: Incident, delivery: Delivery | None, live_hold: timedelta
    ) -> Hold | None:
        """What the card waits for besides its own timing: a live check's answer (until
        `live_hold` after the first was asked), else the memory evidence that sizes the
        bump its first post offers (`evidence_hold`)."""
        if self.live_since is not None:
            return Hold(Wait.LIVE_CHECK, self.live_since + live_hold)
        return self.evidence_hold(incident, delivery)

    def evidence_hold(self, incident: Incident, delivery: Delivery | None) -> Hold | None:
        """Until when the first post (and the offers on it) waits for the memory evidence
        that sizes its bump; None once it answered, its deadline passed, the card is out
        (`delivery`), or the incident offers no bump sized from it."""
        if self.evidence_due is None or (delivery is not None and delivery.posted):
            return None
        if not sized_from_evidence(incident):
            return None
        return Hold(Wait.EVIDENCE, self.evidence_due)

    def hold_for_live_check(self, now: datetime) -> None:
        """The card waits for one more live check's answer."""
        if self.live_since is None:
            self.live_since = now
        self.live_due += 1

    def answered(self) -> None:
        """One live check's answer in: the card goes out once no other is due."""
        self.live_due -= 1
        if self.live_due <= 0:
            self.stop_waiting()

    def stop_waiting(self) -> None:
        self.live_since, self.live_due = None, 0


class Tracking:
    """The records of the incidents the pipeline follows, by incident id (pipeline
    thread only)."""

    def __init__(self) -> None:
        self._by_id: dict[str, Tracked] = {}

    def get(self, incident_id: str) -> Tracked | None:
        return self._by_id.get(incident_id)

    def of(self, incident_id: str) -> Tracked:
        """The incident's record, new when it had none."""
        tracked = self._by_id.get(incident_id)
        if tracked is None:
            tracked = self._by_id[incident_id] = Tracked()
        return tracked

    def forget(self, incident_id: str) -> None:
        """The card is final (or the incident is gone): everything kept for it goes."""
        self._by_id.pop(incident_id, None)

    def items(self) -> Iterator[tuple[str, Tracked]]:
        """Each record with its incident id (a copy: records may be forgotten meanwhile)."""
        return iter(list(self._by_id.items()))

    def __contains__(self, incident_id: object) -> bool:
        return incident_id in self._by_id

    def __len__(self) -> int:
        return len(self._by_id)
