"""Cards posted while Slack's history did not answer, checked once it does: a second
card of the same incident is deleted, and the card that stays says so in its thread.

Why this exists: before a card is posted, the channel's history is searched for it
(`bot.adapters.slack.history`), so a post whose answer was lost is not repeated.
That look made the history a dependency of every page: with
`conversations.history` failing for 90 s, no card went out at all. Losing a page
costs more than a duplicate (Alertmanager's rule), so the look is best effort:
when history does not answer, the card is posted anyway with the incident's
metadata and remembered here. Every `interval` seconds the cards remembered are
looked up again; once history answers, any other card of the incident in the
channel (an earlier post Slack took although its answer was lost) is deleted,
and the card pitcrew keeps (the one its updates and replies go to) says so in
its thread. What is remembered lives in memory: a restart before history answers
leaves a possible duplicate where it is.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.adapters.slack.history import CardFinder
from bot.daemon.ports import ChatUnavailableError

log = logging.getLogger("pitcrew.slack")

MERGED = (
    "A second card of this incident was posted while Slack's history did not answer; "
    "it has been deleted. This card is the incident's."
)


@dataclass(frozen=True)
class Unchecked:
    """A card posted without a look at the channel's history."""

    channel_id: str
    ts: str
    incident_id: str
    since: datetime | None


class Reconciler:
    """Remembers cards posted unchecked and removes their duplicates once history answers."""

    def __init__(self, client: WebClient, finder: CardFinder, interval: float = 5.0) -> None:
        self._client = client
        self._finder = finder
        self._interval = interval
        self._pending: dict[tuple[str, str], Unchecked] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def remember(self, card: Unchecked) -> None:
        with self._lock:
            self._pending[(card.channel_id, card.incident_id)] = card

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def start(self) -> None:
        self._stopping.clear()
        self._thread = threading.Thread(target=self._loop, name="pitcrew-slack-reconcile")
        self._thread.daemon = True
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def reconcile(self) -> int:
        """Look again at each card posted unchecked; returns how many duplicates went."""
        with self._lock:
            cards = list(self._pending.values())
        removed = 0
        for card in cards:
            try:
                removed += self._one(card)
            except ChatUnavailableError as error:
                log.info("Slack's history still does not answer (%s); checking later", error)
                return removed
            with self._lock:
                self._pending.pop((card.channel_id, card.incident_id), None)
        return removed

    def _one(self, card: Unchecked) -> int:
        found = self._finder.cards(card.channel_id, card.incident_id, card.since)
        if found is None:
            return 0  # this token may not look: nothing to reconcile with
        others = [ts for ts in found if ts != card.ts]
        for ts in others:
            self._call(
                "chat.delete",
                lambda ts=ts: self._client.chat_delete(  # type: ignore[misc]
                    channel=card.channel_id, ts=ts
                ),
            )
            log.warning(
                "deleted a second card of %s (%s:%s) posted while history did not answer",
                card.incident_id,
                card.channel_id,
                ts,
            )
        if others:
            self._call(
                "chat.postMessage",
                lambda: self._client.chat_postMessage(
                    channel=card.channel_id, thread_ts=card.ts, text=MERGED
                ),
            )
        return len(others)

    def _call(self, method: str, call: Callable[[], object]) -> None:
        try:
            call()
        except SlackApiError as error:
            status = error.response.status_code
            if status == 429 or status >= 500:
                raise ChatUnavailableError(f"{method}: HTTP {status}") from None
            log.warning("Slack refused %s while reconciling cards: %s", method, error)
        except (SlackClientError, OSError) as error:
            raise ChatUnavailableError(f"{method}: {error}") from None

    def _loop(self) -> None:
        while not self._stopping.wait(self._interval):
            if self.pending():
                try:
                    self.reconcile()
                except Exception:
                    log.exception("bug reconciling cards; retried later")
