"""`pitcrew playbooks coverage`: every catalogue entry, in every wording and every
carrier, must classify to its class.

Why this exists: the catalogue (`bot.core.quality.catalogue`) records what the systems
print; this is where the playbooks are held to it. Each wording of each entry (what
one range of releases printed) is filled,
carried the ways its `kind` reaches a user (`bot.core.quality.carriers`) and diagnosed
exactly as `pitcrew diagnose` would. It is recognized when its class is the
primary; when the entry's class is found but a class that precedes it in the
precedence (docs/failure-classes.md), or shares its rung, is primary (a symptom whose
cause the same text names), it is accepted as a finding and counted apart. Everything
else is a miss, listed with what pitcrew answered. Pure: entries and an engine in, a report out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from io import BytesIO

from bot.core.diagnosis.analysis import diagnose
from bot.core.diagnosis.engine import Engine
from bot.core.inputs.reader import read_stream
from bot.core.quality.carriers import CARRIERS, Carrier
from bot.core.quality.catalogue import CatalogueEntry, Wording, fill
from bot.core.taxonomy import PRECEDENCE


class Verdict(StrEnum):
    RECOGNIZED = "recognized"
    AS_FINDING = "as-finding"
    MISS = "miss"


@dataclass(frozen=True, slots=True)
class Outcome:
    """One wording of an entry in one carrier: what pitcrew answered."""

    entry: CatalogueEntry
    wording: int
    """Which of the entry's wordings (`Entry.every_wording`) was carried."""
    carrier: str
    verdict: Verdict
    answered: str
    """The primary class pitcrew gave (`none` when nothing was found)."""
    signature_hit: bool
    """The signature the entry names matched this text."""
    text: str

    @property
    def label(self) -> str:
        """`file#id`, and for an entry of several wordings `~N (versions)` naming which."""
        entry = self.entry.entry
        if not entry.wordings:
            return self.entry.key
        return f"{self.entry.key}~{self.wording} ({entry.wordings[self.wording].versions})"


@dataclass(frozen=True, slots=True)
class Tally:
    texts: int = 0
    recognized: int = 0
    as_finding: int = 0

    @property
    def share(self) -> float:
        return (self.recognized + self.as_finding) / self.texts if self.texts else 1.0

    def add(self, verdict: Verdict) -> Tally:
        return Tally(
            self.texts + 1,
            self.recognized + (verdict is Verdict.RECOGNIZED),
            self.as_finding + (verdict is Verdict.AS_FINDING),
        )


@dataclass(frozen=True)
class Coverage:
    outcomes: tuple[Outcome, ...]
    unknown_signatures: tuple[str, ...]
    """`file#id: signature` for entries naming a signature the library does not have."""

    def by(self, key: str) -> dict[str, Tally]:
        tallies: dict[str, Tally] = {}
        for outcome in self.outcomes:
            name = outcome.carrier if key == "carrier" else str(outcome.entry.entry.category)
            tallies[name] = tallies.get(name, Tally()).add(outcome.verdict)
        return dict(sorted(tallies.items())) if key != "carrier" else tallies

    @property
    def total(self) -> Tally:
        tally = Tally()
        for outcome in self.outcomes:
            tally = tally.add(outcome.verdict)
        return tally

    @property
    def misses(self) -> tuple[Outcome, ...]:
        return tuple(o for o in self.outcomes if o.verdict is Verdict.MISS)

    @property
    def accepted(self) -> tuple[Outcome, ...]:
        return tuple(o for o in self.outcomes if o.verdict is Verdict.AS_FINDING)

    @property
    def wordings(self) -> int:
        """The wordings carried: every entry's, counted once whatever its carriers."""
        return len({(o.entry.key, o.wording) for o in self.outcomes})

    def entries_by(self, key: str) -> Counter[str]:
        seen = {o.entry.key: o.entry for o in self.outcomes}
        return Counter(
            str(e.entry.category) if key == "class" else e.project for e in seen.values()
        )

    @property
    def signature_drift(self) -> tuple[Outcome, ...]:
        """Bare texts recognized, but not by the signature the entry names."""
        return tuple(
            o
            for o in self.outcomes
            if o.carrier in ("bare", "describe-events", "status-yaml")
            and o.verdict is not Verdict.MISS
            and not o.signature_hit
        )


def rank(category: str) -> int:
    for rank, rung in enumerate(PRECEDENCE):
        if category in rung:
            return rank
    return len(PRECEDENCE)


