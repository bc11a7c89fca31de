"""`ray list actors|jobs|nodes|tasks` output inside a paste -> State API records -> parts.

Ray prints a list in one of these shapes (`ray/util/state/state_cli.py`):

- the default table: a `======== List: <time> ========` banner, `Stats:` with
  `Total: N`, then `Table:` and a tabulate "plain" table with an index column
  and upper-case headers (`ACTOR_ID  CLASS_NAME  STATE  JOB_ID  NAME …`; Ray
  2.0–2.2 printed fewer columns, sorted). Cells that hold a mapping
  (`DEATH_CAUSE` with `--format table --detail`, `DRIVER_INFO`, `LABELS`) are
  YAML spread over several lines, and so is a message with line breaks.
  People also paste the table without the banner, or without the index.
- `--detail` (YAML by default) and `--format yaml`: a `---` document holding a
  list of records; `--format json` is read by the JSON reader (`documents`).

Columns are found from the layout: tabulate separates columns by two or more
spaces, so a column is a run of text positions that are blank in no line of
the table, which also places right-aligned numbers and multi-line cells. A
row whose index (or first) cell is empty continues the record above it.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from bot.core.inputs import InputPart, yamltext
from bot.core.inputs.blocks import Block, Line, Miss, block_end, lines_from
from bot.core.inputs.rayjob import ray_job_parts
from bot.core.inputs.raystate import records_parts, state_parts

_FIRST_KEYS = r"(?:actor_id|node_id|task_id|job_id|submission_id|type)"
# Where a list can start: its banner or YAML (LIST_START), or a table's header pasted
# without the banner (TABLE_HEADER_START, indented over the index column or not).
LIST_START = (
    r"(?:=+ List: [^\n]*=+[ \t]*\r?$"
    rf"|---[ \t]*\r?\n-[ \t]+{_FIRST_KEYS}:|-[ \t]+(?:actor_id|node_id|task_id):)"
)
TABLE_HEADER_START = r"[ \t]*(?:ACTOR_ID|JOB_ID|NODE_ID|TASK_ID)[ \t]"
_BANNER = re.compile(r"^=+ List: .*=+\s*$")
_PREAMBLE = re.compile(r"^(?:Stats:|Table:|Total: \d+|-+)?\s*$")
_HEADER_TOKEN = re.compile(r"[A-Z][A-Z0-9_]*")
_INDEX = re.compile(r"^\s*\d+$")
_INDEX_ROW = re.compile(r"^\s*\d+ {2,}\S| {8,}\S")
_GAP = re.compile(r"\s{2,}")
_PREAMBLE_LINES = 8
_MAX_ROWS = 5000
_MAX_YAML_LINES = 20000
# Cells that hold YAML (a mapping Ray dumped into the table).
_MAPPING_COLUMNS = frozenset({"death_cause", "driver_info", "required_resources"})


def ray_list_block(text: str, start: int, origin: str) -> Block | Miss:
    """A `ray list` table or YAML list starting on the line at `start`."""
    lines = lines_from(text, start)
    first = next(lines, None)
    if first is None:
        return Miss(start + 1)
    if first.text.startswith("-"):
        return _yaml_list(text, first, lines, origin)
    header = _header_after_banner(first, lines) if _BANNER.match(first.text) else first
    kind = _table_kind(header.text) if header else ""
    if header is None or not kind:
        return Miss(start + 1)
    rows = _rows(lines_from(text, header.next), header)
    records = _records(header.text, [row.text for row in rows])
    last = rows[-1] if rows else header
    return Block(block_end(last, text), records_parts(kind, records, origin))


def _header_after_banner(banner: Line, lines: Iterator[Line]) -> Line | None:
    for _, line in zip(range(_PREAMBLE_LINES), lines, strict=False):
        if _table_kind(line.text):
            return line
        if not _PREAMBLE.match(line.text):
            return None
    return None


def _table_kind(header: str) -> str:
    """`actor`, `node`, `task` or `job` for a State API table header; "" for any other
    line."""
    tokens = header.split()
    if len(tokens) < 3 or not all(_HEADER_TOKEN.fullmatch(t) for t in tokens):
        return ""
    names = set(tokens)
    if {"ACTOR_ID", "STATE"} <= names:
        return "actor"
    if {"NODE_ID", "NODE_IP", "STATE"} <= names:
        return "node"
    if {"TASK_ID", "STATE"} <= names:
        return "task"
    if "STATUS" in names and names & {"JOB_ID", "SUBMISSION_ID"}:
        return "job"
    return ""


def _rows(lines: Iterator[Line], header: Line) -> list[Line]:
    """The table's lines after its header. In an indexed table (its header is indented
    over the index column) each line is an index row or a cell's next line; a blank
    line ends any table unless the line after goes on with it: a multi-line cell whose
    text had a line break leaves one."""
    indent = len(header.text) - len(header.text.lstrip())
    rows: list[Line] = []
    pending: list[Line] = []
    for line in lines:
        if len(rows) >= _MAX_ROWS:
            break
        if line.blank:
            pending.append(line)
            continue
        if (pending or indent) and not _goes_on(line.text, indent):
            break
        rows.extend(pending)
        pending.clear()
        rows.append(line)
    return rows


def _goes_on(row: str, indent: int) -> bool:
    """A row of an indexed table or a cell's next line (deeply indented); in a table
    without index, an indented line."""
    depth = len(row) - len(row.lstrip())
    return bool(_INDEX_ROW.match(row)) if indent else depth > 0


# -- columns --------------------------------------------------------------------------


class _Column(NamedTuple):
    name: str  # "" for the index column
    start: int
    end: int


def _columns(header: str, rows: Sequence[str]) -> list[_Column] | None:
    """The table's columns from its layout; None when the header does not line up."""
    spans = _spans([header, *rows])
    tokens = [(m.start(), m.group()) for m in _HEADER_TOKEN.finditer(header)]
    columns: list[_Column] = []
    for span_start, span_end in spans:
        names = [name for at, name in tokens if span_start <= at < span_end]
        if len(names) > 1:
            return None
        if names:
            columns.append(_Column(names[0].lower(), span_start, span_end))
        elif columns:
            columns[-1] = columns[-1]._replace(end=span_end)
        else:
            columns.append(_Column("", span_start, span_end))
    return columns


