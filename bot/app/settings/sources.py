"""The `sources` section: the Ray clusters to poll, the Kubernetes watches, discovery.

Why this exists: what pitcrew watches is the first thing an operator configures and the
easiest to get subtly wrong (a dashboard URL without a scheme, a discovery template with
an unknown placeholder, two sources of one name); each is refused here with its reason.
"""

from __future__ import annotations

import re
import string
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from bot.app.settings.base import Closed


class RaySourceSettings(Closed):
    """A Ray cluster to poll (Jobs and State APIs); filled in by the Ray source."""

    name: str = Field(min_length=1)
    enabled: bool = True
    address: str = Field(default="http://127.0.0.1:8265", min_length=1)
    namespace: str = Field(default="", description="Kubernetes namespace of the cluster")
    poll_interval: timedelta = Field(default=timedelta(seconds=10), gt=timedelta(0))
    stale_actor_age: timedelta = Field(
        default=timedelta(hours=1),
        gt=timedelta(0),
        description="a detached named actor is reported stale this long after its job finished",
    )
    stale_scan_every: timedelta = Field(
        default=timedelta(minutes=10),
        gt=timedelta(0),
        description="how often the stale-actor scan runs",
    )
    down_after: timedelta = Field(
        default=timedelta(minutes=2),
        gt=timedelta(0),
        description="an unreachable dashboard is reported once it has been down this long",
    )


class KubernetesSourceSettings(Closed):
    """Kubernetes watches (events, pods, nodes, RayJobs, RayClusters)."""

    enabled: bool = False
    kubeconfig: Path | None = None
    context: str = ""
    in_cluster: bool = False
    namespaces: tuple[str, ...] = Field(default=(), description="empty: all namespaces")
    resources: tuple[Literal["events", "pods", "nodes", "rayjobs", "rayclusters"], ...] = (
        "events",
        "pods",
        "nodes",
        "rayjobs",
        "rayclusters",
    )


DISCOVERY_PLACEHOLDERS = ("service", "namespace", "port", "name")
"""What `sources.ray_discovery.url_template` may name (bot.adapters.kuberay.discovery)."""


def _url_template(template: str) -> str:
    names = [field for _, field, _, _ in string.Formatter().parse(template) if field is not None]
    known = ", ".join(f"{{{n}}}" for n in DISCOVERY_PLACEHOLDERS)
    if any(not n for n in names):
        raise ValueError(f"placeholders must be named ({known})")
    unknown = sorted({n for n in names if n not in DISCOVERY_PLACEHOLDERS})
    if unknown:
        raise ValueError(f"unknown placeholder {{{unknown[0]}}} (known: {known})")
    sample = template.format(service="s", namespace="ns", port=8265, name="n")
    if not re.fullmatch(r"https?://[^/\s]+(/\S*)?", sample):
        raise ValueError(f"{template!r} does not make an http(s) URL")
    return template


class RayDiscoverySettings(Closed):
    """Ray clusters found from KubeRay RayCluster objects in the namespaces the Kubernetes
    source watches (`sources.kubernetes`): each RayCluster's dashboard is polled like a
    `sources.ray` entry named `<namespace>.<name>` for as long as the RayCluster exists,
    and its signals name the namespace, the RayCluster and the RayJob that owns it. A
    RayCluster at the address of a `sources.ray` entry is polled by that entry only. The
    `ray` executors find these clusters by that name or by the RayCluster's name."""

    enabled: bool | None = Field(
        default=None,
        description="null: on when sources.kubernetes is enabled and watches rayclusters; "
        "true needs sources.kubernetes.enabled",
    )
    url_template: Annotated[str, AfterValidator(_url_template)] = Field(
        default="http://{service}.{namespace}.svc:{port}",
        description="a RayCluster's dashboard URL from {service} (its head service), "
        "{namespace}, {port} (the head service's dashboard port, 8265 unless the RayCluster "
        "says otherwise) and {name}; e.g. a proxy: https://ray.example.com/{namespace}/{name}",
    )
    poll_interval: timedelta = Field(
        default=timedelta(seconds=10),
        gt=timedelta(0),
        description="how often each discovered dashboard is polled",
    )


