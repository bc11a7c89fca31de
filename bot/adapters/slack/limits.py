"""Slack's Block Kit limits, and the validator that keeps any message inside them.

Why this exists: Slack rejects a whole message when one field is too long, a block has
too many elements or the message is too big (`invalid_blocks`, `msg_blocks_too_long`).
A card is built from text pitcrew does not control, so whatever `bot.adapters.slack.blocks`
builds goes through `fit`: it trims what still exceeds a limit, field by field, then
drops whole blocks by priority (history before evidence, evidence before the cause;
never the header, the status or the buttons), so the result is valid Block Kit whatever
the input. `cut` shortens escaped mrkdwn without breaking an entity or leaving a code
fence open. Pure JSON: no Slack SDK, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from bot.core.text import ELLIPSIS

Block = dict[str, Any]

# -- Slack's limits (Block Kit's reference and slack_sdk.models' validators) ----------

MAX_BLOCKS = 50
SECTION_TEXT = 3000
FIELD_TEXT = 2000
MAX_FIELDS = 10
HEADER_TEXT = 150
CONTEXT_ELEMENTS = 10
CONTEXT_TEXT = 3000
ACTIONS_ELEMENTS = 25
BUTTON_TEXT = 75
BUTTON_VALUE = 2000
BUTTON_URL = 3000
ACTION_ID = 255
BLOCK_ID = 255
CONFIRM_TITLE = 100
CONFIRM_TEXT = 300
CONFIRM_BUTTON = 30
FALLBACK_TEXT = 3000  # Slack advises <= 4,000 for the top-level text
# Slack answers msg_blocks_too_long at about 13,200 characters of block text; keep a margin.
TEXT_BUDGET = 11_000

_FENCE = "```"


def cut(text: str, limit: int) -> str:
    """At most `limit` characters of already-escaped mrkdwn, ending with an ellipsis
    when cut; never splits an `&...;` entity, and closes a code fence left open."""
    if len(text) <= limit:
        return text
    if limit < 8:
        return text[: max(limit - 1, 0)] + ELLIPSIS if limit > 1 else ELLIPSIS[:limit]
    head = text[: limit - 1 - len(_FENCE) - 1]
    amp = head.rfind("&")
    if amp != -1 and ";" not in head[amp:]:
        head = head[:amp]
    head += ELLIPSIS
    if head.count(_FENCE) % 2:
        head += "\n" + _FENCE
    return head


# -- the validator ---------------------------------------------------------------------

# Which blocks go first when a message is still too big: history and the like before
# evidence, evidence before the cause; the header, status and buttons never go.
_DROP_ORDER = (
    "history",
    "withheld",
    "divider",
    "diagnosis",
    "evidence",
    "where",
    "action",
    "cause",
)


def _kind(block: Block) -> str:
    return str(block.get("block_id", "")).split(".", 1)[0]


def _text_obj(obj: Any, limit: int, *, plain_only: bool = False) -> dict[str, Any]:
    if not isinstance(obj, dict):
        obj = {"type": "plain_text", "text": str(obj)}
    kind = "plain_text" if plain_only else obj.get("type", "mrkdwn")
    if kind not in ("plain_text", "mrkdwn"):
        kind = "mrkdwn"
    text = str(obj.get("text", "")) or "-"
    fitted = {**obj, "type": kind, "text": cut(text, limit)}
    if kind == "mrkdwn":
        fitted.pop("emoji", None)
    else:
        fitted.pop("verbatim", None)
    return fitted


def _fit_confirm(confirm: dict[str, Any]) -> dict[str, Any]:
    fitted = dict(confirm)
    fitted["title"] = _text_obj(confirm.get("title"), CONFIRM_TITLE, plain_only=True)
    fitted["text"] = _text_obj(confirm.get("text"), CONFIRM_TEXT)
    fitted["confirm"] = _text_obj(confirm.get("confirm", "OK"), CONFIRM_BUTTON, plain_only=True)
    fitted["deny"] = _text_obj(confirm.get("deny", "Cancel"), CONFIRM_BUTTON, plain_only=True)
    return fitted


def _fit_element(element: dict[str, Any]) -> dict[str, Any]:
    fitted = dict(element)
    if element.get("type") == "button":
        fitted["text"] = _text_obj(element.get("text"), BUTTON_TEXT, plain_only=True)
        if "value" in element:
            fitted["value"] = str(element["value"])[:BUTTON_VALUE]
        if "url" in element:
            fitted["url"] = str(element["url"])[:BUTTON_URL]
        if "style" in element and element["style"] not in ("primary", "danger"):
            fitted.pop("style")
    if "action_id" in element:
        fitted["action_id"] = str(element["action_id"])[:ACTION_ID]
    if isinstance(element.get("confirm"), dict):
        fitted["confirm"] = _fit_confirm(element["confirm"])
    return fitted


def _fit_block(block: Block) -> Block | None:
    fitted = dict(block)
    if "block_id" in fitted:
        fitted["block_id"] = str(fitted["block_id"])[:BLOCK_ID]
    kind = block.get("type")
    if kind == "header":
        fitted["text"] = _text_obj(block.get("text"), HEADER_TEXT, plain_only=True)
    elif kind == "section":
        if "text" in block:
            fitted["text"] = _text_obj(block["text"], SECTION_TEXT)
        if "fields" in block:
            fields = [_text_obj(f, FIELD_TEXT) for f in block["fields"][:MAX_FIELDS]]
            if fields:
                fitted["fields"] = fields
            else:
                fitted.pop("fields")
        if "text" not in fitted and "fields" not in fitted:
            return None
    elif kind == "context":
        elements = [
            _text_obj(e, CONTEXT_TEXT) if e.get("type") in ("mrkdwn", "plain_text") else e
            for e in block.get("elements", [])[:CONTEXT_ELEMENTS]
        ]
        if not elements:
            return None
        fitted["elements"] = elements
    elif kind == "actions":
        elements = [_fit_element(e) for e in block.get("elements", [])[:ACTIONS_ELEMENTS]]
        if not elements:
            return None
        seen: set[str] = set()
        for n, element in enumerate(elements):  # action ids must be unique in a block
            if element.get("action_id") in seen:
                element["action_id"] = f"{element['action_id'][: ACTION_ID - 8]}.{n}"
            seen.add(element.get("action_id", ""))
        fitted["elements"] = elements
    return fitted


def _single_primary(blocks: list[Block]) -> None:
    seen = False
    for block in blocks:
        for element in block.get("elements", []) if block.get("type") == "actions" else []:
            if element.get("style") == "primary":
                if seen:
                    element.pop("style")
                seen = True


def _texts(blocks: Sequence[Block]) -> Iterable[tuple[dict[str, Any], str, int]]:
    """Every shrinkable text of the message: (holder, key, limit)."""
    for block in blocks:
        if block.get("type") == "section":
            if "text" in block:
                yield block["text"], "text", SECTION_TEXT
            for field in block.get("fields", []):
                yield field, "text", FIELD_TEXT
        elif block.get("type") == "context":
            for element in block["elements"]:
                if "text" in element:
                    yield element, "text", CONTEXT_TEXT


def text_size(value: Any) -> int:
    """Characters of text in a message (every string in it, keys excluded)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(text_size(v) for k, v in value.items() if k not in ("type", "block_id"))
    if isinstance(value, list):
        return sum(text_size(v) for v in value)
    return 0


