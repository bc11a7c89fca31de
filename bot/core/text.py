"""Untrusted text (log lines, messages, the API's names) made safe for each medium it
reaches: Slack mrkdwn, HTML, a terminal. Each medium has its one function here, and
everything shown in that medium goes through it.

Why this exists: a log line is written by whoever controls the workload. In Slack,
`<!channel>` pings everyone and `<http://evil|click>` disguises a link; in HTML,
`<https://x"onmouseover=…>` became an attribute of an anchor; on a terminal, an escape
sequence can move the cursor, retitle the window or hide text, and a bidirectional
override shows `exe.txt` as `txt.exe`. All three start from `strip_controls`.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

ELLIPSIS = "…"
# C0 (but tab and newline), DEL, C1, the bidirectional marks, embeddings, overrides and
# isolates (U+061C, U+200E/F, U+202A-E, U+2066-9), lone surrogates (undecodable bytes
# smuggled through), invisible marks (U+200B, U+FEFF) and the Unicode line and
# paragraph separators; zero-width joiners stay (emoji use them).
_CONTROL = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u2028\u2029\u202a-\u202e"
    r"\u2066-\u2069\ufeff\ud800-\udfff]"
)
# A whole terminal escape sequence: an OSC (a window title, a hyperlink) or another
# string sequence with its terminator (BEL or ESC \; at most 512 characters, so a line
# of unterminated ones costs no more than its length), CSI (ESC [ or the one-byte C1
# CSI) with its parameters and final byte, or a two-character ESC sequence. What is
# left of one that is not whole loses its ESC with the other controls.
_ESCAPE = re.compile(
    r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]{0,512}(?:\x07|\x1b\\|\x9c)"
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|\x1b[@-Z\\-_]"
)
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
    C1 control characters but tab and newline, bidirectional marks and overrides,
    invisible marks and lone surrogates."""
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


def escape_html(text: str) -> str:
    """Text for an HTML element's content or a quoted attribute's value: control
    characters removed, `&`, `<`, `>`, `"` and `'` escaped, so no element, attribute or
    entity can be made from it."""
    import html  # its table of entities: not for a terminal's `pitcrew diagnose`

    return html.escape(strip_controls(text), quote=True)


def for_terminal(text: str) -> str:
    """Text for a terminal or a log read on one: escape sequences, control characters
    (but tab and newline) and bidirectional overrides removed. Rich markup is no
    concern here: what pitcrew prints with rich is text, never markup."""
    return strip_controls(text)


_UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_DOTS = re.compile(r"\.{2,}")
NAME_LIMIT = 100


def file_name(identifier: str, limit: int = NAME_LIMIT) -> str:
    """A file or folder name made from an identifier someone else chose (a pod's, a
    container's, a RayCluster's name): letters, digits, `.`, `_` and `-` only, so no `/`,
    control character or absolute path; no `..` and no leading dot; at most `limit`
    characters. An identifier that is already such a name is its own name; one that had to
    change ends with `~` and a digest of it, so two identifiers never make one name."""
    if identifier and len(identifier) <= limit and _usable(identifier):
        return identifier
    cleaned = _DOTS.sub("_", _UNSAFE_IN_NAME.sub("_", identifier)).lstrip(".") or "_"
    digest = hashlib.sha1(identifier.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{cleaned[: limit - len(digest) - 1]}~{digest}"


def _usable(name: str) -> bool:
    """Whether an identifier is already a file name as `file_name` makes them."""
    return (
        _UNSAFE_IN_NAME.search(name) is None
        and ".." not in name
        and not name.startswith(".")
        and bool(name)
    )
