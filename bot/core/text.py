"""Safe handling of untrusted text (log lines, messages) on its way to a chat."""

from __future__ import annotations

import re
import unicodedata

ELLIPSIS = "…"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def truncate(text: str, limit: int) -> str:
    """At most `limit` characters, ending with an ellipsis when cut."""
    if limit < 1:
        raise ValueError("limit must be positive")
    if len(text) <= limit:
        return text
    return text[: limit - 1] + ELLIPSIS


def strip_controls(text: str) -> str:
    """Remove control characters and bidirectional overrides that disguise text."""
    return _CONTROL.sub("", unicodedata.normalize("NFC", text))


def escape_mrkdwn(text: str, limit: int = 3000) -> str:
    """Slack mrkdwn-safe text: `&`, `<`, `>` escaped (so no @channel, mention or link
    can be injected), control characters removed, cut to `limit` characters without
    splitting an escape."""
    clean = strip_controls(text)
    escaped = clean.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if len(escaped) <= limit:
        return escaped
    cut = escaped[: limit - 1]
    amp = cut.rfind("&")
    if amp != -1 and ";" not in cut[amp:]:
        cut = cut[:amp]
    return cut + ELLIPSIS
