"""The chat interface: where cards are posted, updated and answered in threads.

The pipeline talks to this interface only; the console chat and the Slack chat
implement it, so the daemon runs the same with either.
"""

from __future__ import annotations

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


class Chat(Protocol):
    name: str

    def post(self, channel: str, report: Report) -> str:
        """Post a new card; returns the chat's reference to it (for updates and replies)."""
        ...

    def update(self, ref: str, report: Report) -> None:
        """Replace the card at `ref` with a new rendering of the report."""
        ...

    def reply(self, ref: str, text: str) -> None:
        """Add a message to the card's thread."""
        ...

    def attach(self, ref: str, path: str, text: str) -> None:
        """Add a file (a PNG chart) to the card's thread, with `text` as its comment."""
        ...

    def healthy(self) -> bool:
        """False when the chat connection is known to be down."""
        ...
