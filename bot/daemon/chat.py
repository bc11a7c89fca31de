"""The chat interface: where cards are posted, updated and answered in threads.

The pipeline talks to this interface only; the console chat and the Slack chat
implement it, so the daemon runs the same with either.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from bot.core.model import Report


class ChatUnavailableError(Exception):
    """The chat could not take a message now; the outbox keeps it and retries later.

    `retry_after` is the delay the chat asked for (e.g. Slack's 429 Retry-After)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ChatRejectedError(Exception):
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
