"""A local Slack Web API for tests: a real HTTP server on loopback that the real
`slack_sdk.WebClient` (and Bolt) talk to through `base_url`.

It answers `auth.test` and `apps.connections.open` (pointing at the test's Socket
Mode server), records `chat.postMessage`, `chat.update`, `chat.postEphemeral`,
`chat.delete`, `views.*`, `usergroups.users.list`, `reactions.add` and the three steps of
`files.uploadV2` (`files.getUploadURLExternal`, the POST of the bytes to the upload URL,
`files.completeUploadExternal`, which posts the files' message in the thread) with
their payloads, lists a channel's history and a thread's replies
(`conversations.history`, `conversations.replies`, with metadata when asked), keeps
the messages it was sent (so a test reads a card as Slack would show it), checks
the token on every call, and checks every message against Block Kit's limits on
its own (independently of `bot.adapters.slack.blocks`), answering `invalid_blocks` like Slack.
A test can script failures per method: 429 with Retry-After, 500, or a Slack error;
a call carried out but answered late (`slow`), or not until the test says (`hold`).
`response_url`s point at `/response/<id>` on the same server, which records them.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BOT_TOKEN = "xoxb-emulated-bot-token"
APP_TOKEN = "xapp-emulated-app-token"
TEAM_ID = "T0PITCREW"
BOT_USER = "U0PITBOT"

# Slack's limits, written out again here on purpose: the emulator checks the bot's
# payloads against its own reading of the documentation, not the bot's constants.
LIMITS = {
    "blocks": 50,
    "header": 150,
    "section": 3000,
    "field": 2000,
    "fields": 10,
    "context_elements": 10,
    "actions_elements": 25,
    "button_text": 75,
    "button_value": 2000,
    "action_id": 255,
    "block_id": 255,
    "confirm_title": 100,
    "confirm_text": 300,
    "confirm_button": 30,
    "text": 40000,
    "blocks_text": 13200,  # msg_blocks_too_long was observed at about this size
}


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    token: str
    at: float = field(default_factory=time.monotonic)


@dataclass
class Uploaded:
    """A file shared with `files.uploadV2`: asked for, its bytes posted, then completed."""

    id: str
    filename: str
    length: int
    data: bytes = b""
    title: str = ""
    channel: str = ""
    thread_ts: str | None = None
    comment: str = ""
    shared: bool = False


@dataclass
class Posted:
    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None = None
    updates: int = 0
    metadata: dict[str, Any] | None = None
    files: list[dict[str, Any]] = field(default_factory=list)  # shared with the message


@dataclass
class Failure:
    status: int = 429
    error: str = "ratelimited"
    retry_after: int | None = 1


def _text_len(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(_text_len(v) for k, v in value.items() if k not in ("type", "block_id"))
    if isinstance(value, list):
        return sum(_text_len(v) for v in value)
    return 0


def _check_text(obj: Any, where: str, limit: int, errors: list[str], plain: bool = False) -> None:
    if not isinstance(obj, dict) or "text" not in obj:
        errors.append(f"{where}: missing text object")
        return
    kind = obj.get("type")
    if kind not in ("plain_text", "mrkdwn") or (plain and kind != "plain_text"):
        errors.append(f"{where}: bad text type {kind!r}")
    text = obj["text"]
    if not isinstance(text, str) or not text:
        errors.append(f"{where}: text must be a non-empty string")
    elif len(text) > limit:
        errors.append(f"{where}: text {len(text)} > {limit}")


def block_kit_errors(blocks: Any) -> list[str]:
    """Why Slack would refuse these blocks (empty: it would take them)."""
    errors: list[str] = []
    if not isinstance(blocks, list):
        return ["blocks must be an array"]
    if len(blocks) > LIMITS["blocks"]:
        errors.append(f"{len(blocks)} blocks > {LIMITS['blocks']}")
    block_ids: set[str] = set()
    primaries = 0
    for i, block in enumerate(blocks):
        where = f"blocks[{i}]"
        block_id = block.get("block_id")
        if block_id is not None:
            if len(block_id) > LIMITS["block_id"]:
                errors.append(f"{where}: block_id too long")
            if block_id in block_ids:
                errors.append(f"{where}: duplicate block_id {block_id}")
            block_ids.add(block_id)
        kind = block.get("type")
        if kind == "header":
            _check_text(block.get("text"), where, LIMITS["header"], errors, plain=True)
        elif kind == "section":
            if "text" not in block and "fields" not in block:
                errors.append(f"{where}: section needs text or fields")
            if "text" in block:
                _check_text(block["text"], where, LIMITS["section"], errors)
            fields = block.get("fields", [])
            if len(fields) > LIMITS["fields"]:
                errors.append(f"{where}: {len(fields)} fields")
            for j, item in enumerate(fields):
                _check_text(item, f"{where}.fields[{j}]", LIMITS["field"], errors)
        elif kind == "context":
            elements = block.get("elements", [])
            if not elements or len(elements) > LIMITS["context_elements"]:
                errors.append(f"{where}: {len(elements)} context elements")
            for j, item in enumerate(elements):
                _check_text(item, f"{where}.elements[{j}]", LIMITS["section"], errors)
        elif kind == "actions":
            elements = block.get("elements", [])
            if not elements or len(elements) > LIMITS["actions_elements"]:
                errors.append(f"{where}: {len(elements)} action elements")
            action_ids = [e.get("action_id") for e in elements]
            if len(set(action_ids)) != len(action_ids):
                errors.append(f"{where}: duplicate action_id")
            for j, button in enumerate(elements):
                at = f"{where}.elements[{j}]"
                if button.get("type") != "button":
                    errors.append(f"{at}: not a button")
                    continue
                _check_text(button.get("text"), at, LIMITS["button_text"], errors, plain=True)
                if len(str(button.get("value", ""))) > LIMITS["button_value"]:
                    errors.append(f"{at}: value too long")
                if len(str(button.get("action_id", ""))) > LIMITS["action_id"]:
                    errors.append(f"{at}: action_id too long")
                style = button.get("style")
                if style not in (None, "primary", "danger"):
                    errors.append(f"{at}: bad style {style!r}")
                primaries += style == "primary"
                confirm = button.get("confirm")
                if confirm is not None:
                    _check_text(confirm.get("title"), at, LIMITS["confirm_title"], errors, True)
                    _check_text(confirm.get("text"), at, LIMITS["confirm_text"], errors)
                    for key in ("confirm", "deny"):
                        _check_text(confirm.get(key), at, LIMITS["confirm_button"], errors, True)
        elif kind != "divider":
            errors.append(f"{where}: unexpected block type {kind!r}")
    if primaries > 1:
        errors.append(f"{primaries} primary buttons")
    if _text_len(blocks) > LIMITS["blocks_text"]:
        errors.append("msg_blocks_too_long")
    return errors


class SlackEmulator:
    """Start with `start()`, stop with `stop()`; `api_url` is the WebClient base_url."""

    def __init__(
        self,
        *,
        bot_token: str = BOT_TOKEN,
        app_token: str = APP_TOKEN,
        team_id: str = TEAM_ID,
    ) -> None:
        self.bot_token = bot_token
        self.app_token = app_token
        self.team_id = team_id
        self.calls: list[Call] = []
        self.messages: dict[tuple[str, str], Posted] = {}
        self.responses: list[tuple[str, dict[str, Any]]] = []
        self.usergroups: dict[str, list[str]] = {}
        self.channels: dict[str, str] = {"pitcrew": "C0PITCREW"}
        self.socket_url: str | None = None
        self.files: dict[str, Uploaded] = {}
        self._failures: dict[str, deque[Failure | None]] = {}
        self._slow: dict[str, deque[float]] = {}
        self._holds: dict[str, int] = {}
        self._hollow: dict[str, int] = {}
        self._released = threading.Event()
        self.held: list[Call] = []  # carried out, their answers withheld until release()
        self._lock = threading.Condition()
        self._ts = itertools.count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    def response_url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/response/{name}"

    def start(self) -> SlackEmulator:
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="slack-emulator",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # -- scripting -----------------------------------------------------------------------

    def fail(
        self,
        method: str,
        times: int = 1,
        *,
        status: int = 429,
        error: str = "ratelimited",
        retry_after: int | None = 1,
        after: int = 0,
    ) -> None:
        """The next `times` calls of `method` fail (429 with Retry-After by default);
        with `after`, the `after` calls before them are answered as usual."""
        with self._lock:
            queue = self._failures.setdefault(method, deque())
            queue.extend([None] * after)
            queue.extend(Failure(status, error, retry_after) for _ in range(times))

    def recover(self, method: str) -> None:
        """Failures still scripted for `method` are dropped: it answers as usual again."""
        with self._lock:
            self._failures.pop(method, None)

    def slow(self, method: str, seconds: float, times: int = 1) -> None:
        """The next `times` calls of `method` are carried out, then answered only after
        `seconds` (a client with a shorter timeout never hears that they worked)."""
        with self._lock:
            self._slow.setdefault(method, deque()).extend([seconds] * times)

    def hollow(self, method: str, times: int = 1) -> None:
        """The next `times` calls of `method` are carried out and answered `{"ok": true}`
        alone: no channel, no ts (an answer a proxy or a broken gateway may give)."""
        with self._lock:
            self._hollow[method] = self._hollow.get(method, 0) + times

    def hold(self, method: str, times: int = 1) -> None:
        """The next `times` calls of `method` are carried out, then not answered until
        `release()` (or `stop()`): a client killed meanwhile never hears they worked."""
        with self._lock:
            self._holds[method] = self._holds.get(method, 0) + times
            self._released.clear()

    def release(self) -> None:
        """Send the answers `hold` withheld (to whoever is still there to read them)."""
        self._released.set()

    # -- reading what happened -----------------------------------------------------------

    def calls_to(self, method: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method]

    def wait_for(
        self, predicate: Callable[[], Any], timeout: float = 5.0, what: str = "condition"
    ) -> Any:
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                value = predicate()
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out waiting for {what}")
                self._lock.wait(min(left, 0.05))

    def wait_calls(self, method: str, n: int = 1, timeout: float = 5.0) -> list[Call]:
        return list(
            self.wait_for(
                lambda: (calls := [c for c in self.calls if c.method == method])[n - 1 :] and calls,
                timeout,
                f"{n} call(s) to {method}",
            )
        )

    def parents(self) -> list[Posted]:
        """Messages posted at top level (cards), in posting order."""
        with self._lock:
            return [m for m in self.messages.values() if m.thread_ts is None]

    def replies(self, channel: str, ts: str) -> list[Posted]:
        with self._lock:
            return [m for m in self.messages.values() if (m.channel, m.thread_ts) == (channel, ts)]

    # -- the API -------------------------------------------------------------------------

    def _channel_id(self, name: str) -> str | None:
        name = name.removeprefix("#")
        if name[:1] in ("C", "G", "D") and name.upper() == name:
            return name
        return self.channels.get(name)

    def _answer(self, method: str, params: dict[str, Any], token: str) -> dict[str, Any]:
        if method == "apps.connections.open":
            if token != self.app_token:
                return {"ok": False, "error": "invalid_auth"}
            if self.socket_url is None:
                return {"ok": False, "error": "socket_mode_not_enabled"}
            return {"ok": True, "url": self.socket_url}
        if token != self.bot_token:
            return {"ok": False, "error": "invalid_auth"}
        if method == "auth.test":
            return {
                "ok": True,
                "url": "https://pitcrew-test.slack.com/",
                "team": "pitcrew-test",
                "user": "pitcrew",
                "team_id": self.team_id,
                "user_id": BOT_USER,
                "bot_id": "B0PITBOT",
                "is_enterprise_install": False,
            }
        if method in ("chat.postMessage", "chat.update", "chat.postEphemeral"):
            return self._message(method, params)
        if method == "files.getUploadURLExternal":
            return self._upload_url(params)
        if method == "files.completeUploadExternal":
            return self._complete_upload(params)
        if method == "chat.delete":
            return self._delete(params)
        if method == "conversations.history":
            return self._history(params)
        if method == "conversations.replies":
            return self._replies(params)
        if method == "conversations.list":
            channels = [{"id": i, "name": n} for n, i in self.channels.items()]
            return {"ok": True, "channels": channels, "response_metadata": {"next_cursor": ""}}
        if method == "usergroups.users.list":
            members = self.usergroups.get(str(params.get("usergroup", "")))
            if members is None:
                return {"ok": False, "error": "no_such_subteam"}
            return {"ok": True, "users": list(members)}
        if method.startswith("views."):
            view = params.get("view")
            if isinstance(view, str):
                view = json.loads(view)
            blocks = (view or {}).get("blocks", [])
            if len(blocks) > 100:
                return {"ok": False, "error": "invalid_arguments"}
            return {"ok": True, "view": {"id": "V0VIEW", **(view or {})}}
        if method == "reactions.add":
            return {"ok": True}
        return {"ok": False, "error": "unknown_method"}

    def _upload_url(self, params: dict[str, Any]) -> dict[str, Any]:
        filename = str(params.get("filename") or "")
        length = str(params.get("length") or "")
        if not filename or not length.isdigit() or int(length) <= 0:
            return {"ok": False, "error": "invalid_arguments"}
        file_id = f"F0{len(self.files) + 1:08d}"
        self.files[file_id] = Uploaded(file_id, filename, int(length))
        url = f"http://127.0.0.1:{self.port}/upload/{file_id}"
        return {"ok": True, "upload_url": url, "file_id": file_id}

    def _complete_upload(self, params: dict[str, Any]) -> dict[str, Any]:
        files = params.get("files")
        if isinstance(files, str):
            files = json.loads(files)
        channel = self._channel_id(str(params.get("channel_id") or ""))
        thread_ts = params.get("thread_ts")
        if channel is None:
            return {"ok": False, "error": "channel_not_found"}
        if thread_ts is not None and (channel, str(thread_ts)) not in self.messages:
            return {"ok": False, "error": "thread_not_found"}
        done = []
        for item in files or []:
            uploaded = self.files.get(str(item.get("id")))
            if uploaded is None or len(uploaded.data) != uploaded.length:
                return {"ok": False, "error": "file_not_found"}
            uploaded.title = str(item.get("title") or uploaded.filename)
            uploaded.channel, uploaded.thread_ts = channel, str(thread_ts) if thread_ts else None
            uploaded.comment = str(params.get("initial_comment") or "")
            uploaded.shared = True
            done.append({"id": uploaded.id, "title": uploaded.title, "name": uploaded.filename})
        if not done:
            return {"ok": False, "error": "invalid_arguments"}
        self._share(channel, uploaded.thread_ts, uploaded.comment, done)
        return {"ok": True, "files": done}

    def _share(
        self, channel: str, thread_ts: str | None, comment: str, files: list[dict[str, Any]]
    ) -> None:
        """The message Slack posts for shared files: the initial comment as its text."""
        ts = f"{int(time.time())}.{next(self._ts):06d}"
        shown = [{**f, "mimetype": "image/png", "filetype": "png"} for f in files]
        self.messages[(channel, ts)] = Posted(channel, ts, comment, [], thread_ts, files=shown)

    def _delete(self, params: dict[str, Any]) -> dict[str, Any]:
        """A message the bot posted, gone (with its thread, as Slack shows it)."""
        key = (str(params.get("channel", "")), str(params.get("ts", "")))
        if self.messages.pop(key, None) is None:
            return {"ok": False, "error": "message_not_found"}
        return {"ok": True, "channel": key[0], "ts": key[1]}

    def _history(self, params: dict[str, Any]) -> dict[str, Any]:
        """Top-level messages of a channel (by id), newest first, since `oldest`; their
        metadata only with `include_all_metadata`, as Slack does."""
        channel = str(params.get("channel", ""))
        if not channel.startswith(("C", "G", "D")):
            return {"ok": False, "error": "channel_not_found"}
        oldest = float(params.get("oldest") or 0)
        with_metadata = str(params.get("include_all_metadata", "")).lower() in ("1", "true")
        found = []
        for posted in reversed(list(self.messages.values())):
            if posted.channel != channel or posted.thread_ts or float(posted.ts) < oldest:
                continue
            message: dict[str, Any] = {"type": "message", "ts": posted.ts, "text": posted.text}
            message["user"] = BOT_USER
            if with_metadata and posted.metadata:
                message["metadata"] = posted.metadata
            found.append(message)
        return {"ok": True, "messages": found, "has_more": False}

    def _replies(self, params: dict[str, Any]) -> dict[str, Any]:
        """A thread as Slack lists it (`ts` its parent or one of its replies): the parent
        first, then its replies oldest first (those after `oldest` and before `latest`),
        `limit` a page (default 1000) with an opaque `next_cursor`; metadata only with
        `include_all_metadata`."""
        channel, ts = str(params.get("channel", "")), str(params.get("ts", ""))
        if not channel.startswith(("C", "G", "D")):
            return {"ok": False, "error": "channel_not_found"}
        found = self.messages.get((channel, ts))
        if found is not None and found.thread_ts is not None:
            ts, found = found.thread_ts, self.messages.get((channel, found.thread_ts))
        if found is None:
            return {"ok": False, "error": "thread_not_found"}
        parent = found
        oldest = float(params.get("oldest") or 0)
        latest = float(params.get("latest") or time.time() + 1)
        with_metadata = str(params.get("include_all_metadata", "")).lower() in ("1", "true")
        replies = [m for m in self.messages.values() if (m.channel, m.thread_ts) == (channel, ts)]
        thread = [
            self._listed(parent, with_metadata, replies),
            *(self._listed(m, with_metadata) for m in replies if oldest < float(m.ts) < latest),
        ]
        start = int(str(params.get("cursor") or "0").removeprefix("next:") or 0)
        limit = int(params.get("limit") or 1000)
        page, more = thread[start : start + limit], start + limit < len(thread)
        cursor = f"next:{start + limit}" if more else ""
        return {
            "ok": True,
            "messages": page,
            "has_more": more,
            "response_metadata": {"next_cursor": cursor},
        }

    @staticmethod
    def _listed(
        posted: Posted, with_metadata: bool, replies: list[Posted] | None = None
    ) -> dict[str, Any]:
        message: dict[str, Any] = {
            "type": "message",
            "user": BOT_USER,
            "bot_id": "B0PITBOT",
            "text": posted.text,
            "ts": posted.ts,
        }
        if posted.thread_ts is not None:
            message["thread_ts"] = posted.thread_ts
            message["parent_user_id"] = BOT_USER
        elif replies:
            message.update(thread_ts=posted.ts, reply_count=len(replies))
            message["latest_reply"] = replies[-1].ts
        if posted.files:
            message.update(files=posted.files, upload=True)
        if with_metadata and posted.metadata:
            message["metadata"] = posted.metadata
        return message

    def shared_files(self) -> list[Uploaded]:
        with self._lock:
            return [f for f in self.files.values() if f.shared]

    def _message(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel_id(str(params.get("channel", "")))
        if channel is None:
            return {"ok": False, "error": "channel_not_found"}
        text = str(params.get("text") or "")
        blocks = params.get("blocks") or []
        if isinstance(blocks, str):
            blocks = json.loads(blocks)
        if not text and not blocks:
            return {"ok": False, "error": "no_text"}
        if len(text) > LIMITS["text"]:
            return {"ok": False, "error": "msg_too_long"}
        errors = block_kit_errors(blocks)
        if errors:
            error = "msg_blocks_too_long" if errors == ["msg_blocks_too_long"] else "invalid_blocks"
            return {"ok": False, "error": error, "errors": errors}
        if method == "chat.postEphemeral":
            if not params.get("user"):
                return {"ok": False, "error": "user_not_in_channel"}
            return {"ok": True, "message_ts": f"{time.time():.6f}"}
        if method == "chat.update":
            if not channel.startswith(("C", "G", "D")) or channel != params.get("channel"):
                return {"ok": False, "error": "channel_not_found"}
            posted = self.messages.get((channel, str(params.get("ts"))))
            if posted is None:
                return {"ok": False, "error": "message_not_found"}
            posted.text = text
            posted.blocks = blocks
            posted.updates += 1
            return {"ok": True, "channel": channel, "ts": posted.ts, "text": text}
        ts = f"{int(time.time())}.{next(self._ts):06d}"
        thread_ts = params.get("thread_ts")
        if thread_ts is not None and (channel, str(thread_ts)) not in self.messages:
            return {"ok": False, "error": "thread_not_found"}
        posted = Posted(channel, ts, text, blocks, str(thread_ts) if thread_ts else None)
        found = params.get("metadata")
        posted.metadata = json.loads(found) if isinstance(found, str) else found
        self.messages[(channel, ts)] = posted
        return {"ok": True, "channel": channel, "ts": ts, "message": {"text": text}}

    def _hold(self, method: str, call: Call) -> bool:
        """Whether this call's answer is withheld (`hold`); called with the lock held."""
        if self._holds.get(method, 0) <= 0:
            return False
        self._holds[method] -= 1
        self.held.append(call)
        return True

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        emulator = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                self._handle()

            def do_POST(self) -> None:
                self._handle()

            def _handle(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if url.path.startswith("/response/"):
                    with emulator._lock:
                        emulator.responses.append((url.path, json.loads(raw or b"{}")))
                        emulator._lock.notify_all()
                    self._reply(200, b"ok", "text/plain")
                    return
                if url.path.startswith("/upload/"):
                    with emulator._lock:
                        uploaded = emulator.files.get(url.path.removeprefix("/upload/"))
                        if uploaded is not None:
                            uploaded.data = raw
                        emulator._lock.notify_all()
                    status = 200 if uploaded is not None else 404
                    self._reply(status, b"OK - %d" % len(raw), "text/plain")
                    return
                if not url.path.startswith("/api/"):
                    self._reply(404, b"not found", "text/plain")
                    return
                method = url.path.removeprefix("/api/")
                params: dict[str, Any] = dict(urllib.parse.parse_qsl(url.query))
                content_type = self.headers.get("Content-Type", "")
                if raw and content_type.startswith("application/json"):
                    params.update(json.loads(raw))
                elif raw:
                    params.update(urllib.parse.parse_qsl(raw.decode()))
                auth = self.headers.get("Authorization", "")
                token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else ""
                token = token or str(params.get("token", ""))
                with emulator._lock:
                    emulator.calls.append(Call(method, params, token))
                    queue = emulator._failures.get(method)
                    failure = queue.popleft() if queue else None
                    answer = None if failure else emulator._answer(method, params, token)
                    slow = emulator._slow.get(method)
                    delay = slow.popleft() if slow else 0.0
                    held = answer is not None and emulator._hold(method, emulator.calls[-1])
                    if answer is not None and answer.get("ok") and emulator._hollow.get(method):
                        emulator._hollow[method] -= 1
                        answer = {"ok": True}
                    emulator._lock.notify_all()
                if delay:
                    time.sleep(delay)
                if held:
                    emulator._released.wait()
                if failure is not None:
                    headers = {}
                    if failure.retry_after is not None:
                        headers["Retry-After"] = str(failure.retry_after)
                    body = json.dumps({"ok": False, "error": failure.error}).encode()
                    self._reply(failure.status, body, "application/json", headers)
                    return
                body = json.dumps(answer).encode()
                self._reply(200, body, "application/json; charset=utf-8")

            def _reply(
                self,
                status: int,
                body: bytes,
                content_type: str,
                headers: dict[str, str] | None = None,
            ) -> None:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.send_response(status)  # a client that timed out has gone
                    self.send_header("Content-Type", content_type)
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

        return Handler
