"""Which RayJob owns a Ray job submission, as the RayJob's own status says.

Why this exists: evidence that names only its Ray submission id (a driver log
posted to `/ingest` with `workload=RayJobSubmission/raysubmit_…`, or whose
`Job '…' failed` line names it) belongs to the RayJob that submitted it, and
must join that RayJob's incident instead of opening one beside it. KubeRay
records the mapping in the RayJob's status (`status.jobId`, the submission id,
and `status.rayClusterName` in ray.io/v1); signals carry it as the fields
`rayjob`, `job_id` (or `submission_id`) and `ray_cluster`. The correlator
remembers the owners it was shown (`Owners`, bounded) and completes a finding
that names an owned submission, or the RayJob's RayCluster without naming a
cluster (a pasted `kubectl describe` of a worker pod), with its RayJob
(`complete`), whichever arrived first. Pure: values in, values out; nothing here
asks a cluster.
"""

from __future__ import annotations

import dataclasses
import re
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bot.core.incidents.workloads import (
    SUBMISSION_KIND,
    Item,
    cluster_of,
    key_of,
    namespace_of,
    submission_id,
)
from bot.core.inputs import InputPart
from bot.core.model import Finding, ObjectRef, Signal, frozen_map

MAX_OWNERS = 10_000
"""Submissions remembered; the least recently shown are forgotten first."""


@dataclass(frozen=True, slots=True)
class Owner:
    """The RayJob (on `cluster`) whose status names `submission` as its Ray job."""

    submission: str
    rayjob: ObjectRef
    cluster: str = ""
    ray_cluster: str = ""

    @property
    def home_keys(self) -> tuple[str, ...]:
        """The keys of the RayJob's incident: the RayJob's, then its RayCluster's."""
        keys = [key_of(self.cluster, self.rayjob)]
        if self.ray_cluster:
            cluster = ObjectRef("RayCluster", self.ray_cluster, self.rayjob.namespace)
            keys.append(key_of(self.cluster, cluster))
        return tuple(keys)

    @property
    def stray_keys(self) -> tuple[str, ...]:
        """The keys of an incident opened without the RayJob: on the submission id, or on
        the RayJob's RayCluster named on no cluster (a paste that named none)."""
        ref = ObjectRef(SUBMISSION_KIND, self.submission)
        keys = [key_of(self.cluster, ref), key_of("", ref)]
        if self.ray_cluster:
            keys.append(key_of("", ObjectRef("RayCluster", self.ray_cluster, self.namespace)))
        return tuple(k for k in dict.fromkeys(keys) if k not in self.home_keys)

    @property
    def namespace(self) -> str:
        return self.rayjob.namespace

    def describe(self) -> str:
        return f"RayJob {self.rayjob.namespace}/{self.rayjob.name}"

    # -- as a claim (bot.core.incidents.claims): an incident on the submission is the RayJob's

    @property
    def workload(self) -> ObjectRef:
        return self.rayjob

    @property
    def ray_job_id(self) -> str:
        return self.submission

    @property
    def why(self) -> str:
        return f"Ray job {self.submission} is {self.describe()}'s (its status.jobId)"

    @property
    def whose(self) -> str:
        return f"Ray job {self.submission} is {self.describe()}'s"

    @property
    def ours(self) -> str:
        return f"Ray job {self.submission} is this RayJob's"

    def belongs(self, item: Item) -> bool:
        return belongs(item, self)

    def complete(self, finding: Finding) -> Finding:
        return complete(finding, self)


def owners_named(parts: Iterable[InputPart], cluster: str = "") -> tuple[Owner, ...]:
    """The owners the signals among `parts` name: a RayJob status with its `jobId`, a Ray
    job whose metadata names its RayJob. `cluster` is where the sender saw them, for
    signals that do not say (a Kubernetes watch's RayJob)."""
    found: dict[str, Owner] = {}
    for part in parts:
        if not isinstance(part, Signal) or not part.fields.get("rayjob"):
            continue
        submission = submission_id(part)
        if not submission:
            continue
        found[submission] = Owner(
            submission=submission,
            rayjob=ObjectRef("RayJob", part.fields["rayjob"], namespace_of(part)),
            cluster=cluster_of(part) or cluster,
            ray_cluster=part.fields.get("ray_cluster", ""),
        )
    return tuple(found.values())


