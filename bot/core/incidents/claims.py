"""A claim: what was seen alone turns out to be a workload's, so the incident it opened is
that workload's incident.

Why this exists: evidence often names less than its workload. A driver log names
its Ray submission, an alert names a pod or a node; the workload comes later, from
a RayJob's status (`bot.core.incidents.rayjob_owners.Owner`) or from the Kubernetes
watch's pod (`bot.core.incidents.placements.Placement`). Both are claims the
correlator (`Correlator.claim`) applies alike: the incident opened on the stray key
becomes the workload's (same incident, same card) or, when the workload has one
already, is merged into it and resolved, saying where.
"""

from __future__ import annotations

from typing import Protocol

from bot.core.incidents.workloads import Item
from bot.core.model import Finding, ObjectRef


class Claim(Protocol):
    """`stray_keys` (keys an incident may have been opened on) are `workload`'s."""

    @property
    def home_keys(self) -> tuple[str, ...]:
        """The keys of the workload's incident, its own first."""
        ...

    @property
    def stray_keys(self) -> tuple[str, ...]: ...

    @property
    def workload(self) -> ObjectRef: ...

    @property
    def cluster(self) -> str: ...

    @property
    def namespace(self) -> str: ...

    @property
    def ray_job_id(self) -> str: ...

    @property
    def why(self) -> str:
        """`Ray job X is RayJob ns/name's (its status.jobId)`: said when an incident is adopted."""
        ...

    @property
    def whose(self) -> str:
        """`Ray job X is RayJob ns/name's`: the resolution of an incident merged away."""
        ...

    @property
    def ours(self) -> str:
        """`Ray job X is this RayJob's`: noted on the incident another was merged into."""
        ...

    def belongs(self, item: Item) -> bool:
        """Nothing `item` says contradicts the claim (it may be moved to the workload)."""
        ...

    def complete(self, finding: Finding) -> Finding:
        """`finding` as the workload's."""
        ...
