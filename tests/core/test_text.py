"""Untrusted text made safe for each medium it reaches: Slack mrkdwn, HTML and a
terminal, each through its one function, fed the hostile strings of every family."""

from __future__ import annotations

import re
import time

import pytest

from bot.core.text import (
    escape_html,
    escape_mrkdwn,
    file_name,
    for_terminal,
    strip_controls,
    truncate,
)
from tests.support.hostile import HOSTILE, SLACK_CONTROLS, TERMINAL_CONTROLS


@pytest.mark.parametrize(
    ("raw", "safe"),
    [
        ("<!channel> deploy now", "&lt;!channel&gt; deploy now"),
        ("<!here>", "&lt;!here&gt;"),
        ("ping <@U123>", "ping &lt;@U123&gt;"),
        ("<http://evil|click>", "&lt;http://evil|click&gt;"),
        ("a & b", "a &amp; b"),
        ("rtl\u202eexe.txt", "rtlexe.txt"),
        ("bell\x07 and nul\x00", "bell and nul"),
        ("tab\tand\nnewline", "tab\tand\nnewline"),
        ("next\u0085line and csi\u009b31m red", "nextline and csi red"),
        ("\x1b[31mERROR\x1b[0m boom", "ERROR boom"),
        ("[31mERROR[0m boom after ESC was lost", "ERROR boom after ESC was lost"),
        ("\x1b[1;31mbold\x1b[m and [38;5;196mred", "bold and red"),
        ("list[0] and [1m] stay", "list[0] and [1m] stay"),
    ],
)
def test_escape_mrkdwn_neutralises_mentions_links_and_controls(raw: str, safe: str) -> None:
    assert escape_mrkdwn(raw) == safe


def test_escape_never_cuts_an_entity_in_half() -> None:
    text = "x" * 8 + "<"
    assert escape_mrkdwn(text, limit=10) == "x" * 8 + "…"
    assert len(escape_mrkdwn("<" * 10_000, limit=3000)) <= 3000


def test_truncate_marks_the_cut() -> None:
    assert truncate("abcdef", 4) == "abc…"
    assert truncate("abc", 4) == "abc"


@pytest.mark.parametrize("family", sorted(HOSTILE))
def test_no_medium_lets_a_hostile_string_through(family: str) -> None:
    hostile = HOSTILE[family]
    for medium, safe in (
        ("mrkdwn", escape_mrkdwn(hostile)),
        ("html", escape_html(hostile)),
        ("terminal", for_terminal(hostile)),
    ):
        assert [c for c in TERMINAL_CONTROLS if c in safe] == [], (medium, safe)
        if medium != "terminal":  # a terminal shows `<!channel>` as what it is: text
            assert [c for c in SLACK_CONTROLS if c in safe] == [], (medium, safe)
    assert not set("<>") & set(escape_mrkdwn(hostile))
    assert not set("<>\"'") & set(escape_html(hostile))


@pytest.mark.parametrize(
    ("raw", "html"),
    [
        (
            '<https://evil.example/"onmouseover="alert(1)>',
            "&lt;https://evil.example/&quot;onmouseover=&quot;alert(1)&gt;",
        ),
        ("<a href='x'>", "&lt;a href=&#x27;x&#x27;&gt;"),
        ("&lt; stays what it says", "&amp;lt; stays what it says"),
        ("tab\tand\nnewline\x1b[31m", "tab\tand\nnewline"),
    ],
)
def test_html_text_makes_no_element_attribute_or_entity(raw: str, html: str) -> None:
    assert escape_html(raw) == html


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b]0;owned\x07title kept", "title kept"),
        ("\x1b]8;;http://evil.example\x1b\\docs\x1b]8;;\x1b\\", "docs"),
        ("\x1b[2J\x1b[Hcleared", "cleared"),
        ("\x1b[8mhidden\x1b[0m text", "hidden text"),
        ("[bold red]alarm[/bold red]", "[bold red]alarm[/bold red]"),
        ("invoice\u202egnp.exe", "invoicegnp.exe"),
        ("cr\roverwrites", "croverwrites"),
        ("lone \udcff surrogate", "lone  surrogate"),
        ("an OSC never ended \x1b]0;swallows", "an OSC never ended 0;swallows"),
    ],
)
def test_terminal_text_keeps_the_words_and_drops_what_drives_the_terminal(
    raw: str, shown: str
) -> None:
    assert for_terminal(raw) == shown


def test_a_line_of_unterminated_escapes_costs_its_length() -> None:
    started = time.process_time()
    assert strip_controls("\x1b]" * 200_000 + "\x1b]0;" * 200_000) == "0;" * 200_000
    assert time.process_time() - started < 5


@pytest.mark.parametrize(
    ("identifier", "name"),
    [
        ("verl-ppo-qwen-raycluster-x7k2p", "verl-ppo-qwen-raycluster-x7k2p"),
        ("ray-worker", "ray-worker"),
        ("../../etc/passwd", "____etc_passwd~936d7c04"),
        ("/abs/path", "_abs_path~16a4cd88"),
        ("a/b", "a_b~3ec69c85"),
        ("..", "_~9d891e73"),
        ("", "_~da39a3ee"),
        (".hidden", "hidden~92f73832"),
        ("title\x1b]0;owned\x07", "title_0_owned_~2e47590a"),
        ("x" * 120, "x" * 91 + "~ceb28216"),
    ],
)
def test_a_file_name_from_an_identifier(identifier: str, name: str) -> None:
    assert file_name(identifier) == name
    assert re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._~-]*", name)
    assert ".." not in name
