"""The Bolt app: `/pitcrew` and the card's buttons, over Socket Mode or HTTP.

Why this exists: Slack gives a listener three seconds to acknowledge, and a
click must go through the approval state machine exactly once, from the right
workspace, by a configured approver. So every listener here only acks and
hands the payload to a small worker pool; the worker resolves who clicked
(user groups through `usergroups.users.list`, cached), refuses clicks from
another workspace itself, and asks the service, which decides (policy, expiry,
re-validation, compare-and-swap) and says why. Whoever clicked gets an
ephemeral answer; the card itself is updated by the pipeline through the
outbox, like every other card change.

The service is reached through the daemon's port `ChatService` (what
`bot.daemon.service.Service` offers), and its answers are the port's own values
(`Answer` and its `Outcome`, `Status`, ...), so this module knows no daemon internals.

Transports: Socket Mode (the default) uses Bolt's builtin-client handler with
an app-level token; HTTP mode serves `/slack/events` on the daemon's HTTP
server, where `bot.adapters.slack.events` admits only signed, fresh, first-seen,
well-formed requests to Bolt.
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from slack_bolt import Ack, App, BoltRequest, Respond
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.signature import SignatureVerifier

from bot.adapters.slack import blocks
from bot.adapters.slack.bundles import BundleWriter, upload_bundle
from bot.adapters.slack.commands import (
    COMMAND,
    USAGE,
    BundleCommand,
    Command,
    Diagnose,
    DiagnoseTarget,
    Help,
    HistoryCommand,
    Incidents,
    SilenceCommand,
    StatusCommand,
    UnmatchedCommand,
    Unsilence,
    Usage,
    explain_bundles,
    explain_history,
    explain_incidents,
    explain_silence,
    explain_status,
    explain_unmatched,
    explain_unsilence,
    parse_addressed,
)
from bot.adapters.slack.events import Gate, Refusal, ReplayGuard, Replays
from bot.core.actions.policy import ApprovalPolicy, ChatUser
from bot.core.errors import StoreError
from bot.daemon.metrics import Metrics
from bot.daemon.ports import Answer, ChatService, Clock, Outcome, utcnow

log = logging.getLogger("pitcrew.slack")

NOT_RECORDED = ":warning: Not recorded, try again: pitcrew cannot write its state right now."

EVENTS_PATH = "/slack/events"
_PROPOSAL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")


Stray = Callable[[str], None]
"""Told the cluster a click named that is not this pitcrew's (two pitcrews on one app)."""

Diagnoser = Callable[[DiagnoseTarget, str], str]
"""`/pitcrew diagnose`: fetch the target's evidence, feed the pipeline, and say what was
found in plain text (escaped before it is shown); called with the target and the user id."""


@dataclass(frozen=True)
class SlackConfig:
    """Everything the Slack chat needs; tokens never appear in `repr`."""

    bot_token: str = field(repr=False)
    app_token: str = field(default="", repr=False)
    signing_secret: str = field(default="", repr=False)
    socket_mode: bool = True
    api_url: str = "https://slack.com/api/"
    policy: ApprovalPolicy = field(default_factory=ApprovalPolicy)
    silence_for: timedelta = timedelta(hours=4)
    channel_interval: float = 1.0  # seconds between messages to one channel
    group_ttl: float = 300.0  # seconds a user group's members are cached
    events_path: str = EVENTS_PATH
    ping_interval: float = 10.0
    stale_after: float = 60.0  # no pong for this long: the socket is dead
    workers: int = 4
    ack_workers: int = 8
    command: str = COMMAND
    timeout: int = 10  # seconds per Web API call
    cluster: str = ""  # whose cards these are: on each card, button and answer


# -- who clicked ------------------------------------------------------------------------


