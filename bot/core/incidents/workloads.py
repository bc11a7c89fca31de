"""Which workload a finding or signal is about, as the keys incidents are grouped by.

Why this exists: one card per workload needs one identity per workload, whatever
names it (the owning workload a source resolved, the object itself, the fields
`rayjob`, `ray_cluster`, `submission_id`). The correlator (`bot.core.incidents.correlator`)
groups by these keys and the HTTP ingest names the kinds. Pure.
"""

from __future__ import annotations

from bot.core.model import Finding, ObjectRef, Signal

# Kinds that own the pods a failure shows up on, most encompassing first: a RayJob
# owns its RayCluster and its Ray job submission, so it names the incident when known.
WORKLOAD_KINDS: tuple[str, ...] = (
    "RayJob",
    "RayService",
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "CronJob",
    "Job",
    "RayCluster",
)
SUBMISSION_KIND = "RayJobSubmission"
_PRIORITY = {kind: i for i, kind in enumerate((*WORKLOAD_KINDS, SUBMISSION_KIND))}
_UNATTRIBUTED = "-"
LABEL_PREFIX = "label."

Item = Finding | Signal


def namespace_of(item: Item) -> str:
    for ref in (item.workload, item.obj):
        if ref is not None and ref.namespace:
            return ref.namespace
    return item.fields.get("namespace", "")


def cluster_of(item: Item) -> str:
    # Only fields, never `Signal.cluster`: findings carry fields but not the signal's
    # attribute, and a signal and its finding must key to the same incident. A Ray
    # cluster running on Kubernetes names that cluster (`k8s_cluster`), so its RayJob
    # keys alike whether the Ray source or the Kubernetes watch saw it.
    return item.fields.get("k8s_cluster") or item.fields.get("cluster", "")


def submission_id(item: Item) -> str:
    """The Ray job submission id a finding or signal names, if any (docs/signals.md)."""
    fields = item.fields
    if fields.get("submission_id"):
        return fields["submission_id"]
    if fields.get("rayjob") and fields.get("job_id"):
        return fields["job_id"]  # a RayJob's status.jobId is the submission id
    for ref in (item.workload, item.obj):
        if ref is not None and ref.kind == SUBMISSION_KIND:
            return ref.name
    return ""


def workload_refs(item: Item) -> tuple[ObjectRef, ...]:
    """Every workload a finding or signal names, most encompassing first.

    From the owning workload the source resolved, the object itself when it is a
    workload, and the fields `rayjob`, `ray_cluster` and `submission_id`. A Ray job
    submission has no Kubernetes namespace, so its reference has none either."""
    namespace = namespace_of(item)
    found: list[ObjectRef] = []
    for ref in (item.workload, item.obj):
        if ref is not None and ref.kind in _PRIORITY and ref.kind != SUBMISSION_KIND:
            found.append(ObjectRef(ref.kind, ref.name, ref.namespace or namespace))
    fields = item.fields
    if fields.get("rayjob"):
        found.append(ObjectRef("RayJob", fields["rayjob"], namespace))
    if fields.get("ray_cluster"):
        found.append(ObjectRef("RayCluster", fields["ray_cluster"], namespace))
    submission = submission_id(item)
    if submission:
        found.append(ObjectRef(SUBMISSION_KIND, submission))
    unique = list(dict.fromkeys(found))
    unique.sort(key=lambda ref: _PRIORITY[ref.kind])
    return tuple(unique)


def key_of(cluster: str, ref: ObjectRef) -> str:
    """The workload key of `ref` on `cluster`: `cluster/namespace/Kind/name`."""
    return f"{cluster}/{ref.namespace}/{ref.kind}/{ref.name}"


def workload_keys(item: Item) -> tuple[str, ...]:
    """The keys of every workload `item` names, most encompassing first; never empty.

    Without a workload, the object itself (a Pod without owner, a Node) is the key;
    without any reference, all unattributed findings of a namespace share one key."""
    cluster = cluster_of(item)
    refs = workload_refs(item)
    if refs:
        return tuple(key_of(cluster, ref) for ref in refs)
    if item.obj is not None:
        return (key_of(cluster, ObjectRef(item.obj.kind, item.obj.name, namespace_of(item))),)
    return (f"{cluster}/{namespace_of(item)}/{_UNATTRIBUTED}/{_UNATTRIBUTED}",)


def workload_from_key(key: str) -> ObjectRef | None:
    _, namespace, kind, name = key.split("/", 3)
    return None if kind == _UNATTRIBUTED else ObjectRef(kind, name, namespace)


def key_text(key: str) -> str:
    """A workload key as people read it: `namespace/kind/name`, or, for evidence that
    named no workload, the namespace and cluster it had (never `//-/-`)."""
    parts = key.split("/", 3)
    if len(parts) != 4:
        return key
    cluster, namespace, kind, name = parts
    if kind != _UNATTRIBUTED:
        return str(ObjectRef(kind, name, namespace))
    scope = [f"namespace {namespace}" if namespace else "", f"cluster {cluster}" if cluster else ""]
    shown = ", ".join(s for s in scope if s)
    return f"{shown} (no workload named)" if shown else "no workload named"
