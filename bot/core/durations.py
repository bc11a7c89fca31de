"""Durations as people write them: `30s`, `10m`, `1h30m`, `2d`, `500ms`, or seconds.

Why this exists: the config file, `pitcrew silence` and the Slack `silence` command all
read durations and show them back; one grammar, written once, keeps them agreeing.
"""

from __future__ import annotations

import re
from datetime import timedelta

DURATION_HINT = "expected a duration like 30s, 10m, 1h or 1h30m"

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> timedelta:
    """`90s`, `10m`, `1h30m`, `2d`, `500ms`, or a number of seconds."""
    compact = text.strip().replace(" ", "")
    if re.fullmatch(r"\d+(?:\.\d+)?", compact):
        return timedelta(seconds=float(compact))
    if not compact or _DURATION_PART.sub("", compact):
        raise ValueError(f"{text!r}: {DURATION_HINT}")
    seconds = sum(float(n) * _UNITS[unit] for n, unit in _DURATION_PART.findall(compact))
    return timedelta(seconds=seconds)


def format_duration(value: timedelta) -> str:
    """The shortest form `parse_duration` reads back: `1h30m`, `45s`, `250ms`."""
    millis = round(value.total_seconds() * 1000)
    if millis % 1000:
        return f"{millis}ms"
    seconds = millis // 1000
    if seconds == 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
