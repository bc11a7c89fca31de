"""A card's Block Kit as a self-contained, inert HTML page (`pitcrew render --open`).

Why this exists: a person wants to see a card without posting it, and the card carries
text from logs. In the card's mrkdwn, untrusted text is already escaped (`&lt;`), so
the only raw `<…>` are what pitcrew wrote itself: its links and mentions. The page is
made from that reading, through `bot.core.text.escape_html` alone: every text and
attribute value is escaped there, a link becomes an anchor only when pitcrew wrote it
and its address is http(s), and nothing a log says can become an element or an
attribute (`<https://x"onmouseover=…>` from a log stays text). No script, no style
from the card, no request: the page is inert.
"""

from __future__ import annotations

import re
from typing import Any

from bot.core.text import escape_html

_STYLE = """
body{font:15px/1.46 -apple-system,'Segoe UI',Lato,sans-serif;background:#f8f8f8;margin:2em}
.card{max-width:680px;background:#fff;border-left:4px solid #e01e5a;padding:12px 16px;
 border-radius:6px;box-shadow:0 1px 3px #0002}
h1{font-size:18px;margin:4px 0 8px}.ctx{color:#616061;font-size:13px;margin:6px 0}
pre{background:#f6f6f6;border:1px solid #ddd;border-radius:4px;padding:8px;
 white-space:pre-wrap;font-size:12px}code{background:#f6f6f6;color:#c01343;padding:0 3px}
hr{border:0;border-top:1px solid #ddd;margin:12px 0}.sec{margin:8px 0;white-space:pre-wrap}
button{border:1px solid #bbb;background:#fff;border-radius:4px;padding:4px 12px;margin-right:6px;
 font-weight:600}button.primary{background:#007a5a;color:#fff;border-color:#007a5a}
button.danger{background:#e01e5a;color:#fff;border-color:#e01e5a}
"""
_FENCE = "```"
# Slack's control sequences, as pitcrew writes them: `<url|label>`, `<@U…>`, `<!here>`.
_CONTROL = re.compile(r"<([^<>\n]*)>")
_LINK = re.compile(r"(https?://[^\s|<>\"']+)(?:\|([^<>]*))?")
_MENTION = re.compile(r"([@#!])([^|]*)(?:\|(.*))?")
_CODE = re.compile(r"`([^`\n]+)`")
_BOLD = re.compile(r"(?<![\w*])\*([^*\n]+)\*(?![\w*])")
_ITALIC = re.compile(r"(?<![\w_])_([^_\n]+)_(?![\w_])")
_BUTTON_STYLES = frozenset({"primary", "danger"})


def page(text: str, blocks: list[dict[str, Any]]) -> str:
    """The card (its fallback `text` as the title, its `blocks`) as an HTML page."""
    body = "\n".join(_block(block) for block in blocks)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{_text(text)}</title>"
        f"<style>{_STYLE}</style></head><body><div class='card'>\n{body}\n</div></body></html>\n"
    )


def _block(block: dict[str, Any]) -> str:
    kind = block.get("type")
    if kind == "header":
        return f"<h1>{_text(_said(block.get('text')))}</h1>"
    if kind == "divider":
        return "<hr>"
    if kind == "context":
        texts = " ".join(_mrkdwn(_said(e)) for e in block.get("elements", []))
        return f'<div class="ctx">{texts}</div>'
    if kind == "section":
        text = _mrkdwn(_said(block.get("text")))
        fields = "".join(f"<div>{_mrkdwn(_said(f))}</div>" for f in block.get("fields", []))
        return f'<div class="sec">{text}{fields}</div>'
    if kind == "actions":
        return f"<div>{''.join(_button(e) for e in block.get('elements', []))}</div>"
    return ""


def _said(obj: Any) -> str:
    """The text of a Block Kit text object (or of an element that has one)."""
    if not isinstance(obj, dict):
        return ""
    text = obj.get("text", "")
    return text if isinstance(text, str) else _said(text)


def _button(element: dict[str, Any]) -> str:
    style = element.get("style", "")
    css = f' class="{style}"' if style in _BUTTON_STYLES else ""
    return f"<button{css}>{_text(_said(element))}</button>"


def _unescaped(mrkdwn: str) -> str:
    """Slack's three escapes undone: the characters the text really has."""
    return mrkdwn.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _text(mrkdwn: str) -> str:
    """Escaped mrkdwn (or plain text) as HTML text."""
    return escape_html(_unescaped(mrkdwn))


def _mrkdwn(mrkdwn: str) -> str:
    """Slack mrkdwn as HTML: fences, code, bold, italic, and the links pitcrew wrote."""
    parts = mrkdwn.split(_FENCE)
    out: list[str] = []
    for index, part in enumerate(parts):
        if index % 2:
            out.append(f"<pre>{_text(part.strip(chr(10)))}</pre>")
            continue
        at = 0
        for control in _CONTROL.finditer(part):
            out.append(_formatted(_text(part[at : control.start()])))
            out.append(_control(control.group(1)))
            at = control.end()
        out.append(_formatted(_text(part[at:])))
    return "".join(out)


def _formatted(escaped: str) -> str:
    """Code, bold and italic marks of text already escaped (they add tags, never text)."""
    escaped = _CODE.sub(r"<code>\1</code>", escaped)
    escaped = _BOLD.sub(r"<b>\1</b>", escaped)
    return _ITALIC.sub(r"<i>\1</i>", escaped)


def _control(inner: str) -> str:
    """One of pitcrew's own `<…>`: an http(s) link as an anchor, a mention as its text."""
    link = _LINK.fullmatch(inner)
    if link is not None:
        address, label = _unescaped(link.group(1)), link.group(2)
        shown = _text(label) if label else escape_html(address)
        return f'<a href="{escape_html(address)}">{shown}</a>'
    mention = _MENTION.fullmatch(inner)
    if mention is not None:
        sign, target, label = mention.groups()
        return _text(("#" if sign == "#" else "@") + (label or target))
    return _text(f"<{inner}>")
