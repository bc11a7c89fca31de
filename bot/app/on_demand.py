"""`/pitcrew diagnose`: a Ray job or a Kubernetes object diagnosed live, on request.

Why this exists: during an incident someone in the channel wants the verdict on a job or
object now, not at the next poll, and wants the card too. Wiring only:
`bot.adapters.ray.on_demand` and `bot.adapters.kubernetes.on_demand` fetch and diagnose (with the
live facts that decide guarded actions); this module picks where to look from the
settings (each enabled `sources.ray` cluster in turn, or the one named as
`cluster/job-id`; the Kubernetes API of `sources.kubernetes`), hands the evidence to the pipeline as
an `Observation` (the path the sources use, with the same cluster and namespace
context), so an incident card follows when there is a failure, and words the verdict in
a few plain lines (primary cause, secondary findings, offered actions).

It runs on the Slack app's worker pool, never on the ack path. Each call compiles its
own `Engine` from the shared library (a few milliseconds): Hyperscan's scratch space
must not be shared between threads, and the pipeline thread uses the daemon's engine.
Whatever goes wrong is said in the answer (`PitcrewError` text), never raised: the user
sees why nothing was found.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.adapters.files.playbooks import engine_of
from bot.adapters.ray.client import RayClusterConfig
from bot.adapters.ray.executor_base import RayClusters, RayExecutor
from bot.adapters.ray.executors import StopJobExecutor
from bot.adapters.ray.kill import KillActorExecutor
from bot.adapters.ray.on_demand import JobNotFoundError, diagnose_ray_job_on
from bot.adapters.ray.resubmit import ResubmitJobExecutor
from bot.adapters.slack.commands import DiagnoseTarget
from bot.app.factories import ray_cluster_configs
from bot.app.memory_wiring import fetcher, measured_by
from bot.app.settings.sections import Settings
from bot.core.actions.order import grouped
from bot.core.diagnosis.engine import Engine
from bot.core.diagnosis.unmatched import UNKNOWN
from bot.core.errors import PitcrewError
from bot.core.inputs import InputPart
from bot.core.model import Diagnosis, Signal
from bot.core.playbooks.library import Library
from bot.daemon.feed import Context, observe
from bot.daemon.ports import Clock, Sink, utcnow

if TYPE_CHECKING:  # the Kubernetes client is imported when a Kubernetes target is asked for
    from bot.adapters.kubernetes.api import KubeApi

log = logging.getLogger("pitcrew.diagnoser")

MAX_LISTED = 6  # secondary findings and actions shown in the answer
_KINDS = {"pod": "Pod", "rayjob": "RayJob", "raycluster": "RayCluster"}


@dataclass(frozen=True)
class Found:
    """One live diagnosis: what it was about, the verdict, the evidence behind it."""

    what: str  # "Ray job X on cluster Y: FAILED (message)", "RayJob ns/name"
    diagnosis: Diagnosis
    parts: tuple[InputPart, ...]
    context: Context
    memory: str = ""  # the killed pod's memory before the kill (sources.prometheus)


class Diagnoser:
    """`bot.adapters.slack.app.Diagnoser`: `(target, user) -> answer text`."""

    def __init__(
        self,
        settings: Settings,
        library: Library,
        sink: Sink,
        *,
        ray_clusters: Callable[[], Sequence[RayClusterConfig]] | None = None,
        kube_api: Callable[[], KubeApi] | None = None,
        clock: Clock = utcnow,
    ) -> None:
        """`sink`: the pipeline; `ray_clusters`: the Ray clusters to look on, asked at
        each call (default: the enabled `sources.ray` entries); `kube_api` makes the
        Kubernetes client (default: from `sources.kubernetes`, made once, on first use)."""
        self.settings = settings
        self.library = library
        self.sink = sink
        self._ray_clusters = ray_clusters or (lambda: ray_cluster_configs(settings))
        self._make_api = kube_api or self._api_from_settings
        self._api: KubeApi | None = None
        self._lock = threading.Lock()
        self._clock = clock
        self._fetch = fetcher(settings)  # memory evidence, when sources.prometheus is set

    def __call__(self, target: DiagnoseTarget, user: str) -> str:
        try:
            found = self._ray(target) if target.kind == "ray_job" else self._kube(target)
        except PitcrewError as error:
            log.info("diagnose %s for %s: %s", target, user or "?", error)
            return f"Cannot diagnose {target}: {error}"
        found = self._measured(found)
        queued = self._feed(found)
        primary = found.diagnosis.primary
        log.info(
            "diagnose %s for %s: %s",
            target,
            user or "?",
            primary.category if primary is not None else "no known failure",
        )
        return summary(found, queued)

    def _measured(self, found: Found) -> Found:
        """With the killed pod's memory before the kill, and the bump sized from it."""
        if self._fetch is None:
            return found
        headroom = self.settings.actions.bump_memory.headroom
        measured = measured_by(self._fetch, found.diagnosis, self._clock(), headroom)
        if measured is None:
            return found
        return dataclasses.replace(found, diagnosis=measured.diagnosis, memory=measured.line)

    # -- Ray ------------------------------------------------------------------------------

    def _ray(self, target: DiagnoseTarget) -> Found:
        configs = list(self._ray_clusters())
        names = ", ".join(c.name for c in configs) or "none"
        if not configs:
            raise PitcrewError("no Ray cluster is configured (sources.ray)")
        if target.cluster:
            configs = [c for c in configs if target.cluster in (c.name, c.ray_cluster)]
            if not configs:
                raise PitcrewError(
                    f"no Ray cluster {target.cluster!r} in sources.ray (configured: {names})"
                )
        problems: list[str] = []
        for config in configs:
            engine = engine_of(self.library)
            try:
                live = diagnose_ray_job_on(
                    engine, config, target.name, executors=self._ray_executors(config, engine)
                )
            except JobNotFoundError:
                continue
            except PitcrewError as error:
                problems.append(f"{config.name}: {error}")
                continue
            status = str(live.job.get("status") or "?")
            message = _first_line(str(live.job.get("message") or ""), 300)
            said = f"{status} ({message})" if message else status
            context = _context(live.parts, config.name, config.k8s_namespace)
            return Found(
                f"Ray job {target.name} on cluster {config.name}: {said}",
                live.diagnosis,
                live.parts,
                context,
            )
        where = "cluster " + configs[0].name if len(configs) == 1 else f"clusters {names}"
        if problems:
            raise PitcrewError(
                f"no Ray job {target.name!r} found; could not ask " + "; ".join(problems)
            )
        raise PitcrewError(f"no Ray job {target.name!r} on {where}")

    def _ray_executors(self, config: RayClusterConfig, engine: Engine) -> dict[str, RayExecutor]:
        """The Ray executors' live checks, with the operator's resubmission cap."""
        clusters = RayClusters([config])
        cap = self.settings.actions.resubmit.max_retries
        executors: list[RayExecutor] = [
            KillActorExecutor(clusters),
            StopJobExecutor(clusters),
            ResubmitJobExecutor(clusters, categorize=engine.categories, max_retries=cap),
        ]
        return {e.action: e for e in executors}

    # -- Kubernetes -----------------------------------------------------------------------

    def _kube(self, target: DiagnoseTarget) -> Found:
        from bot.adapters.kubernetes.base import KubeActionConfig
        from bot.adapters.kubernetes.executors import executors as kube_executors
        from bot.adapters.kubernetes.on_demand import Collector, Target, diagnose_parts

        api = self._kube_api()
        parsed = Target(target.namespace, _KINDS[target.kind], target.name)
        parts = tuple(Collector(api).collect(parsed))
        config = KubeActionConfig(max_memory=self.settings.actions.bump_memory.cap)
        diagnosis = diagnose_parts(engine_of(self.library), parts, kube_executors(api, config))
        context = _context(parts, "", target.namespace)
        return Found(f"{parsed.kind} {parsed.namespace}/{parsed.name}", diagnosis, parts, context)

    def _kube_api(self) -> KubeApi:
        with self._lock:
            if self._api is None:
                self._api = self._make_api()
            return self._api

    def _api_from_settings(self) -> KubeApi:
        kube = self.settings.sources.kubernetes
        if not (kube.enabled or kube.kubeconfig or kube.in_cluster):
            raise PitcrewError(
                "Kubernetes is not configured here (sources.kubernetes: enabled, or a "
                "kubeconfig); Ray job ids work with sources.ray"
            )
        from bot.adapters.kubernetes.api import KubeApi

        return KubeApi.from_config(
            str(kube.kubeconfig) if kube.kubeconfig else None,
            kube.context or None,
            in_cluster=kube.in_cluster or None,
        )

    # -- the pipeline ---------------------------------------------------------------------

    def _feed(self, found: Found) -> bool | None:
        """Queue the evidence when it shows a failure; None when there was nothing to
        queue, else whether the pipeline took it."""
        if not found.diagnosis.findings:
            return None
        if self.sink.submit(observe(found.parts, found.context)):
            return True
        log.warning("the pipeline queue is full: the evidence of %s was not queued", found.what)
        return False


