"""Stuck RayJobs found, with their cause: a polled source over the watched namespaces.

Why this exists: a RayJob whose RayCluster never comes up stays `Initializing`, and one
whose head crashed stays `Running`, with nothing failing that a watch would see (KubeRay
notices the second only after `RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS`). Time passing is
the signal, so every `poll_interval` this source lists the RayJobs, asks
`bot.core.diagnosis.stuck` whether one has been stuck past its threshold and, when it has, hands
the pipeline one observation: the `ray_job` signal saying how it is stuck, with the
head pod's signals (`PodScheduled=False` Unschedulable, an image pull waiting …), the
RayCluster's (a `ReplicaFailure` on a refused quota), the submitter pods' (a submitter
crash-looping) and the recent Warning events about them, all carrying the RayJob as
their workload. The playbooks classify the cause, which outranks "stuck" on the card.

Each stuck state is reported once per RayJob attempt (`status.startTime`) and reason,
remembered in a bounded map. How long a state has lasted is timed on pitcrew's clock
from the poll that first saw it (a new attempt, a new `jobStatusCheckFailureStartTime`,
a head pod gone or its Ready condition's new `lastTransitionTime` is a new state); a
state already so at the source's first look is dated back by the age the API server's
own clock gives it (`KubeApi.server_time`, less the state's timestamp). Durations are
never pitcrew's clock less a timestamp another clock wrote
(`bot.core.diagnosis.stuck.began`).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.adapters.kubernetes.api import EVENTS, PODS, RAY_CLUSTERS, RAY_JOBS, KubeApi
from bot.adapters.kubernetes.errors import KubeApiError
from bot.core.diagnosis.stuck import Head, Since, Stuck, Thresholds, began, verdict
from bot.core.inputs import InputPart
from bot.core.inputs.events import event_signal
from bot.core.inputs.kuberay import raycluster_parts, rayjob_parts
from bot.core.inputs.pods import pod_signals
from bot.core.inputs.values import as_list, as_map, parse_time, text_at
from bot.core.model import ObjectRef, Signal, SourceKind
from bot.daemon.feed import Context, observe
from bot.daemon.ports import Sink

log = logging.getLogger("bot.adapters.kuberay.stuck")

_MAX_REMEMBERED = 4096
_MAX_EVENTS = 10
_CANDIDATES = frozenset({"Initializing", "Running"})


class StuckRayJobSource:
    """Polled by the scheduler every `poll_interval`; `start`/`stop` only mark it live."""

    name = "rayjob-stuck"

    def __init__(
        self,
        api: KubeApi,
        sink: Sink,
        namespaces: Sequence[str],
        thresholds: Thresholds,
        poll_interval: timedelta,
        k8s_cluster: str = "",
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.api = api
        self.sink = sink
        self.namespaces: tuple[str | None, ...] = tuple(namespaces) or (None,)
        self.thresholds = thresholds
        self.poll_interval = poll_interval
        self.k8s_cluster = k8s_cluster
        self.clock = clock
        self._reported: OrderedDict[tuple[str, str, str], None] = OrderedDict()
        # each watched RayJob's states as first seen: (state, what identifies it) -> began
        self._seen: dict[str, dict[tuple[str, str], datetime]] = {}
        self._server_now: datetime | None = None  # the API server's clock, at the first look
        self._first_look = True
        self._lock = threading.Lock()
        self._ok = True
        self.counters = {"polls": 0, "reported": 0, "errors": 0}

    def start(self) -> None:
        with self._lock:
            self._first_look = True  # a new leader's first look dates what it finds

    def stop(self) -> None:
        return None

    def healthy(self) -> bool:
        return self._ok

    def poll(self) -> None:
        """One look at every RayJob of the watched namespaces."""
        with self._lock:
            self.counters["polls"] += 1
            self._server_now = self.api.server_time() if self._first_look else None
            try:
                listed: set[str] = set()
                for namespace in self.namespaces:
                    for rayjob in self.api.list_all(RAY_JOBS, namespace):
                        listed.add(self._look(rayjob))
                self._seen = {key: self._seen[key] for key in listed if key in self._seen}
                self._ok, self._first_look = True, False
            except KubeApiError as error:
                self._ok = False
                self.counters["errors"] += 1
                log.warning("stuck RayJobs: cannot list RayJobs: %s", error)
            except Exception:  # a bug: logged with its traceback, counted, next poll tries again
                self._ok = False
                self.counters["errors"] += 1
                log.exception("stuck RayJobs: the poll failed")

    def _look(self, rayjob: Mapping[str, Any]) -> str:
        """Report the RayJob if it is stuck; returns its key ("" without one)."""
        parts = rayjob_parts(rayjob)
        signal = next((p for p in parts if isinstance(p, Signal)), None)
        if signal is None or signal.obj is None:
            return ""
        key, fields = str(signal.obj), signal.fields
        if fields.get("job_deployment_status") not in _CANDIDATES:
            self._seen.pop(key, None)
            return key
        now = self.clock()
        head_pod = self._head_pod(signal.obj.namespace, fields.get("ray_cluster", ""))
        states = self._states(key, fields, head_pod, now)
        since = Since(states.get("initializing"), states.get("dashboard"))
        found = verdict(
            fields, self._head(head_pod, states.get("head")), now, self.thresholds, since
        )
        if found is not None:
            self._report(signal, found, head_pod)
        return key

    def _states(
        self, key: str, fields: Mapping[str, str], head_pod: Mapping[str, Any] | None, now: datetime
    ) -> dict[str, datetime]:
        """When each state the RayJob is in now began (`began`); states it left are forgotten."""
        found: dict[tuple[str, str], datetime | None] = {}  # (state, identity) -> its timestamp
        if fields.get("job_deployment_status") == "Initializing":
            started = fields.get("start_time", "")
            found["initializing", started] = parse_time(started)
        elif fields.get("status_check_failing_since"):
            failing = fields["status_check_failing_since"]
            found["dashboard", failing] = parse_time(failing)
        if head_pod is None:
            found["head", "absent"] = None
        elif not _ready(head_pod):
            since = text_at(_ready_condition(head_pod), "lastTransitionTime")
            stamp = since or text_at(head_pod, "metadata", "creationTimestamp")
            found["head", f"{text_at(head_pod, 'metadata', 'uid')} {since}"] = parse_time(stamp)
        seen = self._seen.setdefault(key, {})
        for state in [s for s in seen if s not in found]:
            del seen[state]
        for state, stamped in found.items():
            if state not in seen:
                seen[state] = began(now, stamped, self._server_now)
        return {state: at for (state, _), at in seen.items()}

    def _report(self, signal: Signal, found: Stuck, head_pod: Mapping[str, Any] | None) -> None:
        """One observation for the pipeline, once per RayJob attempt and reason."""
        assert signal.obj is not None
        key = (str(signal.obj), signal.fields.get("start_time", ""), found.reason)
        if key in self._reported:
            return
        self._reported[key] = None
        while len(self._reported) > _MAX_REMEMBERED:
            self._reported.popitem(last=False)
        evidence = self._evidence(signal, head_pod)
        stuck = _stuck_signal(signal, found, head_pod, self.k8s_cluster)
        context = Context(self.k8s_cluster, signal.obj.namespace, signal.obj)
        if self.sink.submit(observe([stuck, *evidence], context)):
            self.counters["reported"] += 1
            log.info("%s", found.text)
        else:
            self._reported.pop(key, None)  # the queue was full: the next poll tries again

    def _head_pod(self, namespace: str, cluster: str) -> Mapping[str, Any] | None:
        if not cluster:
            return None
        selector = f"ray.io/cluster={cluster},ray.io/node-type=head"
        pods = list(self.api.list_all(PODS, namespace, label_selector=selector))
        alive = [p for p in pods if not text_at(p, "metadata", "deletionTimestamp")]
        return alive[0] if alive else None

    @staticmethod
    def _head(pod: Mapping[str, Any] | None, since: datetime | None) -> Head:
        if pod is None:
            return Head(present=False, since=since)
        return Head(
            present=True,
            ready=_ready(pod),
            phase=text_at(pod, "status", "phase"),
            since=since,
        )

    def _evidence(self, signal: Signal, head_pod: Mapping[str, Any] | None) -> list[InputPart]:
        """What says why: the head pod's state, the RayCluster's, their Warning events."""
        assert signal.obj is not None
        namespace = signal.obj.namespace
        cluster_name = signal.fields.get("ray_cluster", "")
        found: list[Signal] = []
        names = {cluster_name} if cluster_name else set()
        if head_pod is not None:
            found.extend(pod_signals(head_pod, origin="stuck RayJob: head pod"))
            names.add(text_at(head_pod, "metadata", "name"))
        if cluster_name:
            try:
                cluster = self.api.get(RAY_CLUSTERS, namespace, cluster_name)
            except KubeApiError:
                cluster = None
            if cluster is not None:
                found.extend(
                    p
                    for p in raycluster_parts(cluster, "stuck RayJob: RayCluster")
                    if isinstance(p, Signal) and p.reason.lower() != "ready"
                )
        for pod in self._submitters(namespace, signal.fields.get("rayjob", "")):
            found.extend(pod_signals(pod, origin="stuck RayJob: submitter pod"))
            names.add(text_at(pod, "metadata", "name"))
        found.extend(self._events(namespace, names))
        return [_owned(s, signal, self.k8s_cluster) for s in found]

    def _submitters(self, namespace: str, rayjob: str) -> Sequence[Mapping[str, Any]]:
        """The RayJob's submitter pods (K8sJobMode: its Kubernetes Job has its name)."""
        if not rayjob:
            return []
        selector = f"batch.kubernetes.io/job-name={rayjob}"
        try:
            return list(self.api.list_all(PODS, namespace, label_selector=selector))[:3]
        except KubeApiError:
            return []

    def _events(self, namespace: str, names: set[str]) -> Iterable[Signal]:
        if not names:
            return []
        try:
            page = self.api.list(EVENTS, namespace, limit=500)
        except KubeApiError:
            return []
        about = [
            e
            for e in as_list(page.get("items"))
            if text_at(e, "type") == "Warning" and text_at(e, "involvedObject", "name") in names
        ]
        about.sort(key=lambda e: text_at(e, "lastTimestamp") or text_at(e, "eventTime"))
        return [event_signal(e, origin="stuck RayJob: events") for e in about[-_MAX_EVENTS:]]


