"""The HTML preview of a card is inert: whatever a log puts on the card, the page read by
Python's own HTML parser has only the elements and attributes the preview writes, and
an anchor only for a link pitcrew wrote."""

from __future__ import annotations

import pytest

from bot.adapters.slack import preview
from bot.adapters.slack.blocks import code, link, md, plain, prose
from tests.support.hostile import ELEMENTS, HOSTILE, TERMINAL_CONTROLS, parsed

RUNBOOK = "https://docs.ray.io/en/latest/ray-core/scheduling/memory-management.html?a=1&b=2"


def card_of(hostile: str) -> tuple[str, list[dict[str, object]]]:
    """A card's blocks carrying `hostile` everywhere untrusted text goes, and a runbook link."""
    section = f"*What broke:* {md(hostile)}\n{prose(hostile)}\n*Runbook:* {link(RUNBOOK)}"
    blocks: list[dict[str, object]] = [
        {"type": "header", "text": {"type": "plain_text", "text": plain(hostile, 150)}},
        {"type": "section", "text": {"type": "mrkdwn", "text": section}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": md(hostile)}]},
        {"type": "section", "text": {"type": "mrkdwn", "text": code([hostile], 3000)}},
        {"type": "section", "fields": [{"type": "mrkdwn", "text": md(hostile)}]},
        {
            "type": "actions",
            "elements": [
                {"type": "button", "text": {"type": "plain_text", "text": plain(hostile, 75)}},
                {"type": "button", "style": '"onclick="x', "text": {"text": "Reject"}},
            ],
        },
    ]
    return md(hostile), blocks


@pytest.mark.parametrize("family", sorted(HOSTILE))
def test_nothing_from_the_card_becomes_an_element_or_an_attribute(family: str) -> None:
    text, blocks = card_of(HOSTILE[family])
    page = parsed(preview.page(text, blocks))
    assert [tag for tag, _ in page.tags if tag not in ELEMENTS] == []
    assert [(t, a) for t, attrs in page.tags for a in attrs if a not in ELEMENTS[t]] == []
    assert [attrs for tag, attrs in page.tags if tag == "a"] == [{"href": RUNBOOK}]
    assert [attrs for tag, attrs in page.tags if tag == "button"] == [{}, {}]
    assert {attrs.get("class") for tag, attrs in page.tags if tag == "div"} == {
        "card",
        "ctx",
        "sec",
        None,
    }
    shown = "".join(page.text)
    assert [c for c in TERMINAL_CONTROLS if c in shown] == []


def test_the_link_from_a_log_stays_text_and_pitcrews_own_is_an_anchor() -> None:
    text, blocks = card_of(HOSTILE["html attribute"])
    page = preview.page(text, blocks)
    assert "&lt;https://evil.example/&quot;onmouseover=&quot;alert(1)&gt;" in page
    assert (
        '<a href="https://docs.ray.io/en/latest/ray-core/scheduling/memory-management.html'
        '?a=1&amp;b=2">https://docs.ray.io/' in page
    )


@pytest.mark.parametrize(
    ("mrkdwn", "html"),
    [
        ("<https://x.example/a|the rule>", '<a href="https://x.example/a">the rule</a>'),
        ("<javascript:alert(1)|click>", "&lt;javascript:alert(1)|click&gt;"),
        ('<https://x.example/"onmouseover=y>', "&lt;https://x.example/&quot;onmouseover=y&gt;"),
        ("<@U012ABC> and <#C1|ml-alerts> and <!here>", "@U012ABC and #ml-alerts and @here"),
        ("*bold* _it_ `code`", "<b>bold</b> <i>it</i> <code>code</code>"),
        ("&lt;b&gt;", "&lt;b&gt;"),
        ("```\n<b>x</b>\n```", "<pre>&lt;b&gt;x&lt;/b&gt;</pre>"),
    ],
)
def test_mrkdwn_as_html(mrkdwn: str, html: str) -> None:
    section = {"type": "section", "text": {"type": "mrkdwn", "text": mrkdwn}}
    assert f'<div class="sec">{html}</div>' in preview.page("t", [section])