def _drop_one(blocks: list[Block]) -> bool:
    for kind in _DROP_ORDER:
        for index in range(len(blocks) - 1, -1, -1):
            if _kind(blocks[index]) == kind:
                del blocks[index]
                return True
    return False


def fit(blocks: Sequence[Block], budget: int = TEXT_BUDGET) -> list[Block]:
    """The blocks trimmed to every Block Kit limit: per text object and element, at
    most one primary button, at most 50 blocks, and the whole within `budget`
    characters of text. Long texts are shortened first; then low-priority blocks
    (history, withheld, diagnosis, evidence, ...) are dropped; the header, status
    and buttons are kept."""
    fitted = [b for b in (_fit_block(block) for block in blocks) if b is not None]
    _single_primary(fitted)
    while len(fitted) > MAX_BLOCKS and _drop_one(fitted):
        pass
    del fitted[MAX_BLOCKS:]
    excess = text_size(fitted) - budget
    while excess > 0:
        holder, key, _ = max(_texts(fitted), key=lambda t: len(t[0][t[1]]), default=(None, "", 0))
        if holder is not None and len(holder[key]) > 300:
            holder[key] = cut(holder[key], max(300, len(holder[key]) - excess))
        elif not _drop_one(fitted):
            break
        excess = text_size(fitted) - budget
    return fitted
