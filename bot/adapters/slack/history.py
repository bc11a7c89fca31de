"""Finding a message Slack may already have: each card carries its incident id in message
metadata, each thread reply the outbox message it delivers, and before a card is posted
the channel's recent history is searched for it, before a reply is posted again its
thread.

Why this exists: Slack has no idempotency key on `chat.postMessage`. When Slack
records a post but its answer is lost (the client timed out, the connection
dropped, the daemon was killed in flight), posting again makes a second card;
a slow Slack made five. So a card's post is preceded by a look at the channel's
history since the incident opened (`conversations.history` with
`include_all_metadata`), and a card found there is taken as posted. A reply
(an action's progress, a refusal, a chart) whose earlier try may have reached
Slack is looked for in its card's thread since it was queued
(`conversations.replies`): by the outbox message named in its metadata, or, for
a chart (files carry no metadata), by the file's name, which names the same
message.

Scopes: `channels:history` and `groups:history` to read history and threads,
and `channels:read` / `groups:read` to learn a channel's id from its name when
the notify route names it (`#pitcrew`) and no post has told us the id yet.
Without them Slack answers `missing_scope`: pitcrew logs it once per method and
posts without looking, so a lost answer can again mean a second card or reply.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web import SlackResponse

from bot.daemon.ports import Attempt, ChatUnavailableError

log = logging.getLogger("pitcrew.slack")

EVENT_TYPE = "pitcrew_card"
REPLY_EVENT_TYPE = "pitcrew_reply"
CHANNEL_ID = re.compile(r"[CGD][A-Z0-9]{6,}")
MAX_PAGES = 10
REPLY_PAGE = 200
# Errors that say "not now"; any other refusal (missing_scope, not_in_channel, a
# revoked token) means "this token may not look": post without looking, not never.
TRANSIENT = frozenset({"service_unavailable", "fatal_error", "internal_error", "request_timeout"})
DEFAULT_RETRY_AFTER = 30.0  # Slack always sends Retry-After with a 429; this is a fallback


def retry_after(headers: Mapping[str, Any] | None) -> float:
    """Slack's Retry-After, in seconds."""
    for key, value in (headers or {}).items():
        if key.lower() == "retry-after":
            raw = value[0] if isinstance(value, list | tuple) else value
            try:
                return max(float(raw), 0.0)
            except (TypeError, ValueError):
                break
    return DEFAULT_RETRY_AFTER


def metadata(incident_id: str) -> dict[str, Any]:
    """The metadata a card is posted with."""
    return {"event_type": EVENT_TYPE, "event_payload": {"incident_id": incident_id}}


def reply_metadata(attempt: Attempt) -> dict[str, Any]:
    """The metadata a thread reply is posted with: the outbox message it delivers."""
    return {
        "event_type": REPLY_EVENT_TYPE,
        "event_payload": {
            "incident_id": attempt.incident_id,
            "message_id": str(attempt.message_id),
        },
    }


def card_of(message: Mapping[str, Any], incident_id: str) -> bool:
    found = message.get("metadata") or {}
    payload = found.get("event_payload") or {}
    return bool(found.get("event_type") == EVENT_TYPE and payload.get("incident_id") == incident_id)


def reply_of(message: Mapping[str, Any], attempt: Attempt, filename: str = "") -> bool:
    """Whether a thread message is the one `attempt` delivers: named in its metadata, or
    carrying the file of that name."""
    found = message.get("metadata") or {}
    payload = found.get("event_payload") or {}
    if found.get("event_type") == REPLY_EVENT_TYPE:
        return bool(
            payload.get("incident_id") == attempt.incident_id
            and str(payload.get("message_id")) == str(attempt.message_id)
        )
    return bool(filename) and any(f.get("name") == filename for f in message.get("files") or ())


class Looker:
    """Pages of a Slack listing, told apart: "not now" raises, "may not look" warns once."""

    what = "messages"  # what goes out without a look when this token may not look

    def __init__(self, client: WebClient) -> None:
        self._client = client
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    def _call(
        self, method: str, call: Callable[[str | None], SlackResponse], cursor: str
    ) -> Mapping[str, Any] | None:
        """One page (after `cursor`, if any); None when this token may not look."""
        try:
            response = call(cursor or None)
        except SlackApiError as error:
            data = error.response.data
            code = str(data.get("error", "")) if isinstance(data, dict) else ""
            status = error.response.status_code
            if status == 429 or code in ("ratelimited", "rate_limited"):
                wait = retry_after(error.response.headers)
                raise ChatUnavailableError(f"{method}: rate limited", retry_after=wait) from None
            if status >= 500 or code in TRANSIENT:
                raise ChatUnavailableError(f"{method}: {code or f'HTTP {status}'}") from None
            self._warn_once(method, code or f"HTTP {status}")
            return None
        except (SlackClientError, OSError) as error:
            raise ChatUnavailableError(f"{method}: {error}") from None
        data = response.data
        return data if isinstance(data, dict) else None

    def _warn_once(self, method: str, code: str) -> None:
        with self._lock:
            if f"{method}:{code}" in self._warned:
                return
            self._warned.add(f"{method}:{code}")
        log.warning(
            "Slack refused %s (%s): %s are posted without looking for one already "
            "there, so a lost answer may mean a second one (see docs/slack.md for the scopes)",
            method,
            code,
            self.what,
        )