def _context(parts: Sequence[InputPart], cluster: str, namespace: str) -> Context:
    """What the sources say about the evidence: cluster, namespace, owning workload."""
    first = next((p for p in parts if isinstance(p, Signal)), None)
    workload = first.workload if first is not None else None
    if first is not None:
        namespace = first.fields.get("namespace", "") or namespace
        if workload is not None and workload.namespace:
            namespace = workload.namespace
    return Context(cluster, namespace, workload)


def _first_line(text: str, limit: int) -> str:
    line = next((s.strip() for s in text.splitlines() if s.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def summary(found: Found, queued: bool | None) -> str:
    """The answer: what was looked at, the verdict, the actions, and whether a card
    follows. Plain text (the chat escapes it)."""
    diagnosis = found.diagnosis
    lines = [found.what]
    primary = diagnosis.primary
    if primary is None and diagnosis.unknown:
        lines.append(f"{UNKNOWN}; the lines that look like one:")
        lines.extend(f"  {_first_line(line, 300)}" for line in diagnosis.unknown[:MAX_LISTED])
    elif primary is None:
        lines.append("No known failure in the evidence.")
    else:
        lines.append(f"Root cause: {primary.category} ({primary.playbook}): {primary.title}")
    if found.memory:
        lines.append(f"Memory: {found.memory}")
    secondary = list(dict.fromkeys(str(f.category) for f in diagnosis.secondary))
    if secondary:
        more = f" and {len(secondary) - MAX_LISTED} more" if len(secondary) > MAX_LISTED else ""
        lines.append(f"Also seen: {', '.join(secondary[:MAX_LISTED])}{more}")
    offered = [a for a in diagnosis.actions if a.offered]
    withheld = [a for a in diagnosis.actions if not a.offered]
    for group in [g for g in grouped(diagnosis.actions) if g[0].offered][:MAX_LISTED]:
        preview = _first_line(group[0].preview, 200)
        then = "".join(f", then {step.action}" for step in group[1:])
        lines.append(f"Offered: {group[0].action}" + (f" ({preview})" if preview else "") + then)
    for action in withheld[: max(MAX_LISTED - len(offered), 0)]:
        lines.append(f"Not offered: {action.action}: {_first_line(action.reason, 200)}")
    if primary is not None and not offered and diagnosis.remediation:
        lines.append(f"What to do: {_first_line(diagnosis.remediation[0], 300)}")
        lines.extend(f"Runbook: {url}" for url in diagnosis.runbook[:1])
    if queued is True:
        approve = " Approve actions there." if offered else ""
        lines.append(
            "Sent to the incident pipeline: the incident's card shows in the channel "
            f"unless it is silenced.{approve}"
        )
    elif queued is False:
        lines.append("pitcrew is busy: the evidence was not queued, so no card follows.")
    return "\n".join(lines)