def check(
    engine: Engine, item: CatalogueEntry, carrier: Carrier, wording: int = 0
) -> Outcome | None:
    """`item`'s `wording` carried by `carrier`, diagnosed; None when the carrier does not
    apply."""
    entry = item.entry
    chosen: Wording = entry.every_wording[wording]
    text = carrier.carry(entry, fill(entry, chosen))
    if text is None:
        return None
    hits = engine.hits(read_stream(BytesIO(text.encode("utf-8")), f"{item.key}@{carrier.name}"))
    result = diagnose(hits, engine.library)
    want = str(entry.category)
    primary = result.primary
    answered = str(primary.category) if primary else "none"
    if answered == want:
        verdict = Verdict.RECOGNIZED
    elif want in result.categories and rank(answered) <= rank(want):
        verdict = Verdict.AS_FINDING
    else:
        verdict = Verdict.MISS
    named = entry.signature
    signature_hit = any(f"{h.sig.playbook_id}/{h.sig.signature.name}" == named for h in hits)
    return Outcome(item, wording, carrier.name, verdict, answered, signature_hit, text)


def run(engine: Engine, entries: Iterable[CatalogueEntry]) -> Coverage:
    known = {
        f"{loaded.playbook.id}/{signature.name}"
        for loaded in engine.library.playbooks
        for signature in loaded.playbook.match
    }
    outcomes: list[Outcome] = []
    unknown: list[str] = []
    for item in entries:
        if item.entry.signature not in known:
            unknown.append(f"{item.key}: {item.entry.signature}")
        for wording in range(len(item.entry.every_wording)):
            for carrier in CARRIERS:
                if carrier.kind == item.entry.kind:
                    outcome = check(engine, item, carrier, wording)
                    if outcome is not None:
                        outcomes.append(outcome)
    return Coverage(tuple(outcomes), tuple(unknown))


def _row(name: str, entries: int | str, tally: Tally) -> str:
    found = f" ({tally.as_finding} as a finding)" if tally.as_finding else ""
    return f"{name:<32} {entries!s:>7} {tally.texts:>8} {100 * tally.share:>9.1f}%{found}"


def report_lines(coverage: Coverage, verbose: bool = False) -> list[str]:
    """The coverage for a terminal: per class, per carrier, in total, then every miss."""
    per_class = coverage.entries_by("class")
    header = f"{'class':<32} {'entries':>7} {'carriers':>8} {'recognized':>10}"
    lines = [header]
    lines.extend(_row(name, per_class[name], t) for name, t in coverage.by("class").items())
    total = coverage.total
    lines.append(_row("total", sum(per_class.values()), total))
    lines.append("")
    lines.append(f"{'carrier':<32} {'':>7} {'texts':>8} {'recognized':>10}")
    lines.extend(_row(name, "", t) for name, t in coverage.by("carrier").items())
    projects = coverage.entries_by("project")
    lines.append("")
    lines.append(
        "entries by project: " + ", ".join(f"{p} {n}" for p, n in sorted(projects.items()))
    )
    several = len({o.entry.key for o in coverage.outcomes if o.entry.entry.wordings})
    lines.append(
        f"wordings: {coverage.wordings} ({several} entries with more than one, read at"
        " their release tags)"
    )
    lines.extend(_listing("misses", coverage.misses, show_text=verbose))
    lines.extend(
        _listing(
            "accepted as a finding (a class at or above it in the precedence is primary)",
            coverage.accepted,
        )
    )
    if coverage.unknown_signatures:
        lines.append("")
        lines.append(
            f"entries naming a signature no playbook has ({len(coverage.unknown_signatures)}):"
        )
        lines.extend(f"  {u}" for u in coverage.unknown_signatures)
    drift = coverage.signature_drift
    if drift and verbose:
        lines.extend(_listing("recognized, but not by the signature named", drift))
    return lines


def _listing(title: str, outcomes: Sequence[Outcome], show_text: bool = False) -> list[str]:
    if not outcomes:
        return []
    lines = ["", f"{title} ({len(outcomes)}):"]
    for o in outcomes:
        lines.append(
            f"  {o.label}  {o.carrier}  wanted {o.entry.entry.category}, answered {o.answered}"
        )
        if show_text:
            lines.extend(f"      | {line}" for line in o.text.splitlines()[:12])
    return lines


def below(coverage: Coverage, floor: float) -> list[str]:
    """The carriers whose share recognized is under `floor` (0..1)."""
    return [
        f"{name}: {100 * t.share:.1f}% < {100 * floor:.0f}%"
        for name, t in coverage.by("carrier").items()
        if t.share < floor
    ]
