"""Socket Mode end to end: the real builtin Socket Mode client (through Bolt's
handler) connects to a local Socket Mode server that the emulator's
`apps.connections.open` points at; slash commands and clicks arrive as
envelopes and are acked over the socket; a dropped connection is re-opened, and
a dead one (or one whose pongs stopped) makes `healthy()` false."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from bot.adapters.slack import blocks
from bot.adapters.slack.chat import SlackChat
from tests.e2e.slack.conftest import SeededService, click_payload, command_body
from tests.support.slack_emulator import APP_TOKEN, SlackEmulator
from tests.support.slack_socket_server import SocketModeServer

pytestmark = pytest.mark.slack


@dataclass
class Socket:
    server: SocketModeServer
    chat: SlackChat
    emulator: SlackEmulator
    seeded: SeededService


def eventually(check: Callable[[], bool], timeout: float = 5.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        time.sleep(0.02)


@pytest.fixture
def socket(make_chat: Any, emulator: SlackEmulator, seeded: SeededService) -> Iterator[Socket]:
    server = SocketModeServer().start()
    emulator.socket_url = server.url
    chat: SlackChat = make_chat(socket_mode=True, ping_interval=0.25, stale_after=2.0)
    chat.bind(seeded.service)
    assert not chat.healthy()  # not started yet
    chat.start()
    server.wait_connections(1)
    eventually(chat.healthy, what="a healthy Socket Mode connection")
    yield Socket(server, chat, emulator, seeded)
    chat.stop()
    server.stop()


def test_the_connection_uses_the_app_level_token(socket: Socket) -> None:
    (opened,) = socket.emulator.calls_to("apps.connections.open")
    assert opened.token == APP_TOKEN
    (identity,) = socket.emulator.calls_to("auth.test")[:1]
    assert identity.token != APP_TOKEN


def test_a_slash_command_arrives_over_the_socket_and_is_acked(socket: Socket) -> None:
    started = time.monotonic()
    envelope = socket.server.send(
        "slash_commands", command_body(socket.emulator, "help"), accepts_response_payload=True
    )
    ack = socket.server.wait_ack(envelope, timeout=3)
    assert time.monotonic() - started < 3
    assert ack["payload"]["response_type"] == "ephemeral"
    assert "/pitcrew status" in ack["payload"]["blocks"][0]["text"]["text"]

    envelope = socket.server.send(
        "slash_commands",
        command_body(socket.emulator, "incidents", response="over-socket"),
        accepts_response_payload=True,
    )
    assert "payload" not in socket.server.wait_ack(envelope, timeout=3)  # acked, answered later
    (answer,) = socket.emulator.wait_for(
        lambda: [b for p, b in socket.emulator.responses if p == "/response/over-socket"]
    )
    assert "inc-seed000001" in answer["blocks"][0]["text"]["text"]


def test_an_approval_click_over_the_socket_executes_once(socket: Socket) -> None:
    proposal = socket.seeded.proposal.id
    for _ in range(2):  # a double click: both acked, handled concurrently
        payload = click_payload(socket.emulator, blocks.APPROVE_ACTION, proposal, ts="1.000001")
        socket.server.wait_ack(socket.server.send("interactive", payload), timeout=3)
    told = [c.params["text"] for c in socket.emulator.wait_calls("chat.postEphemeral", 2)]
    assert sum("approved by U0ALICE; it runs now" in t for t in told) == 1
    assert sum("Nothing changed: already approved by U0ALICE" in t for t in told) == 1
    assert socket.seeded.executed == [proposal]


def test_a_dropped_socket_is_reopened_and_a_dead_one_is_unhealthy(socket: Socket) -> None:
    socket.server.drop()
    socket.server.wait_connections(2)  # the client opened a new connection by itself
    eventually(socket.chat.healthy, what="healthy again after a reconnect")
    assert len(socket.emulator.calls_to("apps.connections.open")) >= 2

    socket.server.stop()  # Slack unreachable: reconnects fail
    eventually(lambda: not socket.chat.healthy(), what="unhealthy once the socket is dead")
    time.sleep(0.6)  # a few monitor rounds later it is still dead
    assert not socket.chat.healthy()


def test_a_connection_whose_pongs_stopped_counts_as_dead(socket: Socket) -> None:
    assert socket.chat.app.handler is not None
    session = socket.chat.app.handler.client.current_session
    assert session is not None
    session.last_ping_pong_time = time.time() - 30  # a zombie: connected, nothing comes back
    assert not socket.chat.healthy()


def test_stop_closes_the_connection(socket: Socket) -> None:
    socket.chat.stop()
    assert not socket.chat.healthy()
    eventually(lambda: socket.server.connected() == 0, what="the server to see the close")


def test_the_first_connection_is_retried_until_slack_answers(
    make_chat: Any, emulator: SlackEmulator, seeded: SeededService
) -> None:
    server = SocketModeServer().start()
    emulator.socket_url = server.url
    emulator.fail("apps.connections.open", status=200, error="internal_error", retry_after=None)
    chat: SlackChat = make_chat(socket_mode=True, ping_interval=0.25)
    chat.bind(seeded.service)
    try:
        chat.start()
        server.wait_connections(1, timeout=5)
        eventually(chat.healthy, what="connected after a retry")
        assert len(emulator.calls_to("apps.connections.open")) == 2
    finally:
        chat.stop()
        server.stop()
