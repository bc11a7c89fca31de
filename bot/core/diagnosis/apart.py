"""Which inputs of one `pitcrew diagnose` belong to the same workload.

Why this exists: a directory handed to `pitcrew diagnose` may hold the files of
two unrelated jobs (yesterday's OOM and today's image pull failure). Read as one
body of evidence, one job's failure is ranked as a symptom of the other's. Each
input is known by the names its matches carry: its objects and workloads (a pod,
a RayCluster, a RayJob) and the Ray submission ids in its lines; KubeRay names a
RayJob's cluster `<rayjob>-raycluster-<hash>` and its pods `<cluster>-<group>-…`,
so a name that begins with another's name and a dash is that one's. Inputs that
share a name are one workload; an input with no name joins the others when they
are one workload, and stands alone otherwise. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from bot.core.diagnosis.classifier import Hit

_SUBMISSION = re.compile(r"raysubmit_[A-Za-z0-9]+")
_NAMED_FIELDS = ("pod", "ray_cluster", "rayjob", "job_id", "submission_id")
MIN_NAME = 3


def names(hits: Iterable[Hit]) -> frozenset[str]:
    """The workload and object names, and Ray submission ids, an input's matches carry."""
    found: set[str] = set()
    for hit in hits:
        signal = hit.signal
        found.update(ref.name for ref in (signal.obj, signal.workload) if ref is not None)
        found.update(signal.fields[k] for k in _NAMED_FIELDS if signal.fields.get(k))
        for text, _ in hit.evidence:
            found.update(_SUBMISSION.findall(text))
    return frozenset(name for name in found if len(name) >= MIN_NAME)


def _related(a: frozenset[str], b: frozenset[str]) -> bool:
    return any(x == y or x.startswith(y + "-") or y.startswith(x + "-") for x in a for y in b)


def together(inputs: Mapping[str, frozenset[str]]) -> list[list[str]]:
    """The inputs (by name, in the given order) grouped by workload."""
    named = [name for name, found in inputs.items() if found]
    groups: list[list[str]] = []
    for name in named:
        joined = [g for g in groups if any(_related(inputs[name], inputs[m]) for m in g)]
        merged = [m for g in joined for m in g] + [name]
        groups = [g for g in groups if g not in joined] + [merged]
    unnamed = [name for name, found in inputs.items() if not found]
    if len(groups) <= 1:
        return [[name for name in inputs if not groups or name in groups[0] or name in unnamed]]
    order = list(inputs)
    result = sorted(groups, key=lambda g: min(order.index(m) for m in g)) + [[n] for n in unnamed]
    return [sorted(g, key=order.index) for g in result]


def apart(inputs: Sequence[tuple[str, Sequence[Hit]]]) -> list[list[str]]:
    """`together` over each input's names."""
    return together({name: names(hits) for name, hits in inputs})
