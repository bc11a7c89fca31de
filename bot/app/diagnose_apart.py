"""`pitcrew diagnose` of several files that are not one workload: one diagnosis each.

Why this exists: a directory may hold the files of unrelated jobs; diagnosed as one
body of evidence, one job's failure would be called a symptom of the other's.
`bot.core.diagnosis.apart` says which inputs belong together; this reads them (small files
only: they are read twice, once to name their workloads and once per group) and
diagnoses each group on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from io import BytesIO
from pathlib import Path

from bot.adapters.files.inputs import open_input
from bot.core.diagnosis.apart import apart
from bot.core.diagnosis.engine import Engine
from bot.core.inputs import InputPart
from bot.core.inputs.reader import WHOLE_LIMIT, Notice, read_stream
from bot.core.model import Diagnosis


def diagnose_apart(
    engine: Engine, names: Sequence[str], notice: Notice | None = None
) -> list[tuple[list[str], Diagnosis]] | None:
    """One diagnosis per workload when the files are of several; None when they are of
    one (or are standard input, or too large to read twice)."""
    if len(names) < 2 or "-" in names:
        return None
    if any(not Path(n).is_file() or Path(n).stat().st_size >= WHOLE_LIMIT for n in names):
        return None
    parts: dict[str, list[InputPart]] = {}
    for name in names:
        stream, origin, _ = open_input(name)
        with stream:
            parts[name] = list(read_stream(BytesIO(stream.read()), origin, notice=notice))
    groups = apart([(name, engine.hits(found)) for name, found in parts.items()])
    if len(groups) < 2:
        return None
    return [(group, engine.diagnose([p for n in group for p in parts[n]])) for group in groups]
