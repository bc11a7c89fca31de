"""Splitting a paste into its parts: structured blocks become signals, the rest stays log.

A paste may mix a driver log with `kubectl describe` output, an events table
(or its rows without the header), Kubernetes or Ray JSON/YAML, `ray job status`
lines, `ray list actors|jobs|nodes` output and a RayCluster status fragment. Regexes find the lines
where such a block could start (cheap: a first-character lookahead rejects
most lines at once, and each regex scans the text once), and the detector for
that shape decides whether a block really starts there and where it ends.
Detectors only read forward from their line and report on a miss where they
stopped, so no part of the text is parsed more than a bounded number of times.

Whatever is not in a block is log text, yielded as one `LogText` in which the
lines of structured blocks are replaced by empty lines: line numbers in log
evidence are those of the paste. Events about pods are then completed from
the rest of the paste (`correlate`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator

from bot.core.inputs import InputPart, LogText
from bot.core.inputs.blocks import Block, Detector, Miss
from bot.core.inputs.clusterstatus import STATUS_FRAGMENT_START, cluster_status_block
from bot.core.inputs.correlate import with_known_pods
from bot.core.inputs.describe import DESCRIBE_START, describe_block
from bot.core.inputs.documents import JSON_START, YAML_START, json_block, yaml_block
from bot.core.inputs.event_rows import ROWS_START, event_rows_block
from bot.core.inputs.events_table import HEADER_START, events_table_block
from bot.core.inputs.pasted import without_wrappers
from bot.core.inputs.rayjob import LOGGED_STATUS_START, STATUS_START, job_status_block
from bot.core.inputs.raylist import LIST_START, TABLE_HEADER_START, ray_list_block

log = logging.getLogger(__name__)

_DETECTORS: dict[str, Detector] = {
    "json": json_block,
    "yaml": yaml_block,
    "describe": describe_block,
    "events": events_table_block,
    "ray_status": job_status_block,
    "ray_status_logged": job_status_block,
    "event_rows": event_rows_block,
    "cluster_status": cluster_status_block,
    "ray_list": ray_list_block,
    "ray_list_header": ray_list_block,
}
# Regexes for the lines where a block could start, each group named after its shape.
# JSON has a stream of its own because a JSON miss can skip far ahead, and so have
# header-less event rows (they start with a digit or an indent), which share theirs
# with the other shapes that may start indented (RayCluster status fragments, a
# `ray list` table's header); the other shapes share one. Every stream is a
# pass over the text, so a new shape joins a stream rather than adding one. The
# first-character lookahead rejects most lines at once; within a stream the first
# alternative that fits a line is the one asked (a `ray list` YAML before plain YAML).
_STREAMS = (
    re.compile(rf"^(?=[ \t{{\[])(?P<json>{JSON_START})", re.MULTILINE),
    re.compile(
        r"^(?=[-akNLSJC\x1b=])(?:"
        rf"(?P<ray_list>{LIST_START})|(?P<yaml>{YAML_START})|(?P<describe>{DESCRIBE_START})"
        rf"|(?P<events>{HEADER_START})|(?P<ray_status>{STATUS_START}))",
        re.MULTILINE,
    ),
    re.compile(
        rf"^(?=[ \t0-9a-z<AJNT])(?:(?P<ray_status_logged>{LOGGED_STATUS_START})"
        rf"|(?P<event_rows>{ROWS_START})"
        rf"|(?P<cluster_status>{STATUS_FRAGMENT_START})|(?P<ray_list_header>{TABLE_HEADER_START}))",
        re.MULTILINE,
    ),
)


def split_text(text: str, origin: str) -> Iterator[InputPart]:
    """The structured parts of `text`, in order, then its log text (if any is left); each
    line is read without what an issue, a chat or a log collector wrapped around it."""
    text = without_wrappers(text)
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

    Each stream's regex only moves forward (past a block, or past a miss to
    where its detector said to resume), so the text is scanned once per stream
    however many candidates are skipped.
    """
    resume = dict.fromkeys(_DETECTORS, 0)
    heads = {stream: stream.search(text) for stream in _STREAMS}
    while True:
        candidate = _earliest(heads.values())
        if candidate is None:
            return
        start, stream, shape = candidate.start(), candidate.re, str(candidate.lastgroup)
        if start < resume[shape]:
            heads[stream] = stream.search(text, _next_line(stream, start, resume[shape]))
            continue
        found = _detect(_DETECTORS[shape], text, start, origin)
        if isinstance(found, Miss):
            resume[shape] = max(found.resume, start + 1)
            heads[stream] = stream.search(text, _next_line(stream, start, resume[shape]))
            continue
        yield start, found
        end = max(found.end, start + 1)
        for other, match in heads.items():
            if match is not None and match.start() < end:
                heads[other] = other.search(text, end)


def _earliest(matches: Iterable[re.Match[str] | None]) -> re.Match[str] | None:
    earliest = None
    for match in matches:
        if match is not None and (earliest is None or match.start() < earliest.start()):
            earliest = match
    return earliest


def _next_line(stream: re.Pattern[str], start: int, resume: int) -> int:
    """Where a stream looks next: a one-shape stream jumps to the resume point."""
    return resume if len(stream.groupindex) == 1 else start + 1


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
