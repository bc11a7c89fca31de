"""Untrusted text is made safe for Slack mrkdwn; memory quantities scale like a person would."""

from __future__ import annotations

import pytest

from bot.core.quantity import QuantityError, bump, format_bytes, parse_bytes
from bot.core.text import escape_mrkdwn, truncate


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


@pytest.mark.parametrize(
    ("quantity", "size"),
    [
        ("16Gi", 16 * 2**30),
        ("500M", 500 * 10**6),
        ("1073741824", 2**30),
        ("1.5Gi", 3 * 2**29),
        ("512Mi", 2**29),
    ],
)
def test_parse_bytes(quantity: str, size: int) -> None:
    assert parse_bytes(quantity) == size


@pytest.mark.parametrize(
    ("current", "factor", "cap", "result"),
    [
        ("16Gi", 1.5, "512Gi", "24Gi"),
        ("20Gi", 1.5, "512Gi", "30Gi"),
        ("10G", 1.5, "512Gi", "14Gi"),
        ("300Mi", 1.5, "512Gi", "450Mi"),
        ("200Gi", 2.0, "256Gi", "256Gi"),
    ],
)
def test_bump_rounds_up_and_respects_the_cap(
    current: str, factor: float, cap: str, result: str
) -> None:
    assert bump(current, factor, cap) == result


@pytest.mark.parametrize("bad", ["sixteen", "16GB", "-1Gi", ""])
def test_bad_quantities_are_named(bad: str) -> None:
    with pytest.raises(QuantityError, match="not a memory quantity"):
        parse_bytes(bad)


def test_format_bytes_prefers_the_largest_exact_unit() -> None:
    assert format_bytes(3 * 2**40) == "3Ti"
    assert format_bytes(2**29) == "512Mi"
    assert format_bytes(1000) == "1Mi"
