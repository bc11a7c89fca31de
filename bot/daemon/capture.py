"""Evidence bundles captured at a RayJob's or RayCluster's first failure signal, off the
pipeline thread, with a deadline.

Why this exists: KubeRay deletes a failed RayJob's RayCluster (`shutdownAfterJobFinishes`,
a `deletionStrategy` rule, each `backoffLimit` retry), and its driver log, dead actors
and pods go with it. When an incident about a RayJob or RayCluster opens, and again for
each new KubeRay attempt (a new RayCluster), the pipeline asks (`ask`, which only queues
the work); a pool thread of its own (`OffThread`) runs the collector (the kuberay
adapter's), keeps the bundle in the store and writes it where the chat can upload it,
and puts a `Captured` item back on the pipeline's queue (past `timeout`, one that says
the capture did not finish). The pipeline attaches the file to the card's thread once
the card is out. A capture that hangs costs one pool thread until its deadline, never
another workload's card.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime

from bot.core.model import Finding, Incident, SourceKind
from bot.core.text import file_name
from bot.daemon.feed import Captured
from bot.daemon.offthread import OffThread

log = logging.getLogger("pitcrew.capture")

KINDS = frozenset({"RayJob", "RayCluster"})

Collect = Callable[[str, str, str], bytes]
"""(kind, namespace, name) -> the tar.gz bundle of that RayJob or RayCluster as it is now."""
Save = Callable[[str, str, bytes, datetime], None]
"""(incident id, bundle name, body, when) -> kept in the store."""
Write = Callable[[str, str, bytes], str]
"""(incident id, bundle name, body) -> the path of a file the chat can upload."""


_FAILED = frozenset({"Failed", "Retrying", "ValidationFailed"})


def bundle_name(incident: Incident) -> str:
    """One bundle at the first failure signal (`first`), one when the RayJob itself is
    failed (`failed`: the moment before KubeRay deletes its cluster), and one per KubeRay
    attempt after that, named after the attempt's RayCluster (its name cleaned: it is a
    folder of `pitcrew bundle`'s tarball and part of a file's name)."""
    counted = [a for a in incident.attempts if a.number > 0]
    if counted:
        return f"{file_name(max(counted, key=lambda a: a.number).cluster)}.tar.gz"
    if any(_failed_rayjob(r.finding) for r in incident.diagnosis.findings):
        return "failed.tar.gz"
    return "first.tar.gz"


def _failed_rayjob(finding: Finding) -> bool:
    fields = finding.fields
    return finding.source is SourceKind.RAY_JOB and (
        fields.get("job_deployment_status") in _FAILED or fields.get("job_status") == "FAILED"
    )


class CaptureWorker:
    """Captures each failing RayJob's or RayCluster's evidence once per attempt."""

    def __init__(
        self,
        collect: Collect,
        save: Save,
        write: Write,
        submit: Callable[[Captured], bool],
        *,
        timeout: float = 30.0,
        workers: int = 2,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._collect = collect
        self._save = save
        self._write = write
        self._clock = clock
        self.timeout = timeout
        self._work = OffThread(submit, name="pitcrew-capture", workers=workers)
        self._asked: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def ask(self, incident: Incident) -> bool:
        """Queue a capture of the incident's workload, once per attempt; returns at once."""
        workload = incident.workload
        if workload is None or workload.kind not in KINDS or not workload.name:
            return False
        name = bundle_name(incident)
        with self._lock:
            if (incident.id, name) in self._asked:
                return False
            self._asked.add((incident.id, name))
        target = (workload.kind, workload.namespace or incident.namespace, workload.name)

        def late(why: str) -> Captured:
            return Captured(incident.id, problem=f"no evidence bundle: the capture {why}")

        what = f"the evidence bundle of {incident.id}"
        return self._work.run(
            lambda: self._run(incident.id, name, target), late, self.timeout, what
        )

    def close(self, wait: bool = True) -> None:
        self._work.close(wait=wait)

    def _run(self, incident_id: str, name: str, target: tuple[str, str, str]) -> Captured:
        kind, namespace, workload = target
        try:
            body = self._collect(kind, namespace, workload)
            self._save(incident_id, name, body, self._clock())
            path = self._write(incident_id, name, body)
        except Exception as error:  # a bug or an I/O error: logged with its traceback
            log.exception("the evidence bundle of %s failed", incident_id)
            return Captured(incident_id, problem=f"no evidence bundle: {error}")
        text = (
            f"Evidence bundle of {kind} {namespace}/{workload} ({len(body) / 1024:.1f} KiB, "
            f"kept after the cluster is gone): `pitcrew bundle {incident_id}`"
        )
        return Captured(incident_id, path, text)
