"""The Slack chat: incident cards posted, updated and answered in threads through the
Web API, behind the same `Chat` interface as the console chat.

Why this exists: the outbox delivers cards one at a time and keeps whatever
could not be delivered, so this side must say clearly whether Slack took a
message, is busy (rate limited or down: `ChatUnavailableError`, with Slack's
Retry-After, so the outbox retries later and nothing is lost or sent twice),
waits for a person (`SlackHeldError`: the bot not in the channel; kept and retried),
or refused it for good (`SlackRejectedError`). It paces messages to about one
a second per channel, as Slack asks for `chat.postMessage`, and after a 429
sends nothing more to that channel until the wait is over. A card Slack
refuses as too big or invalid is sent again as a minimal card rather than
never. The Web API base URL is a setting, so tests and staging point it at a
local Slack emulator.

A card's reference is `CHANNEL_ID:TS`: what `chat.update` and thread replies
need. The Bolt app (slash command, buttons, Socket Mode or HTTP) lives in
`bot.adapters.slack.app`; `healthy()` is false when the Socket Mode connection is
down or stale, so the daemon's liveness probe restarts a pod with a dead socket.

Wiring (bot.app.wiring): `bot.app.slack_chat.slack_chat(settings)` makes the chat for
the outbox; once the service and the HTTP server exist, `chat.bind(service,
http=server, metrics=metrics)`, then `chat.start()` with the daemon and `chat.stop()`
first on shutdown.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
)
from slack_sdk.web import SlackResponse

from bot.adapters.slack.app import Diagnoser, SlackApp, SlackConfig, Stray
from bot.adapters.slack.blocks import CardOptions, Message, card, minimal_card, text_message
from bot.adapters.slack.bundles import BundleWriter
from bot.adapters.slack.commands import describe_duration
from bot.adapters.slack.events import Replays
from bot.adapters.slack.history import (
    CHANNEL_ID,
    CardFinder,
    ReplyFinder,
    metadata,
    reply_metadata,
)
from bot.adapters.slack.history import retry_after as _retry_after
from bot.adapters.slack.reconcile import Reconciler
from bot.core.errors import HeldError
from bot.core.model import Report
from bot.daemon.metrics import Metrics
from bot.daemon.ports import (
    Attempt,
    ChatRejectedError,
    ChatService,
    ChatUnavailableError,
    Clock,
    UncheckedCard,
    UncheckedCards,
    utcnow,
)

Route = Callable[[str, dict[str, str], bytes], tuple[int, dict[str, str], bytes]]


class Routes(Protocol):
    """Where HTTP mode mounts `/slack/events`: the daemon's HTTP server."""

    def mount(self, path: str, route: Route) -> None: ...


log = logging.getLogger("pitcrew.slack")

_TS = re.compile(r"\d+\.\d+")

# Errors that say "not now" rather than "never".
TRANSIENT = frozenset(
    {
        "ratelimited",
        "rate_limited",
        "service_unavailable",
        "fatal_error",
        "internal_error",
        "request_timeout",
    }
)
# Errors that say the blocks were refused: worth one more try with a minimal card.
BLOCK_ERRORS = frozenset(
    {"invalid_blocks", "invalid_blocks_format", "msg_blocks_too_long", "msg_too_long"}
)


class SlackHeldError(HeldError):
    """Slack takes nothing in a channel the bot is not in (`not_in_channel`) until a
    person invites it: the message is kept and retried, and `pitcrew status` says so."""

    def __init__(self, method: str, channel: str) -> None:
        self.method = method
        super().__init__(
            f"Slack refused {method}: not_in_channel: invite the bot to {channel} "
            "(/invite @pitcrew there); it is retried until then"
        )


class SlackRejectedError(ChatRejectedError):
    """Slack refused a message for good (for example `channel_not_found`,
    `not_in_channel`, `invalid_auth`); retrying the same message will not help."""

    def __init__(self, method: str, error: str) -> None:
        self.method = method
        self.error = error
        super().__init__(f"Slack refused {method}: {error}")