class GroupDirectory:
    """Members of Slack user groups (`usergroups.users.list`, Tier 2), cached for `ttl`
    seconds. When Slack cannot answer, the last known members are used; with none
    known the group counts as empty (nobody gets in through it)."""

    def __init__(
        self, client: WebClient, ttl: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._client = client
        self._ttl = ttl
        self._clock = clock
        self._cache: dict[str, tuple[float, frozenset[str]]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def members(self, group: str) -> frozenset[str]:
        with self._lock:
            lock = self._locks.setdefault(group, threading.Lock())
        with lock:  # one lookup per group at a time: racing clicks share its answer
            now = self._clock()
            cached = self._cache.get(group)
            if cached is not None and now - cached[0] < self._ttl:
                return cached[1]
            try:
                response = self._client.usergroups_users_list(usergroup=group)
                users = frozenset(str(u) for u in response.get("users") or ())
            except (SlackApiError, SlackClientError, OSError) as error:
                log.warning("cannot list the members of user group %s: %s", group, error)
                users = cached[1] if cached is not None else frozenset()
                # Remember the failure for a little while too, so clicks do not hammer Slack.
                now = now - self._ttl + min(self._ttl, 30.0)
            self._cache[group] = (now, users)
            return users

    def groups_of(self, user: str, groups: Iterable[str]) -> frozenset[str]:
        return frozenset(g for g in groups if user in self.members(g))


def _ephemeral(safe: str, cluster: str = "") -> dict[str, Any]:
    """An ephemeral answer from safe mrkdwn (see `bot.adapters.slack.commands`), naming the
    cluster whose pitcrew answers."""
    message = blocks.mrkdwn_message(blocks.md(blocks.cluster_prefix(cluster), 120) + safe)
    return {"response_type": "ephemeral", "text": message.text, "blocks": message.blocks}


def elsewhere(cluster: str) -> str:
    """The answer to a click or command for another cluster's pitcrew (safe mrkdwn)."""
    return f"Nothing changed: this is cluster {blocks.md(cluster, 100)}'s; its pitcrew answers it."


def _answer_text(answer: Answer) -> str:
    said = blocks.md(answer.text, 1500)
    if answer.outcome is Outcome.APPROVED:
        return f":white_check_mark: {said}. Follow the card for progress."
    if answer.outcome is Outcome.NEEDS_SECOND_APPROVER:
        return f":hourglass_flowing_sand: {said}."
    if answer.outcome is Outcome.REJECTED:
        return f":no_entry_sign: {said}."
    return f"Nothing changed: {said}."


class SlackApp:
    """The Bolt `App` with pitcrew's listeners, and its transport."""

    def __init__(
        self,
        config: SlackConfig,
        client: WebClient,
        *,
        metrics: Metrics,
        clock: Clock = utcnow,
        groups_client: WebClient | None = None,
    ) -> None:
        """`client` serves Bolt and the answers to people; `groups_client` (default:
        `client`) lists user groups, best without 429 retries, which would sleep."""
        self.config = config
        self.client = client
        self.metrics = metrics
        self.clock = clock
        self.service: ChatService | None = None
        self.diagnoser: Diagnoser | None = None
        self.bundle_writer: BundleWriter | None = None
        self.stray: Stray | None = None
        self.groups = GroupDirectory(groups_client or client, config.group_ttl)
        self.replays: Replays = ReplayGuard()
        self.verifier = SignatureVerifier(config.signing_secret) if config.signing_secret else None
        self.gate = Gate(self.verifier, self.replays) if self.verifier is not None else None
        bolt_log = logging.getLogger("pitcrew.slack.bolt")
        bolt_log.setLevel(logging.WARNING)  # Bolt logs whole request bodies at INFO
        self._work = ThreadPoolExecutor(config.workers, thread_name_prefix="pitcrew-slack-work")
        self._acks = ThreadPoolExecutor(config.ack_workers, thread_name_prefix="pitcrew-slack-ack")
        self.app = App(
            client=client,
            signing_secret=config.signing_secret or None,
            name="pitcrew",
            logger=bolt_log,
            process_before_response=False,
            token_verification_enabled=False,  # auth.test happens in SlackChat.start
            request_verification_enabled=not config.socket_mode,
            listener_executor=self._acks,
        )
        self.app.command(config.command)(self._on_command)
        self.app.action(blocks.APPROVE_ACTION)(self._on_approve)
        self.app.action(blocks.REJECT_ACTION)(self._on_reject)
        self.app.action(blocks.SILENCE_ACTION)(self._on_silence)
        self.handler: SocketModeHandler | None = None
        self._closed = False

    def bind(
        self,
        service: ChatService,
        diagnoser: Diagnoser | None = None,
        replays: Replays | None = None,
        bundle_writer: BundleWriter | None = None,
        stray: Stray | None = None,
    ) -> None:
        self.service = service
        self.diagnoser = diagnoser
        self.bundle_writer = bundle_writer
        self.stray = stray
        if replays is not None and self.gate is not None:
            self.replays = self.gate.replays = replays

    # -- transports ------------------------------------------------------------------------

    def connect_socket(self, web_client: WebClient) -> SocketModeHandler:
        """Open the Socket Mode connection (does not block); reconnects are the SDK's."""
        self.handler = SocketModeHandler(
            self.app,
            app_token=self.config.app_token,
            web_client=web_client,
            ping_interval=self.config.ping_interval,
            concurrency=self.config.ack_workers,
            logger=logging.getLogger("pitcrew.slack.socket"),
        )
        self.handler.connect()  # type: ignore[no-untyped-call]
        return self.handler

    def socket_alive(self) -> bool:
        """Connected, and a pong came back recently (a zombie connection counts as dead)."""
        if self.handler is None or self._closed:
            return False
        client = self.handler.client
        session = client.current_session
        if session is None or not client.is_connected():
            return False
        last = session.last_ping_pong_time
        return last is None or time.time() - last <= self.config.stale_after

    def events_route(
        self, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """`POST /slack/events` for the daemon's HTTP server (HTTP mode): a request the
        gate admits (signed, fresh, first seen, well formed) goes to Bolt."""
        if self.gate is None:
            return Refusal(503, "this pitcrew has no Slack signing secret").reply()
        admitted = self.gate.admit(headers, body)
        if isinstance(admitted, Refusal):
            return admitted.reply()
        response = self.app.dispatch(
            BoltRequest(body=admitted.text, headers=dict(admitted.headers))
        )
        out = response.first_headers_without_set_cookie()
        return response.status, out, response.body.encode("utf-8")

    def close(self) -> None:
        self._closed = True
        if self.handler is not None:
            client = self.handler.client
            client.auto_reconnect_enabled = False
            session = client.current_session
            if session is not None and session.sock is not None:
                # Wake the thread blocked in recv (it holds the lock close() needs for up
                # to the 3 s receive timeout), so shutdown is prompt.
                with contextlib.suppress(OSError):
                    session.sock.shutdown(socket.SHUT_RDWR)
            try:
                self.handler.close()  # type: ignore[no-untyped-call]
            except Exception as error:  # closing must never stop a shutdown
                log.warning("closing the Socket Mode connection: %s", error)
        self._work.shutdown(wait=True, cancel_futures=True)
        self._acks.shutdown(wait=False, cancel_futures=True)

    # -- listeners: ack, hand off ---------------------------------------------------------

    def _on_command(self, ack: Ack, body: dict[str, Any], respond: Respond) -> None:
        cluster, command = parse_addressed(str(body.get("text") or ""))
        ours = self.config.cluster
        if isinstance(command, Usage | Help):
            ack(**_ephemeral(USAGE if isinstance(command, Help) else command.text, ours))
            return
        team = str(body.get("team_id") or "")
        if not self._workspace_ok(team, str(body.get("user_team") or team)):
            log.warning("refused %s from workspace %s", self.config.command, team)
            said = f"Commands from workspace `{blocks.md(team, 32)}` are not accepted."
            ack(**_ephemeral(said, ours))
            return
        if cluster and cluster != ours:
            log.info("%s for cluster %s answered by its own pitcrew", self.config.command, cluster)
            ack(**_ephemeral(elsewhere(cluster), ours))
            return
        if isinstance(command, Diagnose):
            target = blocks.md(str(command.target), 300)
            ack(**_ephemeral(f":mag: Diagnosing `{target}`…", ours))
        else:
            ack()
        user, user_team = str(body.get("user_id") or ""), str(body.get("user_team") or team)
        channel = str(body.get("channel_id") or "")
        self._submit(self._run_command, command, user, respond, user_team, channel)

    def _on_approve(self, ack: Ack, body: dict[str, Any], respond: Respond) -> None:
        ack()
        self._submit(self._click, "approve", body, respond)

    def _on_reject(self, ack: Ack, body: dict[str, Any], respond: Respond) -> None:
        ack()
        self._submit(self._click, "reject", body, respond)

    def _on_silence(self, ack: Ack, body: dict[str, Any], respond: Respond) -> None:
        ack()
        self._submit(self._click, "silence", body, respond)

    def _submit(self, work: Callable[..., None], *args: Any) -> None:
        def run() -> None:
            try:
                work(*args)
            except Exception:
                log.exception("Slack work failed")

        try:
            self._work.submit(run)
        except RuntimeError:  # shutting down
            log.warning("dropped Slack work during shutdown")

    # -- the work -------------------------------------------------------------------------

    def _run_command(
        self, command: Command, user: str, respond: Respond, team: str = "", channel: str = ""
    ) -> None:
        try:
            text = self._command_answer(command, user, team, channel)
        except ValueError as error:
            text = f"Nothing changed: {blocks.md(str(error), 500)}."
        except Exception:
            log.exception("%s %s failed", self.config.command, type(command).__name__)
            text = "Something went wrong; nothing was changed. The details are in pitcrew's log."
        try:
            respond(**_ephemeral(text, self.config.cluster))
        except Exception as error:
            log.warning("could not answer %s: %s", self.config.command, error)

    def _command_answer(
        self, command: Command, user: str, team: str = "", channel: str = ""
    ) -> str:
        service = self.service
        if service is None:
            return "pitcrew is starting; try again in a moment."
        now = self.clock()
        if isinstance(command, StatusCommand):
            return explain_status(service.status(now))
        if isinstance(command, Incidents):
            return explain_incidents(service.incidents(command.namespace), command.namespace)
        if isinstance(command, HistoryCommand):
            return explain_history(service.history(command.n))
        if isinstance(command, UnmatchedCommand):
            return explain_unmatched(service.unmatched(command.n))
        if isinstance(command, BundleCommand):
            who, via = self._chat_user(user, team), f"slack {channel or '(no channel)'}"
            refusal = service.may_fetch(command.incident_id, who, now, via)
            if refusal:
                return f"Nothing uploaded: {blocks.md(refusal, 1000)}."
            kept = service.bundles(command.incident_id)
            written = self.bundle_writer(command.incident_id) if self.bundle_writer else None
            if written is None:
                return explain_bundles(command.incident_id, kept)
            return upload_bundle(self.client, command.incident_id, written, channel, user, kept)
        if isinstance(command, SilenceCommand):
            reason = command.reason or f"silenced by {user} from Slack"
            who = self._chat_user(user, team)
            made = service.silence(command.matchers, command.duration, user, now, reason, who)
            return explain_silence(made.id, made.matchers, made.ends_at, command.reason)
        if isinstance(command, Unsilence):
            ended = service.unsilence(command.silence_id, now, self._chat_user(user, team))
            return explain_unsilence(command.silence_id, ended is not None)
        if isinstance(command, Diagnose):
            if self.diagnoser is None:
                return "`diagnose` is not available: no source here can fetch that evidence."
            found = self.diagnoser(command.target, user)
            return f"*{blocks.md(str(command.target), 300)}*\n{blocks.md(found, 8000)}"
        return USAGE

    def _click(self, kind: str, body: dict[str, Any], respond: Respond) -> None:
        user_info = body.get("user") or {}
        user_id = str(user_info.get("id") or "")
        team = str((body.get("team") or {}).get("id") or "")
        user_team = str(user_info.get("team_id") or team)
        actions = body.get("actions") or [{}]
        value, cluster = blocks.address_of(str(actions[0].get("value") or ""))
        if not self._workspace_ok(team, user_team):
            self._refuse(
                body,
                respond,
                "workspace",
                f"clicks from workspace {user_team or team} are not accepted",
            )
            return
        if cluster and cluster != self.config.cluster:
            self._stray(body, respond, cluster)
            return
        service = self.service
        if service is None:
            self._tell(body, respond, "pitcrew is starting; nothing changed. Try again shortly.")
            return
        if kind == "silence":
            self._silence_click(service, body, respond, value, user_id)
            return
        if not _PROPOSAL_ID.fullmatch(value):
            self._refuse(body, respond, "malformed", "this button was not made by pitcrew")
            return
        groups = {g for rule in self.config.policy.approvers for g in rule.groups}
        user = ChatUser(user_id, self.groups.groups_of(user_id, groups), user_team or team)
        now = self.clock()
        try:
            if kind == "approve":
                answer = service.approve(value, user, now)
            else:
                answer = service.reject(value, user, now, f"rejected by {user_id} in Slack")
        except StoreError as error:
            log.error("%s of %s by %s not recorded: %s", kind, value, user_id, error)
            self._tell(body, respond, NOT_RECORDED)
            return
        level = logging.INFO if answer.ok else logging.WARNING
        log.log(level, "%s of %s by %s: %s (%s)", kind, value, user_id, answer.outcome, answer.text)
        self._tell(body, respond, _answer_text(answer))

    def _silence_click(
        self, service: ChatService, body: dict[str, Any], respond: Respond, value: str, user: str
    ) -> None:
        if not blocks.SILENCE_VALUE.fullmatch(value):
            self._refuse(body, respond, "malformed", "this button was not made by pitcrew")
            return
        key, target = value.split(":", 1)
        duration = self.config.silence_for
        team = str(
            (body.get("user") or {}).get("team_id") or (body.get("team") or {}).get("id") or ""
        )
        who = self._chat_user(user, team)
        try:
            made = service.silence(
                {key: target}, duration, user, self.clock(), "Silence button", who
            )
        except ValueError as error:
            self._tell(body, respond, f"Nothing changed: {blocks.md(str(error), 500)}.")
            return
        log.info("silence %s of %s by %s for %s", made.id, target, user, duration)
        self._tell(body, respond, explain_silence(made.id, made.matchers, made.ends_at, ""))

    def _chat_user(self, user: str, team: str) -> ChatUser:
        policy = self.config.policy
        rules = (*policy.approvers, *policy.silencers, *policy.evidence)
        groups = {g for rule in rules for g in rule.groups}
        return ChatUser(user, self.groups.groups_of(user, groups), team)

    def _workspace_ok(self, team: str, user_team: str) -> bool:
        teams = self.config.policy.teams
        return not teams or (team in teams and user_team in teams)

    def _stray(self, body: dict[str, Any], respond: Respond, cluster: str) -> None:
        """A click on another cluster's card reached this pitcrew: two pitcrews share one
        Slack app. Nothing changes; it is counted, kept for `/readyz` and `pitcrew
        status`, and the person who clicked is told whose it is."""
        user = (body.get("user") or {}).get("id", "")
        log.warning(
            "a click by %s for cluster %s reached this pitcrew (cluster %s): two pitcrews "
            "share one Slack app",
            user,
            cluster,
            self.config.cluster or "unnamed",
        )
        self.metrics.refused_clicks.labels(reason="other_cluster").inc()
        if self.stray is not None:
            try:
                self.stray(cluster)
            except StoreError as error:
                log.warning("could not keep the record of that click: %s", error)
        self._tell(body, respond, elsewhere(cluster))

    def _refuse(self, body: dict[str, Any], respond: Respond, reason: str, why: str) -> None:
        """A click refused here, before the service: logged, counted, explained."""
        user = (body.get("user") or {}).get("id", "")
        log.warning("refused a click by %s: %s", user, why)
        self.metrics.refused_clicks.labels(reason=reason).inc()
        self._tell(body, respond, f"Nothing changed: {blocks.md(why, 300)}.")

    def _tell(self, body: dict[str, Any], respond: Respond, text: str) -> None:
        """An ephemeral message (safe mrkdwn) to whoever clicked: chat.postEphemeral,
        else the response_url."""
        user = str((body.get("user") or {}).get("id") or "")
        channel = str(
            (body.get("channel") or {}).get("id")
            or (body.get("container") or {}).get("channel_id")
            or ""
        )
        message = blocks.mrkdwn_message(
            blocks.md(blocks.cluster_prefix(self.config.cluster), 120) + text
        )
        if channel and user:
            try:
                self.client.chat_postEphemeral(
                    channel=channel, user=user, text=message.text, blocks=message.blocks
                )
                return
            except (SlackApiError, SlackClientError, OSError) as error:
                log.warning("chat.postEphemeral to %s failed: %s", user, error)
        try:
            respond(**_ephemeral(text, self.config.cluster), replace_original=False)
        except Exception as error:
            log.warning("could not tell %s: %s", user, error)
