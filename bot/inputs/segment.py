"""Splitting a paste into its parts: structured blocks become signals, the rest stays log.

A paste may mix a driver log with `kubectl describe` output, an events table,
Kubernetes or Ray JSON/YAML and `ray job status` lines. One regex pass finds
the lines where such a block could start (cheap: a first-character lookahead
rejects most lines at once), and the detector for that shape decides whether
a block really starts there and where it ends. Detectors only read forward
from their line and report on a miss where they stopped, so no part of the
text is parsed more than a bounded number of times.

Whatever is not in a block is log text, yielded as one `LogText` in which the
lines of structured blocks are replaced by empty lines: line numbers in log
evidence are those of the paste. Events about pods are then completed from
the rest of the paste (`correlate`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

from bot.inputs import InputPart, LogText
from bot.inputs.blocks import Block, Detector, Miss
from bot.inputs.correlate import with_known_pods
from bot.inputs.describe import DESCRIBE_START, describe_block
from bot.inputs.documents import JSON_START, YAML_START, json_block, yaml_block
from bot.inputs.events_table import HEADER_START, events_table_block
from bot.inputs.rayjob import STATUS_START, job_status_block

log = logging.getLogger(__name__)

# Each shape: the detector, and a regex for the lines where such a block could start.
# The first-character lookahead lets the regex engine reject most lines at once.
_SHAPES: dict[str, tuple[Detector, re.Pattern[str]]] = {
    "json": (json_block, re.compile(rf"^(?=[ \t{{\[]){JSON_START}", re.MULTILINE)),
    "yaml": (yaml_block, re.compile(rf"^(?=[-ak]){YAML_START}", re.MULTILINE)),
    "describe": (describe_block, re.compile(rf"^(?=N){DESCRIBE_START}", re.MULTILINE)),
    "events": (events_table_block, re.compile(rf"^(?=[NL]){HEADER_START}", re.MULTILINE)),
    "ray_status": (job_status_block, re.compile(rf"^(?=[SJ\x1b]){STATUS_START}", re.MULTILINE)),
}


def split_text(text: str, origin: str) -> Iterator[InputPart]:
    """The structured parts of `text`, in order, then its log text (if any is left)."""
    blocks: list[tuple[int, int]] = []
    parts: list[InputPart] = []
    for start, block in _blocks(text, origin):
        blocks.append((start, block.end))
        parts.extend(block.parts)
    yield from with_known_pods(parts)
    remainder = _log_text(text, blocks, origin)
    if remainder is not None:
        yield remainder


def _blocks(text: str, origin: str) -> Iterator[tuple[int, Block]]:
    """(start, block) of every structured block, in order, never overlapping.

    Each shape's regex scans forward only: after a miss it resumes where its
    detector said, after a block where the block ends, so every shape reads
    the text once however many candidates it skips.
    """
    heads: dict[str, re.Match[str]] = {}
    for shape, (_, pattern) in _SHAPES.items():
        first = pattern.search(text)
        if first is not None:
            heads[shape] = first
    while heads:
        shape = min(heads, key=lambda name: heads[name].start())
        start = heads[shape].start()
        found = _detect(_SHAPES[shape][0], text, start, origin)
        if isinstance(found, Miss):
            _advance(heads, shape, text, max(found.resume, start + 1))
            continue
        yield start, found
        end = max(found.end, start + 1)
        for name in [name for name, head in heads.items() if head.start() < end]:
            _advance(heads, name, text, end)


def _advance(heads: dict[str, re.Match[str]], shape: str, text: str, position: int) -> None:
    """Move `shape`'s next candidate to the first one at or after `position`."""
    found = _SHAPES[shape][1].search(text, position)
    if found is None:
        del heads[shape]
    else:
        heads[shape] = found


def _detect(detector: Detector, text: str, start: int, origin: str) -> Block | Miss:
    """Run one detector; if it fails on input nobody foresaw, its text stays log text."""
    try:
        return detector(text, start, origin)
    except Exception:  # robustness rule: malformed input never crashes a diagnosis
        log.debug("%s: could not parse the block at offset %d", origin, start, exc_info=True)
        return Miss(start + 1)


def _log_text(text: str, blocks: list[tuple[int, int]], origin: str) -> LogText | None:
    """The text outside `blocks`, with each block's lines left as empty lines."""
    if not blocks:
        return LogText([text.encode("utf-8")], origin=origin) if text.strip() else None
    chunks: list[bytes] = []
    has_log = False
    position = 0
    for start, end in blocks:
        gap = text[position:start]
        has_log = has_log or bool(gap.strip())
        chunks.append(gap.encode("utf-8"))
        chunks.append(b"\n" * text.count("\n", start, end))
        position = end
    tail = text[position:]
    has_log = has_log or bool(tail.strip())
    chunks.append(tail.encode("utf-8"))
    return LogText(chunks, origin=origin) if has_log else None