def parse_ref(ref: str) -> tuple[str, str]:
    """`CHANNEL_ID:TS` -> (channel id, message ts)."""
    channel, sep, ts = ref.partition(":")
    if not sep or not CHANNEL_ID.fullmatch(channel) or not _TS.fullmatch(ts):
        raise ValueError(f"not a Slack card reference: {ref!r}")
    return channel, ts


def upload_name(path: str, attempt: Attempt | None) -> str:
    """The name a chart is uploaded under: `memory-INCIDENT.png` becomes
    `memory-INCIDENT-MESSAGE.png`, so the thread shows which outbox message shared it."""
    name = Path(path)
    return name.name if attempt is None else f"{name.stem}-{attempt.message_id}{name.suffix}"


def _error_code(response: SlackResponse) -> str:
    data = response.data
    return str(data.get("error", "")) if isinstance(data, dict) else ""


class ChannelPacer:
    """About one message per `interval` seconds per channel, and no message to a
    channel Slack asked us to wait for (429 Retry-After). A channel posted to by name
    is known by its id afterwards (`alias`), so both count as one channel."""

    def __init__(
        self,
        interval: float,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._interval = interval
        self._monotonic = monotonic
        self._sleep = sleep
        self._next: dict[str, float] = {}
        self._blocked: dict[str, float] = {}
        self._aliases: dict[str, str] = {}
        self._lock = threading.Lock()

    def alias(self, name: str, channel_id: str) -> None:
        with self._lock:
            if name == channel_id or self._aliases.get(name) == channel_id:
                return
            self._aliases[name] = channel_id
            for times in (self._next, self._blocked):
                if name in times:
                    times[channel_id] = max(times.pop(name), times.get(channel_id, 0.0))

    def blocked_for(self, channel: str) -> float:
        with self._lock:
            key = self._aliases.get(channel, channel)
            return max(self._blocked.get(key, 0.0) - self._monotonic(), 0.0)

    def block(self, channel: str, seconds: float) -> None:
        with self._lock:
            key = self._aliases.get(channel, channel)
            until = self._monotonic() + seconds
            self._blocked[key] = max(self._blocked.get(key, 0.0), until)

    def wait(self, channel: str) -> None:
        """Take the channel's next slot, sleeping until it comes (at most `interval`)."""
        with self._lock:
            key = self._aliases.get(channel, channel)
            now = self._monotonic()
            slot = max(now, self._next.get(key, now))
            self._next[key] = slot + self._interval
        if slot > now:
            self._sleep(slot - now)


class SlackChat:
    """`Chat` over Slack: cards via the Web API, clicks and commands via `SlackApp`."""

    name = "slack"

    def __init__(
        self,
        config: SlackConfig,
        *,
        metrics: Metrics | None = None,
        clock: Clock = utcnow,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self.metrics = metrics or Metrics()
        # Delivery: 429s go back to the outbox (it retries when Slack says), never a sleep,
        # and no silent resend after a dropped connection: Slack may have taken the post.
        self.web = WebClient(
            token=config.bot_token,
            base_url=config.api_url,
            timeout=config.timeout,
            retry_handlers=[],
        )
        self.finder = CardFinder(self.web)
        self.replies = ReplyFinder(self.web)
        self.reconciler = Reconciler(self.web, self.finder, clock=clock)
        # Listeners' calls (ephemerals, user groups) run off the ack path: short retries are fine.
        self.listener_web = WebClient(
            token=config.bot_token,
            base_url=config.api_url,
            timeout=config.timeout,
            retry_handlers=[ConnectionErrorRetryHandler(), RateLimitErrorRetryHandler(2)],
        )
        self.app = SlackApp(
            config, self.listener_web, metrics=self.metrics, clock=clock, groups_client=self.web
        )
        self.pacer = ChannelPacer(config.channel_interval, monotonic, sleep)
        self.options = CardOptions(
            silence_for=describe_duration(config.silence_for), cluster=config.cluster
        )
        self.team = ""
        self.bot_user = ""
        self._started = False
        self._stopping = threading.Event()
        self._connector: threading.Thread | None = None

    # -- wiring and lifecycle ------------------------------------------------------------

    def bind(
        self,
        service: ChatService,
        *,
        http: Routes | None = None,
        metrics: Metrics | None = None,
        diagnoser: Diagnoser | None = None,
        replays: Replays | None = None,
        bundle_writer: BundleWriter | None = None,
        unchecked: UncheckedCards | None = None,
        stray: Stray | None = None,
    ) -> None:
        """Connect the listeners to the service; in HTTP mode mount `/slack/events` on
        the daemon's HTTP server. `replays`: where signed requests already seen are
        kept (the store, so a restart forgets none); `bundle_writer`: what `/pitcrew
        bundle` uploads; `unchecked`: where cards posted while history did not answer
        are kept until checked (the store: those an earlier run left are taken up);
        `stray`: told of each click for another cluster's card. Call before `start`."""
        if metrics is not None:
            self.metrics = metrics
            self.app.metrics = metrics
        self.app.bind(service, diagnoser, replays, bundle_writer, stray)
        if unchecked is not None:
            self.reconciler.keep_in(unchecked)
        if not self.config.socket_mode:
            if http is None:
                raise ValueError("Slack's HTTP mode needs the daemon's HTTP server to mount on")
            http.mount(self.config.events_path, self.app.events_route)

    def start(self, deliver: bool = True) -> None:
        """Check the bot token (auth.test), then open the Socket Mode connection in the
        background (retrying until Slack answers; the SDK reconnects after that). Without
        `deliver` (a standby: it answers clicks and commands, the leader delivers) the
        cards posted unchecked are checked only from `deliver()` on."""
        self._check_token()
        self._started = True
        if deliver:
            self.deliver()
        if self.config.socket_mode:
            self._connector = threading.Thread(
                target=self._connect, name="pitcrew-slack-connect", daemon=True
            )
            self._connector.start()

    def deliver(self) -> None:
        """This replica delivers (it leads): cards posted unchecked are checked from now."""
        self.reconciler.start()

    def stop(self) -> None:
        self._stopping.set()
        self._started = False
        self.reconciler.stop()
        if self._connector is not None:
            self._connector.join(timeout=5)
        self.app.close()

    def healthy(self) -> bool:
        if not self._started:
            return False
        if self.config.socket_mode:
            return self.app.socket_alive()
        return True

    def _check_token(self) -> None:
        try:
            identity = self.web.auth_test()
        except SlackApiError as error:
            code = _error_code(error.response)
            if code in TRANSIENT or error.response.status_code >= 500:
                log.warning("Slack is unavailable at start (%s); cards wait in the outbox", code)
                return
            raise SlackRejectedError("auth.test", code or str(error.response.status_code)) from None
        except (SlackClientError, OSError) as error:
            log.warning("Slack is unreachable at start (%s); cards wait in the outbox", error)
            return
        self.team = str(identity.get("team_id") or "")
        self.bot_user = str(identity.get("user_id") or "")
        log.info("Slack: bot %s in workspace %s", self.bot_user, self.team)

    def _connect(self) -> None:
        delay = 1.0
        while not self._stopping.is_set():
            try:
                handler = self.app.handler
                if handler is None:
                    self.app.connect_socket(self.listener_web)
                else:
                    handler.client.connect()
                if (
                    self.app.handler is not None
                    and self.app.handler.client.current_app_monitor_started
                ):
                    log.info("Slack Socket Mode connection open")
                    return
            except Exception as error:
                log.warning(
                    "Slack Socket Mode: cannot connect (%s); retrying in %.0fs", error, delay
                )
            self._stopping.wait(delay)
            delay = min(delay * 2, 30.0)

    # -- the Chat interface --------------------------------------------------------------

    def post(self, channel: str, report: Report) -> str:
        """Post the card, unless the channel already has it (an earlier answer lost to a
        timeout or a crash): the card's metadata names its incident (see `history`). A
        post that goes unanswered while history does not answer is remembered, and the
        card kept in the end is checked for others once history answers (`reconcile`)."""
        key = report.incident_id
        self._not_blocked(channel, "chat.postMessage")
        try:
            found = self.finder.find(channel, key, report.opened_at) if key else None
            looked = True
        except ChatUnavailableError as error:  # best effort: a missed page costs more
            log.warning(
                "Slack's history did not answer (%s); posting the card of %s anyway, "
                "a second one is removed once it answers",
                error,
                key,
            )
            found, looked = None, False
        if found is not None:
            log.info("Slack already has the card of %s (%s); not posting it again", key, found)
            self._kept(found, report, checked=False)
            return found
        try:
            ref = self._posted(channel, report)
        except ChatUnavailableError as error:
            if not key or error.retry_after is not None:
                raise
            found = self._look_again(channel, report)  # no answer: Slack may have it
            if found is None:
                raise
            log.info("Slack took the card of %s although it did not say so", key)
            self._kept(found, report, checked=False)
            return found
        self._kept(ref, report, checked=looked)
        return ref

    def _posted(self, channel: str, report: Report) -> str:
        """`chat.postMessage` of the card; its `CHANNEL_ID:TS`. An answer without them is
        no answer: Slack may have the card or not (ChatUnavailableError, retried)."""
        key = report.incident_id

        def send(message: Message) -> SlackResponse:
            return self.web.chat_postMessage(
                channel=channel,
                text=message.text,
                blocks=message.blocks,
                unfurl_links=False,
                unfurl_media=False,
                metadata=metadata(key) if key else None,
            )

        message = card(report, self.options)
        response = self._send(channel, "chat.postMessage", send, message, report)
        channel_id, ts = str(response.get("channel") or ""), str(response.get("ts") or "")
        if not CHANNEL_ID.fullmatch(channel_id) or not _TS.fullmatch(ts):
            raise ChatUnavailableError(
                f"chat.postMessage answered ok without the card's channel and ts "
                f"(channel={channel_id or '-'}, ts={ts or '-'})"
            )
        self.pacer.alias(channel, channel_id)
        self.finder.learn(channel, channel_id)
        return f"{channel_id}:{ts}"

    def _look_again(self, channel: str, report: Report) -> str | None:
        """After an unanswered post: the card, if history has it; when history does not
        answer either, the post is remembered as unanswered (`Reconciler.uncertain`)."""
        key = report.incident_id
        try:
            return self.finder.find(channel, key, report.opened_at)
        except ChatUnavailableError:
            where = self.finder.known_id(channel)
            self.reconciler.uncertain(UncheckedCard(where, "", key, report.opened_at))
            return None

    def _kept(self, ref: str, report: Report, *, checked: bool) -> None:
        """The card the outbox keeps for the incident: remembered to be checked for others
        unless it was posted after a look that found none and no post went unanswered."""
        key = report.incident_id
        if not key or (checked and not self.reconciler.unanswered(key)):
            return
        channel_id, ts = parse_ref(ref)
        self.reconciler.remember(UncheckedCard(channel_id, ts, key, report.opened_at))

    def update(self, ref: str, report: Report) -> None:
        channel, ts = parse_ref(ref)

        def send(message: Message) -> SlackResponse:
            return self.web.chat_update(
                channel=channel, ts=ts, text=message.text, blocks=message.blocks
            )

        self._send(channel, "chat.update", send, card(report, self.options), report)

    def reply(self, ref: str, text: str, attempt: Attempt | None = None) -> None:
        """A message in the card's thread, named by `attempt` in its metadata; when an
        earlier try may have reached Slack, or this one goes unanswered, the thread is
        looked at first and a reply found there is not posted again (see `history`)."""
        self._reply(ref, text, attempt, "")

    def attach(self, ref: str, path: str, text: str, attempt: Attempt | None = None) -> None:
        """A file (the memory chart) in the card's thread (`files.uploadV2`: needs the
        `files:write` scope); a reply with the text alone when the file is gone. Files
        carry no metadata, so the uploaded file's name names the outbox message and is
        what the thread is searched for."""
        filename = upload_name(path, attempt)
        if not Path(path).is_file():
            self._reply(ref, text, attempt, filename)
            return
        channel, ts = parse_ref(ref)

        def send(message: Message) -> SlackResponse:
            return self.web.files_upload_v2(
                channel=channel,
                thread_ts=ts,
                file=path,
                filename=filename,
                title=Path(path).stem,
                initial_comment=message.text,
            )

        self._once(
            channel, ts, attempt, filename, "files.completeUploadExternal", send, text_message(text)
        )

    def _reply(self, ref: str, text: str, attempt: Attempt | None, filename: str) -> None:
        channel, ts = parse_ref(ref)

        def send(message: Message) -> SlackResponse:
            return self.web.chat_postMessage(
                channel=channel,
                thread_ts=ts,
                text=message.text,
                blocks=message.blocks,
                unfurl_links=False,
                unfurl_media=False,
                metadata=reply_metadata(attempt) if attempt is not None else None,
            )

        self._once(channel, ts, attempt, filename, "chat.postMessage", send, text_message(text))

    def _once(
        self,
        channel: str,
        ts: str,
        attempt: Attempt | None,
        filename: str,
        method: str,
        send: Callable[[Message], SlackResponse],
        message: Message,
    ) -> None:
        """Send a thread message unless the thread already has it."""
        if attempt is None:
            self._send(channel, method, send, message, None)
            return
        self._not_blocked(channel, method)
        if attempt.uncertain:
            found = self.replies.find(channel, ts, attempt, filename)
            if found:
                log.info(
                    "Slack already has message %d of incident %s in its thread (%s); "
                    "not posting it again",
                    attempt.message_id,
                    attempt.incident_id,
                    found,
                )
                return
        try:
            self._send(channel, method, send, message, None)
        except ChatUnavailableError as error:
            if error.retry_after is None and self.replies.find(channel, ts, attempt, filename):
                log.info(
                    "Slack took message %d of incident %s although it did not say so",
                    attempt.message_id,
                    attempt.incident_id,
                )
                return
            raise

    def _send(
        self,
        channel: str,
        method: str,
        send: Callable[[Message], SlackResponse],
        message: Message,
        report: Report | None,
    ) -> SlackResponse:
        self._not_blocked(channel, method)
        self.pacer.wait(channel)
        try:
            return send(message)
        except SlackApiError as error:
            code = _error_code(error.response)
            if code in BLOCK_ERRORS and report is not None:
                log.warning("Slack refused a card (%s); sending a minimal one", code)
                return self._send(
                    channel, method, send, minimal_card(report, self.options.cluster), None
                )
            raise self._translate(channel, method, error) from None
        except (SlackClientError, OSError) as error:
            raise ChatUnavailableError(f"{method}: {error}") from None

    def _not_blocked(self, channel: str, method: str) -> None:
        waiting = self.pacer.blocked_for(channel)
        if waiting > 0:
            raise ChatUnavailableError(
                f"{method}: Slack asked to wait {waiting:.1f}s", retry_after=waiting
            )

    def _translate(self, channel: str, method: str, error: SlackApiError) -> Exception:
        status = error.response.status_code
        code = _error_code(error.response)
        if status == 429 or code in ("ratelimited", "rate_limited"):
            wait = _retry_after(error.response.headers)
            self.pacer.block(channel, wait)
            log.warning("Slack rate-limited %s on %s; retry after %gs", method, channel, wait)
            return ChatUnavailableError(f"{method}: rate limited", retry_after=wait)
        if status >= 500 or code in TRANSIENT:
            return ChatUnavailableError(f"{method}: {code or f'HTTP {status}'}")
        if code == "not_in_channel":
            return SlackHeldError(method, channel)
        return SlackRejectedError(method, code or f"HTTP {status}")