class PrometheusSourceSettings(Closed):
    """Memory evidence for memory findings: the killed pod's and its group's working set.
    An OOM kill's card waits for it before it is first posted, so its bump is sized from
    it (or by the factor, saying why, when Prometheus did not answer in time)."""

    url: str = Field(default="", description="Prometheus base URL; empty: no memory evidence")
    timeout: timedelta = Field(default=timedelta(seconds=5), gt=timedelta(0))
    headers: dict[str, str] = Field(default_factory=dict, description="e.g. Authorization")
    window: timedelta = Field(default=timedelta(minutes=30), gt=timedelta(0))
    step: timedelta = Field(default=timedelta(seconds=10), gt=timedelta(0))


class RayJobStuckSettings(Closed):
    """Stuck RayJobs (`bot.adapters.kuberay.stuck`): a RayJob `Initializing`, or `Running`
    with its head pod gone or not Ready or its dashboard not answering, longer than these
    gets a card whose root cause is why (the head pod unschedulable, a refused quota, an
    image that cannot be pulled). KubeRay itself fails a `Running` RayJob whose dashboard
    has not answered for `RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS` (300 s by default, KubeRay
    1.7) and an `Initializing` one only at its `preRunningDeadlineSeconds` (no default),
    without saying why; these defaults come well before. How long a state has lasted is
    counted on pitcrew's clock from the poll that first saw it (for a state already so
    when pitcrew starts or takes over, from when the API server's own clock says it
    began), never from pitcrew's clock less a timestamp another clock wrote."""

    enabled: bool | None = Field(
        default=None,
        description="null: on when sources.kubernetes is enabled and watches rayjobs; "
        "true needs sources.kubernetes.enabled",
    )
    poll_interval: timedelta = Field(
        default=timedelta(seconds=15),
        gt=timedelta(0),
        description="how often RayJobs are looked at",
    )
    initializing: timedelta = Field(
        default=timedelta(minutes=10),
        gt=timedelta(0),
        description="a RayJob Initializing this long is stuck (half its preRunningDeadlineSeconds "
        "when that is sooner)",
    )
    head_not_ready: timedelta = Field(
        default=timedelta(seconds=60),
        gt=timedelta(0),
        description="a Running RayJob whose head pod is gone or not Ready this long is stuck "
        "(KubeRay: 300 s of failed status checks)",
    )
    dashboard_silent: timedelta = Field(
        default=timedelta(seconds=60),
        gt=timedelta(0),
        description="a Running RayJob whose dashboard has not answered KubeRay's status checks "
        "this long (status.jobStatusCheckFailureStartTime, KubeRay 1.7) is stuck",
    )


class SourceSettings(Closed):
    ray: tuple[RaySourceSettings, ...] = ()
    kubernetes: KubernetesSourceSettings = KubernetesSourceSettings()
    ray_discovery: RayDiscoverySettings = RayDiscoverySettings()
    rayjob_stuck: RayJobStuckSettings = RayJobStuckSettings()
    prometheus: PrometheusSourceSettings = PrometheusSourceSettings()

    @model_validator(mode="after")
    def _discovery_needs_kubernetes(self) -> SourceSettings:
        if self.ray_discovery.enabled and not self.kubernetes.enabled:
            raise ValueError(
                "ray_discovery.enabled: discovering RayClusters needs sources.kubernetes.enabled"
            )
        if self.rayjob_stuck.enabled and not self.kubernetes.enabled:
            raise ValueError(
                "rayjob_stuck.enabled: finding stuck RayJobs needs sources.kubernetes.enabled"
            )
        return self

    def finds_stuck_rayjobs(self) -> bool:
        """Whether stuck RayJobs are looked for (with the Kubernetes source, see
        RayJobStuckSettings.enabled)."""
        enabled = self.rayjob_stuck.enabled
        if not self.kubernetes.enabled or enabled is False:
            return False
        return enabled is True or "rayjobs" in self.kubernetes.resources

    def discovers_ray_clusters(self) -> bool:
        """Whether RayCluster discovery runs (with the Kubernetes source, see
        RayDiscoverySettings.enabled)."""
        enabled = self.ray_discovery.enabled
        if not self.kubernetes.enabled or enabled is False:
            return False
        return enabled is True or "rayclusters" in self.kubernetes.resources

    @field_validator("ray")
    @classmethod
    def _unique(cls, value: tuple[RaySourceSettings, ...]) -> tuple[RaySourceSettings, ...]:
        names = [s.name for s in value]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"source names must be unique: {', '.join(duplicates)}")
        return value

    def enabled_kinds(self) -> tuple[str, ...]:
        kinds = []
        if any(s.enabled for s in self.ray):
            kinds.append("ray")
        if self.kubernetes.enabled:
            kinds.append("kubernetes")
        return tuple(kinds)
