"""Safe handling of untrusted text (log lines, messages) on its way to a chat."""

from __future__ import annotations

import re
import unicodedata

ELLIPSIS = "…"
# C0 (but tab and newline), DEL, C1, and the bidirectional marks and overrides.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# A whole terminal escape sequence: CSI (ESC [ or the one-byte C1 CSI) with its
# parameters and final byte, or a two-character ESC sequence.
_ESCAPE = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# What is left of a colour code once something upstream dropped its ESC: `[31m`, `[1;31m`.
_SGR_REMNANT = re.compile(r"\[\d{1,3}(?:;\d{1,3})*m(?!\])")


def truncate(text: str, limit: int) -> str:
    """At most `limit` characters, ending with an ellipsis when cut."""
    if limit < 1:
        raise ValueError("limit must be positive")
    if len(text) <= limit:
        return text
    return text[: limit - 1] + ELLIPSIS


def strip_controls(text: str) -> str:
    """Remove terminal escape sequences (and colour codes that lost their ESC), C0 and
    C1 control characters, and bidirectional overrides that disguise text."""
    text = _ESCAPE.sub("", unicodedata.normalize("NFC", text))
    return _CONTROL.sub("", _SGR_REMNANT.sub("", text))


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
