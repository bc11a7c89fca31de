"""The outbox worker: delivers queued notifications to the chat, in order, with retries.

Why this exists: the pipeline decides what the chat should see and queues it
in the store (with the record of what was decided), so a chat outage delays
cards but never loses or repeats them. This worker takes the due messages
one at a time (the store keeps an update behind the post it updates), posts,
updates or replies, and marks each delivered with the chat's reference (a
POST's reference is what later UPDATEs and REPLYs use). What a chat's error
means is its class (`bot.core.errors`): a `TransientError` (the chat's
`ChatUnavailableError`) leaves the message in the outbox for a later attempt,
exponential backoff with jitter or the delay the chat asked for (`retry_after`);
a `PermanentError` (`ChatRejectedError`: an unknown channel, a revoked token)
gives it up at once (abandoned), since the same message can never pass. A `HeldError`
(the bot not invited to the channel) waits for a person: the message is kept, retried
with back-off up to `HELD_CAP` apart for as long as it takes, and marked `held` so
`pitcrew status` lists it; the other messages go on meanwhile. While
the chat is unavailable nothing else is sent either, so messages queued
during an outage go out in the order they were queued; a new card's back-off
stays under `POST_CAP` seconds (a missed page costs more than a retry), and so
does the pause another message's failure puts on the whole outbox (unless the
chat asked for longer): an update backing off for minutes holds no new card back.

Any other error is a bug here or in the chat adapter: its traceback is logged
once (at the first attempt), it is counted (`pitcrew_internal_errors_total`
with stage `outbox`), and the message is retried with back-off up to
`max_attempts` times; then it is given up (abandoned: a dead letter that
`pitcrew status` lists and `pitcrew_dead_letters_total` counts), so it stops
blocking the messages behind it.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from bot.core.errors import HeldError, PermanentError, PitcrewError, TransientError
from bot.core.model import Notification, NotificationKind
from bot.daemon.metrics import Metrics
from bot.daemon.ports import Attempt, Chat, Clock, OutboxStore, QueuedMessage

log = logging.getLogger("pitcrew.outbox")

POST_CAP = 10.0  # seconds: the longest back-off before a new card's next attempt
HELD_CAP = 300.0  # seconds: the longest wait between tries of a message held by a person
MAX_ATTEMPTS = 8  # attempts at a message that meets an unexpected error before giving up


class NoCardError(PitcrewError):
    """An update or reply for a card the chat never got; retried until the post is out."""


@dataclass
class Backoff:
    """Delay before attempt `n + 1`: base * factor**n, capped, +/- `jitter` of it."""

    base: float = 1.0
    factor: float = 2.0
    cap: float = 300.0
    jitter: float = 0.2
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempts: int) -> float:
        raw = min(self.cap, self.base * self.factor ** min(attempts, 32))
        spread = raw * self.jitter
        return max(0.0, raw + self.rng.uniform(-spread, spread))


class Outbox:
    """Delivers due messages; `start` runs it on a thread, `deliver_due` once, inline."""

    def __init__(
        self,
        store: OutboxStore,
        chat: Chat,
        *,
        clock: Clock,
        metrics: Metrics | None = None,
        backoff: Backoff | None = None,
        poll_seconds: float = 1.0,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> None:
        self._store = store
        self._chat = chat
        self._clock = clock
        self._metrics = metrics or Metrics()
        self._backoff = backoff or Backoff()
        self._poll = poll_seconds
        self._max_attempts = max_attempts
        self._since = clock()
        self._paused_until: datetime | None = None
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    # -- delivering ----------------------------------------------------------------------

    def deliver_due(self) -> int:
        """Deliver every message that is due now, oldest first; stops early while the chat
        is unavailable. Returns how many were delivered."""
        delivered = 0
        with self._lock:
            while not self._paused():
                message = self._store.next_due(self._clock())
                if message is None:
                    break
                if self._deliver(message):
                    delivered += 1
                elif self._paused():
                    break
        return delivered

    def flush(self, timeout: float) -> bool:
        """Deliver until nothing is due (True) or `timeout` seconds passed or the chat is
        unavailable (False); for shutdown."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.deliver_due()
            if self._paused():
                return False
            if self._store.next_due(self._clock()) is None:
                return True
        return False

    def pending(self) -> int:
        return self._store.pending_notifications()

    def _paused(self) -> bool:
        return self._paused_until is not None and self._clock() < self._paused_until

    def _deliver(self, message: QueuedMessage) -> bool:
        notification = message.notification
        assert notification.id is not None
        kind = str(notification.kind)
        try:
            ref = self._send(notification, self._attempt(message))
        except HeldError as error:
            self._held(message, str(error))
            return False
        except TransientError as error:
            asked = error.retry_after
            delay = asked if asked is not None else self._delay(message)
            self._retry_later(message, f"chat unavailable: {error}", delay)
            pause = delay if asked is not None else min(delay, POST_CAP)
            self._paused_until = self._clock() + timedelta(seconds=pause)
            return False
        except PermanentError as error:
            self._store.mark_abandoned(
                notification.id, f"refused by the chat: {error}", self._clock()
            )
            self._metrics.notifications.labels(kind=kind, result="abandoned").inc()
            log.error("abandoned %s for incident %s: %s", kind, notification.incident_id, error)
            return False
        except NoCardError as error:
            self._retry_or_give_up(message, str(error))
            return False
        except Exception as error:
            if message.attempts == 0:  # the traceback once; later attempts say it in a line
                log.exception("bug delivering %s for incident %s", kind, notification.incident_id)
            self._metrics.internal_errors.labels(stage="outbox").inc()
            self._retry_or_give_up(message, f"{type(error).__name__}: {error}")
            return False
        self._store.mark_delivered(notification.id, ref, self._clock())
        self._metrics.notifications.labels(kind=kind, result="delivered").inc()
        log.info("delivered %s for incident %s (%s)", kind, notification.incident_id, ref)
        return True

    def _attempt(self, message: QueuedMessage) -> Attempt:
        """A message tried before, or queued before this outbox began (a process may have
        died with it in flight), may already be in the chat."""
        notification = message.notification
        assert notification.id is not None
        queued = notification.created_at
        uncertain = message.attempts > 0 or queued is None or queued < self._since
        return Attempt(notification.id, notification.incident_id, queued, uncertain)

    def _send(self, notification: Notification, attempt: Attempt) -> str:
        if notification.kind is NotificationKind.POST:
            if notification.report is None:
                raise ValueError("a post needs a report")
            return self._chat.post(notification.channel, notification.report)
        ref = self._store.chat_ref(notification.incident_id, notification.channel)
        if ref is None:
            raise NoCardError(f"incident {notification.incident_id} has no card yet")
        if notification.kind is NotificationKind.UPDATE:
            if notification.report is None:
                raise ValueError("an update needs a report")
            self._chat.update(ref, notification.report)
        elif notification.attachment:
            self._chat.attach(ref, notification.attachment, notification.text, attempt)
        else:
            self._chat.reply(ref, notification.text, attempt)
        return ref

    def _delay(self, message: QueuedMessage) -> float:
        delay = self._backoff.delay(message.attempts)
        if message.notification.kind is NotificationKind.POST:
            return min(delay, POST_CAP)
        return delay

    def _retry_or_give_up(self, message: QueuedMessage, error: str) -> None:
        notification = message.notification
        assert notification.id is not None
        if message.attempts + 1 < self._max_attempts:
            self._retry_later(message, error, None)
            return
        given_up = f"given up after {message.attempts + 1} attempts: {error}"
        self._store.mark_abandoned(notification.id, given_up, self._clock())
        self._metrics.dead_letters.labels(kind=str(notification.kind)).inc()
        self._metrics.notifications.labels(kind=str(notification.kind), result="abandoned").inc()
        log.error(
            "gave up on %s for incident %s (pitcrew status lists it): %s",
            notification.kind,
            notification.incident_id,
            given_up,
        )

    def _held(self, message: QueuedMessage, error: str) -> None:
        """Kept for a person to act: retried with back-off up to HELD_CAP, never given up."""
        notification = message.notification
        assert notification.id is not None
        wait = min(self._backoff.delay(message.attempts), HELD_CAP)
        self._store.mark_failed(
            notification.id, error, self._clock() + timedelta(seconds=wait), held=error
        )
        self._metrics.notifications.labels(kind=str(notification.kind), result="held").inc()
        log.warning(
            "%s for incident %s waits for a person (attempt %d, next in %.0fs): %s",
            notification.kind,
            notification.incident_id,
            message.attempts + 1,
            wait,
            error,
        )

    def _retry_later(self, message: QueuedMessage, error: str, delay: float | None) -> None:
        notification = message.notification
        assert notification.id is not None
        wait = self._delay(message) if delay is None else delay
        self._store.mark_failed(notification.id, error, self._clock() + timedelta(seconds=wait))
        self._metrics.chat_errors.inc()
        self._metrics.notifications.labels(kind=str(notification.kind), result="failed").inc()
        log.warning(
            "could not deliver %s for incident %s (attempt %d, next in %.1fs): %s",
            notification.kind,
            notification.incident_id,
            message.attempts + 1,
            wait,
            error,
        )

    # -- the thread ------------------------------------------------------------------------

    def wake(self) -> None:
        """Something was queued (or a retry may be due): look now."""
        self._wake.set()

    def start(self) -> None:
        """Deliver on a thread. A message queued before now may be in the chat already
        (an earlier daemon, or the leader this replica took over from, died with it in
        flight), so it is looked for before it is sent again."""
        self._since = self._clock()
        self._stopping.clear()
        self._thread = threading.Thread(target=self._loop, name="pitcrew-outbox", daemon=True)
        self._thread.start()

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                self.deliver_due()
            except Exception:
                log.exception("bug in the outbox; it goes on")
                self._metrics.internal_errors.labels(stage="outbox").inc()
            self._wake.wait(self._wait_seconds())
            self._wake.clear()

    def _wait_seconds(self) -> float:
        if self._paused_until is None:
            return self._poll
        left = (self._paused_until - self._clock()).total_seconds()
        return min(self._poll, max(left, 0.01))
