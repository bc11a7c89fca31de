"""What pitcrew sends Slack carries hostile text only as text: a card, a thread reply and
a command's answer built from a string of each family keep no mention, broadcast,
link, code fence, escape sequence, control character or direction override of it, and
pitcrew's own links only when their address is plain http(s)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from bot.adapters.slack.blocks import card, link, text_message
from bot.adapters.slack.commands import explain_bundles
from tests.support.hostile import HOSTILE, SLACK_CONTROLS, TERMINAL_CONTROLS, hostile_report
from tests.support.slack_emulator import block_kit_errors


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in strings(v)]
    if isinstance(value, list):
        return [t for v in value for t in strings(v)]
    return []


def problems(text: str, blocks: list[dict[str, Any]]) -> list[str]:
    found = []
    for value in [text, *strings(blocks)]:
        found += [c for c in (*SLACK_CONTROLS, *TERMINAL_CONTROLS) if c in value]
        if value.count("```") % 2:
            found.append(f"an open fence in {value[:80]!r}")
    return found


@pytest.mark.parametrize("family", sorted(HOSTILE))
def test_a_card(family: str) -> None:
    message = card(hostile_report(HOSTILE[family]))
    assert problems(message.text, message.blocks) == []
    assert block_kit_errors(message.blocks) == []


@pytest.mark.parametrize("family", sorted(HOSTILE))
def test_a_thread_reply_and_a_commands_answer(family: str) -> None:
    reply = text_message(f"kuberay.recreate_rayjob failed: {HOSTILE[family]}")
    assert problems(reply.text, reply.blocks) == []
    answer = explain_bundles(HOSTILE[family], [])
    assert problems(answer, []) == []


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://docs.ray.io/a?b=1&c=2", "<https://docs.ray.io/a?b=1&amp;c=2>"),
        ("https://x.example/\x1b]0;owned\x07", "https://x.example/"),
        ("https://x.example/\u202egnp.exe", "https://x.example/gnp.exe"),
        ("https://x.example/<!channel>", "https://x.example/&lt;!channel&gt;"),
        ("javascript:alert(1)", "javascript:alert(1)"),
    ],
)
def test_only_a_plain_http_address_is_a_link(url: str, shown: str) -> None:
    assert link(url) == shown


def test_the_card_still_shows_what_the_log_said() -> None:
    sent = json.dumps(card(hostile_report(HOSTILE["slack broadcast"])).blocks)
    assert "&lt;!channel&gt; &lt;!here&gt;" in sent
    assert re.search(r"<https://runbook\.example/", sent) is None
