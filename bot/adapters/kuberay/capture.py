"""Evidence that outlives the cluster: one bounded bundle of a failing RayJob or RayCluster.

Why this exists: KubeRay deletes a RayJob's RayCluster after the failure
(`shutdownAfterJobFinishes`, a `deletionStrategy` rule, or the `Retrying` of a
`backoffLimit` retry), and the driver log, the dead actors' causes and the worker pods'
last words go with it (kuberay#3884, #3966, #1047). On the first failure signal the
daemon (`bot.daemon.capture`) asks this collector, off the pipeline thread, for what a
person would look at, while the objects still exist:

- `rayjob.yaml`, `raycluster.yaml`: the objects with their status;
- `pods/<pod>.yaml` for each pod of the RayCluster (and the RayJob's submitter), and
  `pods/<pod>.<container>.log` with the previous container's log tail for a container
  that restarted (the current one's for one that terminated);
- `events.txt`: the namespace's events about them, oldest first;
- `driver.log`: the Ray job's driver log (Jobs API), its first and last half of
  `file_limit` when it is longer, with a line saying how much was left out between;
- `actors.json`: the dead actors of the Ray job and their death causes (State API).

Each file is cut to `file_limit` bytes (a log keeps its tail, below a first line naming
its pod and container); the tar.gz is at most `total_limit` bytes, its own headers and
compression counted, and `README.txt` names the files left out to keep it there. A
member is named from the pod's and container's names cleaned (`Bundle.member`): no name
the API returns can make a member that extracts outside its folder. Each part that
cannot be read says why in `README.txt` instead: a bundle is never refused.
"""

from __future__ import annotations

import io
import json
import tarfile
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from bot.adapters.kubernetes.api import EVENTS, PODS, RAY_CLUSTERS, RAY_JOBS, KubeApi
from bot.adapters.kubernetes.errors import KubeApiError
from bot.adapters.ray.client import RayDashboard
from bot.core.inputs.ray_actors import ActorInfo
from bot.core.inputs.values import as_list, as_map, text_at
from bot.core.text import file_name, for_terminal

FILE_LIMIT = 256 * 1024
TOTAL_LIMIT = 1024 * 1024
_LOG_LINES = 2000
_BETWEEN = 256  # room for the driver log's line between its head and its tail
_MAX_PODS = 20
_MAX_EVENTS = 200

Dashboard = Callable[[Mapping[str, Any]], RayDashboard | None]
"""The dashboard of a RayCluster object (its head service), or None when it has none."""


@dataclass
class Bundle:
    """The files collected so far, and what could not be.

    A member's name is pitcrew's own (`driver.log`) or made by `member` from the API's
    identifiers, each cleaned by `bot.core.text.file_name`: no `/`, `..`, control character
    or absolute path from a pod's or a container's name reaches the archive, and two
    identifiers never share a member."""

    files: dict[str, bytes] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)  # member -> what it was named for

    def member(self, folder: str, identifiers: Iterable[str], suffix: str) -> str:
        """`folder/<identifier>.<identifier>…<suffix>`, each identifier cleaned; when one had
        to change, the member and the identifiers it stands for are listed in README.txt."""
        real = tuple(identifiers)
        name = f"{folder}/{'.'.join(file_name(i) for i in real)}{suffix}"
        if any(file_name(i) != i for i in real):
            self.renamed[name] = " ".join(repr(i) for i in real)
        return name

    def add(self, name: str, data: bytes, limit: int, tail: bool = False, note: str = "") -> None:
        """`data` as member `name`, cut to `limit` bytes (its tail kept with `tail`); `note`
        is a first line kept above what is cut (what the file is, with the real names)."""
        head = f"# {note}\n".encode() if note else b""
        room = max(limit - len(head), 0)
        if len(data) > room:
            data = data[-room:] if tail else data[:room]
        self.files[name] = head + data

    def packed(self, total_limit: int, summary: str) -> bytes:
        """A tar.gz of the files with README.txt, at most `total_limit` bytes whole (its
        headers and compression included): the files that fit, by name, each taken whole
        or left out and named in README.txt."""
        names = sorted(self.files)
        room = total_limit - _cost(self._readme("x" * 200, names)) - _ARCHIVE_OVERHEAD
        kept = _fitting({n: self.files[n] for n in names}, room)
        while True:
            left_out = [n for n in names if n not in kept]
            body = _tar_gz([(n, self.files[n]) for n in kept], self._readme(summary, left_out))
            if len(body) <= total_limit or not kept:
                return body
            kept.pop()  # the estimate was short: the last file goes, and it is packed again

    def _readme(self, summary: str, left_out: list[str]) -> bytes:
        notes = [summary, *self.problems]
        notes += [f"{member} is named for {real}" for member, real in sorted(self.renamed.items())]
        if left_out:
            notes.append(f"left out to keep the bundle under its cap: {', '.join(left_out)}")
        return for_terminal("\n".join(notes) + "\n").encode()[:_README_LIMIT]


