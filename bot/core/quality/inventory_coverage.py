"""`pitcrew playbooks coverage`, the inventory's part: every wording of every message the
emitting systems print, in every carrier its emitter reaches a user through, must get the
answer its verdict asks for.

Why this exists: the inventory (`bot.core.quality.inventory`) says what each message is
evidence of; this holds pitcrew to it. A class verdict must classify to that class, or
be a finding beside a class that precedes it (docs/failure-classes.md, "Precedence"),
as the catalogue's coverage accepts; `none` must stay quiet (no finding, no unknown failure); an
`unclassified` message must be answered "pitcrew does not know this failure" naming the
entry (at warning level or below it may also stay quiet). Each entry is carried the way
its emitter prints it (`bot.core.quality.emitter_carriers`). Pure: entries and an engine
in, a report out. A deterministic sample (every entry whose key's hash falls in the
sample) is an option for a quick look; the full run is the default.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from io import BytesIO

from bot.core.diagnosis.engine import Engine
from bot.core.inputs.reader import read_stream
from bot.core.quality.carriers import Carrier
from bot.core.quality.catalogue import fill_text
from bot.core.quality.coverage import rank
from bot.core.quality.emitter_carriers import carriers_of
from bot.core.quality.inventory import NONE, UNCLASSIFIED, InventoryEntry

QUIET_LEVELS = frozenset({"warning", "info", "info-with-error"})
"""Levels below error: a message known but unclassified at one of them may be answered
"No failure found" (healthy logs are full of warnings, and the failure-looking detector
leaves warning-level lines alone); named as the entry when pitcrew does raise it."""


@dataclass(frozen=True, slots=True)
class Checked:
    """One wording of one entry in one carrier: what pitcrew answered."""

    entry: InventoryEntry
    wording: int
    carrier: str
    ok: bool
    answered: str
    """The primary class, `unknown` (named or not: see `named`), or `none`."""
    named: bool
    """The unknown answer named this entry."""


@dataclass(frozen=True, slots=True)
class Row:
    messages: int = 0
    wordings: int = 0
    classified: int = 0
    benign: int = 0
    texts: int = 0
    recognized: int = 0

    @property
    def with_class(self) -> float:
        return (self.classified + self.benign) / self.messages if self.messages else 1.0

    @property
    def share(self) -> float:
        return self.recognized / self.texts if self.texts else 1.0


def answer_of(engine: Engine, entry: InventoryEntry, text: str) -> tuple[bool, str, bool]:
    """(as the verdict asks, what was answered, the entry named) for one carried text."""
    diagnosis = engine.diagnose(read_stream(BytesIO(text.encode("utf-8")), entry.key))
    primary = diagnosis.primary
    named = any(entry.key in line for line in diagnosis.unknown)
    if primary is not None:
        answered = str(primary.category)
    else:
        answered = "unknown" if diagnosis.unknown else NONE
    if entry.verdict == NONE:
        return answered == NONE, answered, named
    if entry.verdict == UNCLASSIFIED:
        quiet = answered == NONE and entry.level in QUIET_LEVELS
        return (answered == "unknown" and named) or quiet, answered, named
    found = {str(c) for c in diagnosis.categories}
    ok = answered == entry.verdict or (
        entry.verdict in found and rank(answered) <= rank(entry.verdict)
    )
    return ok, answered, named


def check(engine: Engine, entry: InventoryEntry, wording: int, carrier: Carrier) -> Checked | None:
    """One wording carried by `carrier` and diagnosed; None when the carrier does not apply."""
    printed = entry.printed(fill_text(entry.wordings[wording].template, {}))
    text = carrier.carry(entry, printed)
    if text is None:
        return None
    ok, answered, named = answer_of(engine, entry, text)
    return Checked(entry, wording, carrier.name, ok, answered, named)


def sampled(entries: Iterable[InventoryEntry], percent: int) -> list[InventoryEntry]:
    """The entries whose key hashes into the first `percent` of 100 (the same every run)."""
    if percent >= 100:
        return list(entries)
    return [e for e in entries if zlib.crc32(e.key.encode()) % 100 < percent]


def run(engine: Engine, entries: Iterable[InventoryEntry]) -> tuple[Checked, ...]:
    checked: list[Checked] = []
    for entry in entries:
        carriers = carriers_of(entry)
        for wording in range(len(entry.wordings)):
            for carrier in carriers:
                outcome = check(engine, entry, wording, carrier)
                if outcome is not None:
                    checked.append(outcome)
    return tuple(checked)


def rows(entries: Sequence[InventoryEntry], checked: Sequence[Checked]) -> dict[str, Row]:
    """Per project: messages, wordings, verdicts, texts checked and recognized."""
    table: dict[str, Row] = {}
    for e in entries:
        row = table.get(e.project, Row())
        table[e.project] = Row(
            row.messages + 1,
            row.wordings + len(e.wordings),
            row.classified + (e.verdict not in (NONE, UNCLASSIFIED)),
            row.benign + (e.verdict == NONE),
            row.texts,
            row.recognized,
        )
    for c in checked:
        row = table[c.entry.project]
        table[c.entry.project] = Row(
            row.messages, row.wordings, row.classified, row.benign,
            row.texts + 1, row.recognized + c.ok,
        )  # fmt: skip
    return dict(sorted(table.items()))


def report_lines(entries: Sequence[InventoryEntry], checked: Sequence[Checked]) -> list[str]:
    """Per project and in total, then every entry with a miss: one line each, the carriers
    it missed in and what pitcrew answered."""
    table = rows(entries, checked)
    head = (
        f"{'inventory':<14} {'messages':>8} {'wordings':>8} {'class':>6} {'none':>5} "
        f"{'unclass.':>8} {'verdict':>8} {'texts':>7} {'recognized':>10}"
    )
    lines = ["", head]
    total = Row()
    for project, r in table.items():
        lines.append(_row(project, r))
        total = Row(*(getattr(total, f) + getattr(r, f) for f in Row.__slots__))
    lines.append(_row("total", total))
    lines.extend(_misses(checked))
    return lines


def _row(name: str, r: Row) -> str:
    unclassified = r.messages - r.classified - r.benign
    return (
        f"{name:<14} {r.messages:>8} {r.wordings:>8} {r.classified:>6} {r.benign:>5} "
        f"{unclassified:>8} {100 * r.with_class:>7.1f}% {r.texts:>7} {100 * r.share:>9.1f}%"
    )


def _misses(checked: Sequence[Checked]) -> list[str]:
    by_entry: dict[str, list[Checked]] = {}
    for c in checked:
        if not c.ok:
            by_entry.setdefault(c.entry.key, []).append(c)
    if not by_entry:
        return []
    lines = ["", f"inventory misses ({len(by_entry)} messages; wanted: the verdict):"]
    for key, missed in by_entry.items():
        entry = missed[0].entry
        answers = sorted({c.answered for c in missed})
        carriers = sorted({c.carrier for c in missed})
        lines.append(
            f"  {key}  wanted {entry.verdict}, answered {'/'.join(answers)}"
            f"  in {len(carriers)} carrier(s): {', '.join(carriers)}"
        )
    return lines
