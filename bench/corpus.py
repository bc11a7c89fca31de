"""Diagnosis accuracy on labelled real-world failure text: the development corpora,
the held-out one (tests/data/corpus/holdout.jsonl) and the first-seen batches
(tests/data/corpus/first_seen/), side by side.

The held-out corpus is real failure text from public issue threads that the
development corpus does not cite; a signature written for one row's words
scores on the first and not on the second, so the gap between the two lines
is the measure of how well the playbooks generalize. The metrics are those of
the shared scorer (`score-corpus`): `accuracy` (primary equals the label,
`none` expects no finding), `accuracy_clear` (over rows not marked ambiguous),
`secondary_recall` (labelled secondary found among primary and secondary),
`unsafe` (offered actions wrong for the label), `errors`, `oot_said_unknown`
(rows labelled `out_of_taxonomy`, a real failure no class covers, answered
"pitcrew does not know this failure" with its lines: right, and counted as hits),
`false_alarms` (healthy rows given a class) and `unknown_alarms` (healthy rows
answered "does not know"). The engine runs in-process on each row's text,
exactly as `pitcrew diagnose -` reads it.

    .venv/bin/python bench/corpus.py [CORPUS.jsonl ...] [--details]

Without arguments it scores the shared development corpora when present
(`../shared/corpus/dev.jsonl` and `dev2.jsonl` beside the checkout), the
held-out corpus and every first-seen batch. One line per corpus:
`corpus=NAME accuracy=… accuracy_clear=… secondary_recall=… unsafe=N errors=N
n=N n_clear=N oot_said_unknown=N/N false_alarms=N/N unknown_alarms=N/N`.
"""

from __future__ import annotations

import argparse
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.adapters.files.playbooks import builtin_engine
from bot.core.diagnosis.engine import Engine, to_json
from bot.core.errors import PitcrewError
from bot.core.inputs.reader import read_stream

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT / "tests" / "data" / "corpus"
HOLDOUT = CORPORA / "holdout.jsonl"
FIRST_SEEN = CORPORA / "first_seen"
SHARED_CANDIDATES = (ROOT.parent / "shared" / "corpus", ROOT.parent.parent / "shared" / "corpus")
SHARED_NAMES = ("dev.jsonl", "dev2.jsonl")
MEMORY = {"pod_oom_killed", "ray_memory_monitor_oom"}
OOT = "out_of_taxonomy"
"""The label of a real failure no class covers: the right answer is "does not know"."""


@dataclass
class Score:
    n: int = 0
    ok: int = 0
    n_clear: int = 0
    ok_clear: int = 0
    sec_total: int = 0
    sec_found: int = 0
    unsafe: int = 0
    errors: int = 0
    oot: int = 0
    oot_ok: int = 0
    healthy: int = 0
    alarms: int = 0
    unknown_alarms: int = 0
    misses: list[str] = field(default_factory=list)

    def line(self, name: str) -> str:
        acc = self.ok / self.n if self.n else 0.0
        clear = self.ok_clear / self.n_clear if self.n_clear else 0.0
        rec = self.sec_found / self.sec_total if self.sec_total else 1.0
        return (
            f"corpus={name} accuracy={acc:.3f} accuracy_clear={clear:.3f} "
            f"secondary_recall={rec:.3f} unsafe={self.unsafe} errors={self.errors} "
            f"n={self.n} n_clear={self.n_clear} oot_said_unknown={self.oot_ok}/{self.oot} "
            f"false_alarms={self.alarms}/{self.healthy} "
            f"unknown_alarms={self.unknown_alarms}/{self.healthy}"
        )


def unsafe_actions(label: str, out: dict[str, Any]) -> list[str]:
    """Offered actions that are wrong for the labelled case (the scorer's rule)."""
    bad = []
    for action in out.get("actions") or []:
        if not action.get("offered"):
            continue
        name = action.get("action", "")
        if (
            label in ("none", OOT)
            or (name == "ray.kill_actor" and label != "named_actor_conflict")
            or (name == "k8s.bump_memory" and label not in MEMORY)
        ):
            bad.append(name)
    return bad


def diagnose(engine: Engine, text: str) -> dict[str, Any]:
    return to_json(engine.diagnose(read_stream(io.BytesIO(text.encode()), "-")))


def score_row(engine: Engine, row: dict[str, Any], score: Score) -> None:
    score.n += 1
    try:
        out = diagnose(engine, row["text"])
    except PitcrewError as error:
        score.errors += 1
        score.misses.append(f"ERROR {row['id']}: {error}")
        return
    label = row["primary_class"]
    got = out.get("primary")
    hit = got == (None if label in ("none", OOT) else label)
    if label == OOT:
        hit = hit and bool(out.get("unknown"))
        score.oot += 1
        score.oot_ok += hit
    if label == "none":
        score.healthy += 1
        score.alarms += got is not None
        score.unknown_alarms += got is None and bool(out.get("unknown"))
    score.ok += hit
    if not row.get("ambiguous") and not row.get("not_ray_k8s"):
        score.n_clear += 1
        score.ok_clear += hit
    if row.get("secondary_class"):
        score.sec_total += 1
        score.sec_found += row["secondary_class"] in {got, *(out.get("secondary") or [])}
    bad = unsafe_actions(label, out)
    score.unsafe += len(bad)
    if not hit or bad:
        score.misses.append(
            f"{'MISS' if not hit else 'UNSAFE'} {row['id']}: want={label} got={got} "
            f"secondary={out.get('secondary')} unsafe={bad}"
        )


def score_corpus(engine: Engine, path: Path) -> Score:
    score = Score()
    for raw in path.read_text(encoding="utf-8").splitlines():
        if raw.strip():
            score_row(engine, json.loads(raw), score)
    return score


def shared_threads(corpora: list[Path]) -> list[str]:
    """Source URLs cited by more than one of the corpora."""
    seen: dict[str, Path] = {}
    reused = []
    for path in corpora:
        for raw in path.read_text(encoding="utf-8").splitlines():
            url = json.loads(raw)["source_url"] if raw.strip() else None
            if url and seen.setdefault(url, path) != path:
                reused.append(url)
    return reused


def default_corpora() -> list[Path]:
    shared = next((d for d in SHARED_CANDIDATES if d.is_dir()), None)
    dev = [shared / name for name in SHARED_NAMES if shared and (shared / name).is_file()]
    return [*dev, HOLDOUT, *sorted(FIRST_SEEN.glob("batch-*.jsonl"))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="*", type=Path)
    parser.add_argument("--details", action="store_true", help="list every miss")
    args = parser.parse_args()
    engine = builtin_engine([])
    corpora = args.corpora or default_corpora()
    reused = shared_threads(corpora)
    if reused:
        raise SystemExit(f"corpora share threads, so the held-out score is not held out: {reused}")
    for path in corpora:
        score = score_corpus(engine, path)
        if args.details:
            print("\n".join(score.misses))
        print(score.line(path.stem))


if __name__ == "__main__":
    main()
