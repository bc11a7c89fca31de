"""Queue items as store rows and back: what `bot.daemon.intake` keeps on disk.

Why this exists: evidence acknowledged to a sender (`/ingest`'s 202), and what a
stop leaves in the pipeline's queue, must survive until the pipeline has taken
it in. An observation becomes one row: its signals, the shape of its log texts
and its context as JSON (`meta`), the log bytes themselves concatenated
(`body`), so a 1 MiB log is stored as 1 MiB and not re-encoded. A workload's
"healthy again" notice is kept the same way. Pure: values in, values out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from bot.core.codec import CodecError, from_jsonable, to_jsonable
from bot.core.inputs import InputPart, LogText
from bot.core.model import ObjectRef, Signal, SourceKind
from bot.daemon.feed import Context, Healthy, Observation

FORMAT = 1
Kept = Observation | Healthy


class SpoolError(ValueError):
    """A stored row that does not read back as a queue item."""


@dataclass(frozen=True, slots=True)
class _LogShape:
    """A `LogText` without its bytes: where they start and end in the row's body."""

    size: int
    source: SourceKind = SourceKind.DRIVER_LOG
    origin: str = ""
    obj: ObjectRef | None = None
    workload: ObjectRef | None = None


def pack(item: Kept) -> tuple[str, bytes]:
    """The row (`meta`, `body`) that keeps `item`; its log chunks must be read already."""
    if isinstance(item, Healthy):
        return _meta({"kind": "healthy", "healthy": to_jsonable(item)}), b""
    parts: list[object] = []
    body: list[bytes] = []
    for part in item.parts:
        if isinstance(part, Signal):
            parts.append({"signal": to_jsonable(part)})
            continue
        text = b"".join(part.chunks)
        body.append(text)
        shape = _LogShape(len(text), part.source, part.origin, part.obj, part.workload)
        parts.append({"log": to_jsonable(shape)})
    meta = {"kind": "observation", "context": to_jsonable(item.context), "parts": parts}
    return _meta(meta), b"".join(body)


def unpack(meta: str, body: bytes) -> Kept:
    """The item a row keeps; raises SpoolError naming what does not read."""
    try:
        data = json.loads(meta)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise SpoolError(f"not a format {FORMAT} row")
        if data.get("kind") == "healthy":
            return from_jsonable(Healthy, data["healthy"])
        if data.get("kind") != "observation":
            raise SpoolError(f"unknown kind {data.get('kind')!r}")
        parts = _parts(data["parts"], body)
        return Observation(parts, from_jsonable(Context, data["context"]))
    except (CodecError, KeyError, TypeError, json.JSONDecodeError) as error:
        raise SpoolError(f"{type(error).__name__}: {error}") from error


def _parts(items: list[dict[str, object]], body: bytes) -> tuple[InputPart, ...]:
    parts: list[InputPart] = []
    offset = 0
    for item in items:
        if "signal" in item:
            parts.append(from_jsonable(Signal, item["signal"]))
            continue
        shape = from_jsonable(_LogShape, item["log"])
        text = body[offset : offset + shape.size]
        if len(text) != shape.size:
            raise SpoolError(f"the body ends before its log {shape.origin!r} does")
        offset += shape.size
        parts.append(LogText((text,), shape.source, shape.origin, shape.obj, shape.workload))
    if offset != len(body):
        raise SpoolError(f"{len(body) - offset} bytes of the body belong to no log")
    return tuple(parts)


def _meta(data: dict[str, object]) -> str:
    return json.dumps({"format": FORMAT, **data}, sort_keys=True, separators=(",", ":"))