def _spans(lines: Sequence[str]) -> list[tuple[int, int]]:
    """Runs of positions with text in some line, split where all lines have 2+ blanks."""
    width = max(len(line) for line in lines)
    used = [False] * width
    for line in lines:
        for at, char in enumerate(line):
            if char not in " \t":
                used[at] = True
    spans: list[tuple[int, int]] = []
    start, blanks = -1, 0
    for at, filled in enumerate(used):
        if filled:
            if start < 0 or blanks >= 2:
                if start >= 0:
                    spans.append((start, at - blanks))
                start = at
            blanks = 0
        else:
            blanks += 1
    if start >= 0:
        spans.append((start, width - blanks))
    return spans


# -- records --------------------------------------------------------------------------


def _records(header: str, rows: Sequence[str]) -> list[dict[str, Any]]:
    columns = _columns(header, rows) if rows else None
    if columns is None:
        return _records_by_gaps(header, rows)
    cells: list[dict[str, list[str]]] = []
    for row in rows:
        cut = {c.name: row[c.start : c.end].rstrip() for c in columns}
        if not cells or cut[columns[0].name].strip():
            cells.append({c.name: [] for c in columns if c.name})
        for name, lines in cells[-1].items():
            if cut[name].strip() or lines:
                lines.append(cut[name])
    return [{name: _value(name, lines) for name, lines in r.items()} for r in cells]


def _records_by_gaps(header: str, rows: Sequence[str]) -> list[dict[str, Any]]:
    """Rows whose spacing was collapsed: split on runs of spaces, one line per record."""
    names = [t.lower() for t in header.split()]
    records = []
    for row in rows:
        cells = _GAP.split(row.strip())
        if len(cells) == len(names) + 1 and _INDEX.match(cells[0]):
            cells = cells[1:]
        if len(cells) == len(names):
            records.append(dict(zip(names, cells, strict=True)))
    return records


def _value(name: str, lines: list[str]) -> Any:
    """A cell's text (its lines re-joined), or the mapping a YAML cell holds."""
    text = textwrap.dedent("\n".join(lines)).strip()
    if name not in _MAPPING_COLUMNS or ":" not in text:
        return text
    try:
        data = yamltext.load(text)
    except yamltext.YamlTextError:
        return text
    return data if isinstance(data, dict) else text


# -- YAML -----------------------------------------------------------------------------


def _yaml_list(text: str, first: Line, lines: Iterator[Line], origin: str) -> Block | Miss:
    """`ray list … --detail` / `--format yaml`: a `---` document holding a list of records,
    ended by `...`."""
    body = [] if first.text.startswith("---") else [first]
    last = first
    for _, line in zip(range(_MAX_YAML_LINES), lines, strict=False):
        if line.text.startswith("..."):
            last = line
            break
        if not (line.blank or line.indented or line.text.startswith("-")):
            break
        body.append(line)
        last = line
    try:
        data = yamltext.load("\n".join(line.text for line in body))
    except yamltext.YamlTextError:
        return Miss(block_end(last, text))
    parts: tuple[InputPart, ...] | None = state_parts(data, origin)
    if parts is None:
        parts = ray_job_parts(data, origin)
    if parts is None:
        return Miss(block_end(last, text))
    return Block(block_end(last, text), parts)
