"""What an issue, a chat or a log collector wraps around pasted lines, taken away.

Why this exists: people paste failures inside issue markdown (code fences, `>` quotes,
a line in backticks, table pipes, `  | ` prefixes, a block indented as a code block),
behind a log collector's prefix (journald/syslog `Mon DD hh:mm:ss host unit[pid]: `,
the container runtime's `<RFC 3339> stderr F `), with CRLF line ends, and as an
operator's JSON log (KubeRay's zap lines: `{"level":"error",…,"msg":…,"error":…}`).
The shapes and signatures are written for the lines themselves; here each line is
given back without its wrapper. Every line stays a line (a fence becomes an empty one),
so line numbers are the paste's. Pure: text in, text out.
"""

from __future__ import annotations

import json
import re
import textwrap

# The lines that may carry a wrapper, found in one scan; most lines of a log do not.
_WRAPPED_LINE = re.compile(
    r"^(?:[ \t]*(?:>|\||`|```|~~~)"
    r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d "
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S* \S+ \S"
    r"|[ \t]*\{\"(?:level|L)\":\s*\""
    r"(?:error|ERROR|warn|WARN|warning|WARNING|fatal|FATAL|panic|dpanic)\")"
    r"[^\n]*"
    r"|^[^\n]*`[ \t]*$",
    re.MULTILINE,
)
_FENCE = re.compile(r"^\s*(?:>\s*)*(?:```|~~~)[\w+-]*\s*$")
_QUOTE = re.compile(r"^\s{0,3}(?:>+ ?)+")
_TABLE_ROW = re.compile(r"^\s*\|(.*)\|\s*$")
_PIPE_PREFIX = re.compile(r"^\s*\| ?")
_TICKS = re.compile(r"^`+(?!`)|(?<!`)`+\s*$")
# journald/syslog (`Oct 10 12:00:00 gpu-node-1 kubelet[1234]: `, RFC 5424 timestamps too)
# and the CRI log format the kubelet writes for `kubectl logs` (`<RFC 3339> stderr F `).
_COLLECTOR = re.compile(
    r"^(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?"
    r"(?:Z|[+-]\d\d:?\d\d)) [\w.-]+ [\w./@-]+(?:\[\d+\])?: "
    r"|^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d) (?:stdout|stderr) [FP] "
)
_JSON_LOG = re.compile(r'^\s*\{"')
# A run of two or more lines all indented by four spaces or more between blank lines
# (or the text's ends): a markdown code block, a quoted paste.
_INDENTED_RUN = re.compile(
    r"(?:(?<=\n\n)|\A)(?:[ ]{4,}\S[^\n]*\n)+[ ]{4,}\S[^\n]*(?:\n|\Z)(?=\n|\Z)"
)


def without_wrappers(text: str) -> str:
    """`text` with each line's markdown, quote, collector and JSON-log wrapper taken
    away (an operator's error and warning lines: its info lines stay as they are), code
    blocks indented as markdown dedented; the same number of lines."""
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    text = _WRAPPED_LINE.sub(lambda line: _bare(line[0]), text)
    if "    " in text:
        text = _INDENTED_RUN.sub(lambda run: textwrap.dedent(run[0]), text)
    return text


def _bare(line: str) -> str:
    if _FENCE.match(line):
        return ""
    line = _QUOTE.sub("", line, count=1)
    row = _TABLE_ROW.match(line)
    if row is not None:
        line = "  ".join(cell.strip() for cell in row[1].split("|"))
    else:
        line = _PIPE_PREFIX.sub("", line, count=1)
    line = _TICKS.sub("", line)
    line = _COLLECTOR.sub("", line, count=1)
    if _JSON_LOG.match(line):
        line = json_log_line(line)
    return line


def json_log_line(line: str) -> str:
    """A structured (zap/logr, structlog) JSON log line as a plain one: its time, level,
    logger and message, then each other field as `key=value`, strings unquoted (the
    quotes JSON escaped inside them are plain quotes again); a line that is not a JSON
    object is returned as it is."""
    try:
        record = json.loads(line)
    except ValueError:
        return line
    if not isinstance(record, dict):
        return line
    head = [
        str(record.pop(key)) for key in ("ts", "time", "level", "logger", "msg") if key in record
    ]
    rest = [f"{key}={_plain(value)}" for key, value in record.items() if key != "stacktrace"]
    return "\t".join([*head, *rest])


def _plain(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return " ".join(text.splitlines())