_README_LIMIT = 8 * 1024
_ARCHIVE_OVERHEAD = 64  # gzip's header and trailer, the archive's end blocks, compressed
_MEMBER_OVERHEAD = 64  # a member's 512-byte header, compressed


def _cost(data: bytes) -> int:
    """What a member adds to the tar.gz, about: its data compressed alone, and its header."""
    return len(zlib.compress(data, 9)) + _MEMBER_OVERHEAD


def _fitting(files: Mapping[str, bytes], room: int) -> list[str]:
    """The files that fit in `room` bytes, in order, skipping each that does not."""
    kept: list[str] = []
    for name, data in files.items():
        cost = _cost(data)
        if cost <= room:
            kept.append(name)
            room -= cost
    return kept


def _tar_gz(files: Iterable[tuple[str, bytes]], readme: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files:
            _put(tar, name, data)
        _put(tar, "README.txt", readme)
    return buffer.getvalue()


def _put(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(time.time())
    tar.addfile(info, io.BytesIO(data))


class EvidenceCollector:
    """Reads a RayJob's or RayCluster's evidence from Kubernetes and its dashboard."""

    def __init__(
        self,
        api: KubeApi,
        dashboard: Dashboard,
        *,
        file_limit: int = FILE_LIMIT,
        total_limit: int = TOTAL_LIMIT,
        cluster: str = "",
    ) -> None:
        """`cluster`: this pitcrew's, named in each bundle's README.txt."""
        self.api = api
        self.cluster = cluster
        self.dashboard = dashboard
        self.file_limit = file_limit
        self.total_limit = total_limit

    def collect(self, kind: str, namespace: str, name: str) -> bytes:
        """The tar.gz bundle of a `RayJob` or `RayCluster` (`kind`) as it is now."""
        bundle = Bundle()
        rayjob = self._get(bundle, RAY_JOBS, namespace, name) if kind == "RayJob" else None
        cluster_name = name if kind == "RayCluster" else text_at(rayjob, "status", "rayClusterName")
        if rayjob is not None:
            bundle.add("rayjob.yaml", _yaml(rayjob), self.file_limit)
        cluster = self._get(bundle, RAY_CLUSTERS, namespace, cluster_name) if cluster_name else None
        if cluster is not None:
            bundle.add("raycluster.yaml", _yaml(cluster), self.file_limit)
        pods = self._pods(bundle, namespace, cluster_name, name if rayjob is not None else "")
        self._events(
            bundle, namespace, {name, cluster_name, *(text_at(p, "metadata", "name") for p in pods)}
        )
        if cluster is not None:
            self._ray(bundle, cluster, text_at(rayjob, "status", "jobId"))
        summary = (
            f"pitcrew evidence bundle of {kind} {namespace}/{name}"
            + (f" on cluster {self.cluster}" if self.cluster else "")
            + (f" (RayCluster {cluster_name})" if cluster_name and kind == "RayJob" else "")
            + f": {len(bundle.files)} files"
        )
        return bundle.packed(self.total_limit, summary)

    def _get(
        self, bundle: Bundle, resource: Any, namespace: str, name: str
    ) -> Mapping[str, Any] | None:
        try:
            found = self.api.get(resource, namespace, name)
        except KubeApiError as error:
            bundle.problems.append(f"{resource.kind} {namespace}/{name}: {error}")
            return None
        if found is None:
            bundle.problems.append(f"{resource.kind} {namespace}/{name}: gone")
        return found

    def _pods(
        self, bundle: Bundle, namespace: str, cluster_name: str, rayjob: str
    ) -> list[Mapping[str, Any]]:
        selectors = [f"ray.io/cluster={cluster_name}"] if cluster_name else []
        if rayjob:
            selectors.append(f"batch.kubernetes.io/job-name={rayjob}")
        pods: list[Mapping[str, Any]] = []
        for selector in selectors:
            try:
                pods.extend(self.api.list_all(PODS, namespace, label_selector=selector))
            except KubeApiError as error:
                bundle.problems.append(f"pods {selector}: {error}")
        for pod in pods[:_MAX_PODS]:
            pod_name = text_at(pod, "metadata", "name")
            bundle.add(bundle.member("pods", [pod_name], ".yaml"), _yaml(pod), self.file_limit)
            for container, previous in _logs_worth_reading(pod):
                self._pod_log(bundle, namespace, pod_name, container, previous)
        return pods

    def _pod_log(
        self, bundle: Bundle, namespace: str, pod: str, container: str, previous: bool
    ) -> None:
        which = "previous" if previous else "current"
        try:
            data = self.api.pod_log(
                namespace,
                pod,
                container,
                previous=previous,
                tail_lines=_LOG_LINES,
                limit_bytes=self.file_limit,
            )
        except KubeApiError as error:
            bundle.problems.append(f"log of {pod}/{container} ({which}): {error}")
            return
        name = bundle.member("pods", [pod, container], f".{which}.log")
        note = f"pitcrew: the {which} container's log of pod {pod!r}, container {container!r}"
        bundle.add(name, data, self.file_limit, tail=True, note=note)

    def _events(self, bundle: Bundle, namespace: str, names: set[str]) -> None:
        try:
            items = as_list(self.api.list(EVENTS, namespace, limit=1000).get("items"))
        except KubeApiError as error:
            bundle.problems.append(f"events of {namespace}: {error}")
            return
        about = [e for e in items if text_at(e, "involvedObject", "name") in names - {""}]
        about.sort(key=lambda e: text_at(e, "lastTimestamp") or text_at(e, "eventTime"))
        lines = [_event_line(e) for e in about[-_MAX_EVENTS:]]
        bundle.add("events.txt", ("\n".join(lines) + "\n").encode(), self.file_limit, tail=True)

    def _ray(self, bundle: Bundle, cluster: Mapping[str, Any], submission: str) -> None:
        dashboard = self.dashboard(cluster)
        if dashboard is None:
            bundle.problems.append("Ray dashboard: the RayCluster has no head service to ask")
            return
        try:
            if submission:
                ends = (self.file_limit - _BETWEEN) // 2
                logs = dashboard.job_logs_ends(submission, ends)
                bundle.add("driver.log", logs, self.file_limit, tail=True)
                job = dashboard.get_job(submission) or {}
                job_id = str(job.get("job_id") or "")
                dead = dashboard.actors(state="DEAD", job_id=job_id or None)
                rows = [_actor_row(a) for a in dead]
                bundle.add("actors.json", json.dumps(rows, indent=1).encode(), self.file_limit)
        except Exception as error:  # the dashboard's own errors: said in README.txt
            bundle.problems.append(f"Ray dashboard: {error}")
        finally:
            dashboard.close()


def _logs_worth_reading(pod: Mapping[str, Any]) -> Iterable[tuple[str, bool]]:
    for status in as_list(as_map(pod.get("status")).get("containerStatuses")):
        name = text_at(status, "name")
        if as_map(as_map(status).get("lastState")).get("terminated"):
            yield name, True
        if as_map(as_map(status).get("state")).get("terminated"):
            yield name, False


def _event_line(event: Mapping[str, Any]) -> str:
    when = text_at(event, "lastTimestamp") or text_at(event, "eventTime")
    involved = (
        f"{text_at(event, 'involvedObject', 'kind')}/{text_at(event, 'involvedObject', 'name')}"
    )
    count = text_at(event, "count")
    return (
        f"{when} {text_at(event, 'type')} {text_at(event, 'reason')} {involved}"
        + (f" (x{count})" if count and count != "1" else "")
        + f": {text_at(event, 'message')}"
    )


def _actor_row(actor: ActorInfo) -> dict[str, Any]:
    return {
        "actor_id": actor.actor_id,
        "class_name": actor.class_name,
        "name": actor.name,
        "state": actor.state,
        "pid": actor.pid,
        "node_id": actor.node_id,
        "num_restarts": actor.num_restarts,
        "death_cause": {
            "kind": actor.death_kind,
            "reason": actor.death_reason,
            "message": actor.death_message,
        },
    }


def _yaml(obj: Mapping[str, Any]) -> bytes:
    return yaml.safe_dump(dict(obj), sort_keys=False).encode()