def _next_cursor(page: Mapping[str, Any]) -> str:
    return str((page.get("response_metadata") or {}).get("next_cursor") or "")


class CardFinder(Looker):
    """Looks for an incident's card in a channel's recent history."""

    what = "cards"

    def __init__(self, client: WebClient) -> None:
        super().__init__(client)
        self._ids: dict[str, str] = {}

    def learn(self, channel: str, channel_id: str) -> None:
        """A post's answer names the channel's id."""
        with self._lock:
            self._ids[channel.removeprefix("#")] = channel_id

    def known_id(self, channel: str) -> str:
        """The channel's id when it is one or a post has told it; else its name."""
        name = channel.removeprefix("#")
        with self._lock:
            return name if CHANNEL_ID.fullmatch(name) else self._ids.get(name, name)

    def find(self, channel: str, incident_id: str, since: datetime | None) -> str | None:
        """`CHANNEL_ID:TS` of the incident's card, or None when there is none (or this
        token may not look). Raises ChatUnavailableError when Slack cannot answer now."""
        channel_id = self._channel_id(channel)
        if channel_id is None:
            return None
        found = self.cards(channel_id, incident_id, since, first=True)
        return f"{channel_id}:{found[0]}" if found else None

    def cards(
        self, channel_id: str, incident_id: str, since: datetime | None, *, first: bool = False
    ) -> list[str] | None:
        """The ts of every card of the incident in the channel, oldest first (`first`: the
        newest only), or None when this token may not look. Raises ChatUnavailableError
        when Slack cannot answer now."""
        oldest = f"{since.timestamp() - 60:.6f}" if since is not None else "0"
        cursor, found = "", list[str]()
        for _ in range(MAX_PAGES):
            page = self._call(
                "conversations.history",
                lambda after: self._client.conversations_history(
                    channel=channel_id,
                    oldest=oldest,
                    limit=200,
                    include_all_metadata=True,
                    cursor=after,
                ),
                cursor,
            )
            if page is None:
                return None
            for message in page.get("messages") or ():
                if card_of(message, incident_id) and not message.get("thread_ts"):
                    found.append(str(message["ts"]))
                    if first:
                        return found
            cursor = _next_cursor(page)
            if not cursor:
                break
        return sorted(found, key=float)

    def _channel_id(self, channel: str) -> str | None:
        name = channel.removeprefix("#")
        if CHANNEL_ID.fullmatch(name):
            return name
        with self._lock:
            if name in self._ids:
                return self._ids[name]
        cursor = ""
        for _ in range(MAX_PAGES):
            page = self._call(
                "conversations.list",
                lambda after: self._client.conversations_list(
                    types="public_channel,private_channel",
                    exclude_archived=True,
                    limit=1000,
                    cursor=after,
                ),
                cursor,
            )
            if page is None:
                return None
            for found in page.get("channels") or ():
                if found.get("name") == name:
                    self.learn(name, str(found["id"]))
                    return str(found["id"])
            cursor = _next_cursor(page)
            if not cursor:
                return None
        return None


class ReplyFinder(Looker):
    """Looks for a thread reply (or a chart) in its card's thread, among the replies
    since it was queued: at most MAX_PAGES pages of REPLY_PAGE."""

    what = "thread replies"

    def find(self, channel_id: str, thread_ts: str, attempt: Attempt, filename: str = "") -> str:
        """The ts of the reply `attempt` delivers, or "" when the thread has none (or
        this token may not look). Raises ChatUnavailableError when Slack cannot answer now."""
        since = attempt.queued_at
        oldest = f"{since.timestamp() - 60:.6f}" if since is not None else "0"
        cursor = ""
        for _ in range(MAX_PAGES):
            page = self._call(
                "conversations.replies",
                lambda after: self._client.conversations_replies(
                    channel=channel_id,
                    ts=thread_ts,
                    oldest=oldest,
                    limit=REPLY_PAGE,
                    include_all_metadata=True,
                    cursor=after,
                ),
                cursor,
            )
            if page is None:
                return ""
            for message in page.get("messages") or ():
                if message.get("ts") != thread_ts and reply_of(message, attempt, filename):
                    return str(message["ts"])
            cursor = _next_cursor(page)
            if not cursor:
                return ""
        return ""
