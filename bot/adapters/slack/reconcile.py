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
its thread. Nothing is deleted unless the kept card itself is in the history.

A post that went unanswered (Slack slow past the client's timeout, the connection
dropped) while history did not answer is remembered too, without a card (`uncertain`):
Slack may have taken it, and the next try may post another. Which card is kept is only
known once the outbox has one (its next post answered, or the card found in history
and taken as posted): that card is then remembered as kept in its place, and every
other card of the incident in the channel, however many unanswered posts made them, is
deleted once history answers.

What is remembered is kept in the store as well (`keep_in`, an `UncheckedCards`
port: the daemon's store), so a daemon stopped or killed before history answers
takes the cards up again at its next start and still ends with one card per
incident; a card's row goes once it is checked. A row the store cannot read is
logged with its problem and left there. When the store refuses a write, the card
is still checked while this daemon runs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.adapters.slack.history import CardFinder
from bot.core.errors import StoreError
from bot.daemon.ports import (
    ChatUnavailableError,
    Clock,
    UncheckedCard,
    UncheckedCards,
    utcnow,
)

log = logging.getLogger("pitcrew.slack")

MERGED = (
    "A second card of this incident was posted while Slack's history did not answer; "
    "it has been deleted. This card is the incident's."
)


def _key(card: UncheckedCard) -> tuple[str, str]:
    return card.channel_id, card.incident_id


class Reconciler:
    """Remembers cards posted unchecked and removes their duplicates once history answers."""

    def __init__(
        self,
        client: WebClient,
        finder: CardFinder,
        interval: float = 5.0,
        clock: Clock = utcnow,
    ) -> None:
        self._client = client
        self._finder = finder
        self._interval = interval
        self._clock = clock
        self._pending: dict[tuple[str, str], UncheckedCard] = {}
        self._kept: UncheckedCards | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def keep_in(self, kept: UncheckedCards) -> None:
        """Keep the cards in `kept` (the store) too: those remembered so far are written
        to it, and those it holds from an earlier run are taken up to be checked."""
        with self._lock:
            self._kept = kept
            mine = list(self._pending.values())
        for card in mine:
            self._keep(kept, card)
        try:
            stored = kept.unchecked_cards()
        except StoreError as error:
            log.error("cannot take up the cards posted unchecked before this start: %s", error)
            return
        for problem in stored.unreadable:
            log.error("%s; left in the store, not checked", problem)
        with self._lock:
            for card in stored.cards:
                self._pending.setdefault(_key(card), card)
        if stored.cards:
            log.info(
                "%d cards posted while Slack's history did not answer are checked once it does",
                len(stored.cards),
            )

    def remember(self, card: UncheckedCard) -> None:
        """A card to check (`card.ts`: the one kept); it takes the place of the incident's
        unanswered posts remembered so far, whatever their channel was called."""
        with self._lock:
            replaced = [
                old
                for key, old in self._pending.items()
                if old.incident_id == card.incident_id and not old.ts and key != _key(card)
            ]
            for old in replaced:
                del self._pending[_key(old)]
            self._pending[_key(card)] = card
            kept = self._kept
        if kept is not None:
            self._keep(kept, card)
            for old in replaced:
                self._forget(kept, old)

    def uncertain(self, card: UncheckedCard) -> None:
        """A post that went unanswered while history did not answer (`card.ts` is "")."""
        with self._lock:
            if _key(card) in self._pending:
                return  # a card or an unanswered post of the incident is remembered already
        self.remember(card)

    def unanswered(self, incident_id: str) -> bool:
        """Whether a post of the incident went unanswered and is not checked yet."""
        with self._lock:
            return any(c.incident_id == incident_id and not c.ts for c in self._pending.values())

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
            if not card.ts:
                continue  # which card is kept is known once the outbox has one
            try:
                removed += self._one(card)
            except ChatUnavailableError as error:
                log.info("Slack's history still does not answer (%s); checking later", error)
                return removed
            self._checked(card)
        return removed

    def _one(self, card: UncheckedCard) -> int:
        found = self._finder.cards(card.channel_id, card.incident_id, card.since)
        if found is None:
            return 0  # this token may not look: nothing to reconcile with
        if card.ts not in found:
            log.warning(
                "the card of %s pitcrew keeps (%s:%s) is not in the channel's history; "
                "no other card of it is deleted",
                card.incident_id,
                card.channel_id,
                card.ts,
            )
            return 0
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

    def _checked(self, card: UncheckedCard) -> None:
        """The card is checked: forgotten, unless a later card of its incident came since."""
        with self._lock:
            if self._pending.get(_key(card)) == card:
                del self._pending[_key(card)]
            kept = self._kept
        if kept is not None:
            self._forget(kept, card)

    def _forget(self, kept: UncheckedCards, card: UncheckedCard) -> None:
        try:
            kept.forget_unchecked(card)
        except StoreError as error:
            log.warning("cannot forget the checked card of %s (%s)", card.incident_id, error)

    def _keep(self, kept: UncheckedCards, card: UncheckedCard) -> None:
        """Write the card to the store; when that fails it is still checked while this
        daemon runs (the card is out already: raising would post it again)."""
        try:
            kept.remember_unchecked(card, self._clock())
        except StoreError as error:
            log.warning(
                "cannot keep the card of %s posted unchecked in the store (%s); it is "
                "checked while this daemon runs, not after a restart",
                card.incident_id,
                error,
            )
        except Exception:
            log.exception(
                "bug keeping the card of %s posted unchecked; it is checked while this "
                "daemon runs, not after a restart",
                card.incident_id,
            )

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