class Owners:
    """The owners seen so far, by submission id and by RayCluster (bounded by `limit`)."""

    def __init__(self, limit: int = MAX_OWNERS) -> None:
        self._by_id: OrderedDict[str, Owner] = OrderedDict()
        self._by_cluster: OrderedDict[tuple[str, str], Owner] = OrderedDict()
        self._limit = limit

    def __len__(self) -> int:
        return len(self._by_id)

    def is_news(self, owner: Owner) -> bool:
        """Whether `owner` is not known, or known otherwise."""
        return self._by_id.get(owner.submission) != owner

    def learn(self, owner: Owner) -> bool:
        """Remember `owner`; True when it is news (not known, or known otherwise)."""
        news = self.is_news(owner)
        _remember(self._by_id, owner.submission, owner, self._limit)
        if owner.ray_cluster:
            _remember(self._by_cluster, (owner.namespace, owner.ray_cluster), owner, self._limit)
        return news

    def of(self, item: Item) -> Owner | None:
        """The owner of the submission, else of the RayCluster, `item` names, unless `item`
        says it is elsewhere (another cluster, namespace, RayJob or RayCluster)."""
        submission = submission_id(item)
        owner = self._by_id.get(submission) if submission else None
        if owner is None:
            named = ray_cluster_of(item)
            owner = self._by_cluster.get((namespace_of(item), named)) if named else None
        if owner is None or not belongs(item, owner):
            return None
        return owner


def _remember(memory: OrderedDict[Any, Owner], key: Any, owner: Owner, limit: int) -> None:
    memory[key] = owner
    memory.move_to_end(key)
    while len(memory) > limit:
        memory.popitem(last=False)


def ray_cluster_of(item: Item) -> str:
    """The RayCluster `item` names: its field, else its workload or object."""
    if item.fields.get("ray_cluster"):
        return item.fields["ray_cluster"]
    for ref in (item.workload, item.obj):
        if ref is not None and ref.kind == "RayCluster":
            return ref.name
    return ""


def belongs(item: Item, owner: Owner) -> bool:
    """Nothing `item` says about where it is contradicts `owner`."""
    cluster, namespace = cluster_of(item), namespace_of(item)
    rayjob, ray_cluster = item.fields.get("rayjob", ""), ray_cluster_of(item)
    return (
        cluster in ("", owner.cluster)
        and namespace in ("", owner.namespace)
        and rayjob in ("", owner.rayjob.name)
        and (ray_cluster in ("", owner.ray_cluster) or not owner.ray_cluster)
    )


def complete(finding: Finding, owner: Owner) -> Finding:
    """`finding` as its owner's: the RayJob, its namespace, RayCluster and cluster added
    where the finding says none; its submission id kept as a field."""
    fields = dict(finding.fields)
    added = {
        "rayjob": owner.rayjob.name,
        "namespace": owner.rayjob.namespace,
        "ray_cluster": owner.ray_cluster,
        "submission_id": owner.submission,
    }
    for name, value in added.items():
        if value and not fields.get(name):
            fields[name] = value
    if not cluster_of(finding) and owner.cluster:
        fields["cluster"] = owner.cluster
    workload = finding.workload
    if workload is None or workload.kind == SUBMISSION_KIND:
        workload = owner.rayjob
    if fields == dict(finding.fields) and workload == finding.workload:
        return finding
    return dataclasses.replace(finding, fields=frozen_map(fields), workload=workload)


# What `ray job submit` and `ray job status` print about a job, wherever the line starts
# (a log prefix such as "2025-11-03 10:14:20,511 ERR cli.py:74 -- " comes first). Each
# begins with a literal, which `re` scans for quickly (an alternation first is ~20x slower).
_JOB_LINES = (
    re.compile(rb"Job '([\w.:-]{1,128})' (?:submitted successfully|succeeded|failed|was stopped)"),
    re.compile(rb"Status for job '([\w.:-]{1,128})': [A-Z]+"),
)


def sole_submission(parts: Iterable[InputPart]) -> ObjectRef | None:
    """The one Ray submission `parts` name (a pasted `ray job submit` output's
    `Job '…' submitted successfully` and `Job '…' failed`, a Ray job's status), or
    None when they name none or several: then the rest of the paste is about it too.
    Log chunks must be read already (`bot.daemon.feed.observe` reads them)."""
    named: set[str] = set()
    for part in parts:
        if isinstance(part, Signal):
            named.add(submission_id(part))
        elif isinstance(part.chunks, list | tuple):
            named.update(_named_in(part.chunks))
    named.discard("")
    return ObjectRef(SUBMISSION_KIND, named.pop()) if len(named) == 1 else None


def _named_in(chunks: Iterable[bytes]) -> set[str]:
    return {m[1].decode() for chunk in chunks for line in _JOB_LINES for m in line.finditer(chunk)}
