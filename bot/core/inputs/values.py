"""Reading untrusted parsed data (JSON, YAML, describe text) without surprises.

Pasted objects can have any shape: a field may be missing, `null`, a number
where a string is expected or a list where a mapping is. These accessors turn
whatever is there into the plain strings, mappings and lists the parsers
expect, so a malformed object yields empty values instead of an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Any

# Placeholders kubectl prints for an absent value.
_ABSENT = frozenset({"<none>", "<unset>", "<nil>", "<unknown>"})


def as_map(value: Any) -> Mapping[str, Any]:
    """`value` if it is a mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Any]:
    """`value` if it is a list, else an empty list."""
    return value if isinstance(value, list) else []


def as_text(value: Any) -> str:
    """A scalar as a string (`137`, `True`, a timestamp); "" for null, mappings and lists."""
    if value is None or isinstance(value, Mapping | list | tuple | set):
        return ""
    if isinstance(value, bool):
        return "True" if value else "False"  # as Kubernetes writes condition statuses
    if isinstance(value, datetime | date):
        return value.isoformat()
    text = str(value).strip()
    return "" if text in _ABSENT else text


def dig(value: Any, *keys: str) -> Any:
    """`value[k1][k2]…`, or None as soon as a step is not a mapping or lacks the key."""
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def text_at(value: Any, *keys: str) -> str:
    """`as_text(dig(value, *keys))`."""
    return as_text(dig(value, *keys))


def compact(fields: Mapping[str, str]) -> dict[str, str]:
    """The fields that have a value: an unknown field is absent, never an empty string.

    Playbooks treat a missing field as "does not match" and templates as
    "not known", which an empty string would silently defeat.
    """
    return {key: value for key, value in fields.items() if value}


def parse_time(value: Any) -> datetime | None:
    """A timestamp from RFC 3339 (`2025-11-03T10:14:02Z`), RFC 1123 (`Mon, 03 Nov 2025
    10:14:02 +0000`, as `kubectl describe` prints) or a YAML datetime; None otherwise."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    text = as_text(value)
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        from email.utils import parsedate_to_datetime  # RFC 1123: not for most pastes

        try:
            parsed = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
