"""What a paste is split into, for the input specs: the fixtures of tests/data/inputs/, the
parts of a text, its signals and log text, and one signal picked by what it says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.core.inputs import InputPart, LogText
from bot.core.inputs.segment import split_text
from bot.core.model import Signal, SourceKind

DATA = Path(__file__).resolve().parents[1] / "data" / "inputs"


def parts_of(text: str, origin: str = "paste") -> list[InputPart]:
    return list(split_text(text, origin))


def fixture(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def signals_of(parts: list[InputPart]) -> list[Signal]:
    return [part for part in parts if isinstance(part, Signal)]


def logs_of(parts: list[InputPart], source: SourceKind | None = None) -> list[str]:
    """The text of each LogText part (optionally of one source only)."""
    return [
        b"".join(part.chunks).decode("utf-8")
        for part in parts
        if isinstance(part, LogText) and (source is None or part.source is source)
    ]


def summary(signal: Signal) -> tuple[str, str, str, str | None]:
    """(source, reason, object, workload): how the tables below name a signal."""
    workload = str(signal.workload) if signal.workload else None
    return (str(signal.source), signal.reason, str(signal.obj), workload)


def only(signals: list[Signal], **where: Any) -> Signal:
    """The one signal whose attributes (or fields, for keys not on Signal) match."""
    found = [s for s in signals if all(_value(s, key) == want for key, want in where.items())]
    assert len(found) == 1, f"{len(found)} signals match {where}: {[summary(s) for s in found]}"
    return found[0]


def _value(signal: Signal, key: str) -> Any:
    if key in ("source", "reason", "text"):
        return str(getattr(signal, key))
    if key in ("obj", "workload"):
        ref = getattr(signal, key)
        return str(ref) if ref else None
    return signal.fields.get(key)