def _ready_condition(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    conditions = as_list(as_map(pod.get("status")).get("conditions"))
    return next((as_map(c) for c in conditions if text_at(c, "type") == "Ready"), {})


def _ready(pod: Mapping[str, Any]) -> bool:
    return text_at(_ready_condition(pod), "status") == "True"


def _owned(signal: Signal, rayjob: Signal, k8s_cluster: str) -> Signal:
    """A head pod's or RayCluster's signal as the RayJob's evidence (the keys the
    Kubernetes source gives it through ownerReferences)."""
    extra = {
        "rayjob": rayjob.fields.get("rayjob", ""),
        "ray_cluster": rayjob.fields.get("ray_cluster", ""),
        "namespace": rayjob.fields.get("namespace", ""),
    }
    fields = {**{k: v for k, v in extra.items() if v}, **signal.fields}
    return dataclasses.replace(
        signal, workload=rayjob.obj, fields=fields, cluster=k8s_cluster or signal.cluster
    )


def _stuck_signal(
    rayjob: Signal, found: Stuck, head_pod: Mapping[str, Any] | None, k8s_cluster: str
) -> Signal:
    fields = dict(rayjob.fields)
    fields["stuck_since"] = found.since.isoformat()
    if head_pod is not None:
        fields["head_pod"] = text_at(head_pod, "metadata", "name")
        fields["head_phase"] = text_at(head_pod, "status", "phase")
    obj: ObjectRef | None = rayjob.obj
    return Signal(
        source=SourceKind.RAY_JOB,
        text=found.text,
        reason=found.reason,
        fields=fields,
        obj=obj,
        workload=obj,
        cluster=k8s_cluster,
        origin="stuck RayJob",
    )
