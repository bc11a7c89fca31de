"""Which store, source and executor kinds this pitcrew has, and how each is built from settings.

Why this exists: the config names a store (`store.url`, PostgreSQL, else the SQLite file
`store.path`) and kinds (`sources.<kind>`, `actions.executors`); the composition root
must turn each name into running objects. Two explicit tables do it,
so every kind is visible here and an unknown name is an error naming it, not a module
looked up by reflection. Here the settings become each adapter's own config (adapters
never see `Settings`), and adapters that work together (the Kubernetes source and
RayCluster discovery on one client; the Ray executors and the clusters discovery found)
are put together. Adapters are imported only when their kind is built, so a command
that builds none of them does not pay for their SDKs.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bot.adapters.files.playbooks import engine_of, load_builtin
from bot.app.settings.sections import Settings
from bot.app.settings.sources import RaySourceSettings
from bot.core.actions.specs import ACTION_SPECS
from bot.core.diagnosis.engine import Engine
from bot.core.errors import PitcrewError
from bot.core.playbooks.library import Library
from bot.daemon.executor import Registry
from bot.daemon.ports import Bookmarks, Executor, Sink, Source

if TYPE_CHECKING:
    from bot.adapters.kubernetes.api import KubeApi
    from bot.adapters.ray.client import RayClusterConfig
    from bot.adapters.ray.source import RayClusterSource, RaySourceOptions
    from bot.adapters.store.connection import Answer
    from bot.adapters.store.store import Store

SourceFactory = Callable[[Settings, Sink, Bookmarks | None], Sequence[Source]]
Executors = Mapping[str, Executor]
"""What an executor kind builds: the executor of each action it runs, by action id."""
ExecutorFactory = Callable[[Settings, Bookmarks | None], Executors]
Categorize = Callable[[Sequence[Any]], set[str]]
"""The failure categories found in a job's evidence."""


# -- what each adapter is given -----------------------------------------------------------------


def kube_api(settings: Settings, timeout: float | None = None) -> KubeApi:
    """The Kubernetes client `sources.kubernetes` names (kubeconfig, context or in-cluster);
    `timeout`: seconds per request, when shorter than the client's own."""
    from bot.adapters.kubernetes.api import KubeApi

    kube = settings.sources.kubernetes
    api = KubeApi.from_config(
        str(kube.kubeconfig) if kube.kubeconfig else None,
        kube.context or None,
        in_cluster=kube.in_cluster or None,
    )
    if timeout is not None:
        api.timeout = timeout
    return api


def cluster_name(settings: Settings) -> str:
    """This pitcrew's cluster (`cluster.name`), else the kubeconfig context's name or
    `in-cluster` when it reads Kubernetes; else "" (a workstation with Ray only)."""
    from bot.adapters.kubernetes.api import KubeApi

    if settings.cluster.name:
        return settings.cluster.name
    kube = settings.sources.kubernetes
    if not kube.enabled and not settings.leader_election.enabled:
        return ""
    return KubeApi.cluster_name(
        str(kube.kubeconfig) if kube.kubeconfig else None,
        kube.context or None,
        in_cluster=kube.in_cluster or None,
    )


def kube_cluster_name(settings: Settings) -> str:
    """The cluster the Kubernetes source watches, which keys its incidents: this
    pitcrew's (`cluster_name`); "" when the Kubernetes source is off."""
    return cluster_name(settings) if settings.sources.kubernetes.enabled else ""


def ray_cluster_configs(settings: Settings) -> list[RayClusterConfig]:
    """The enabled `sources.ray` entries as cluster configs; auth headers come from the
    environment (`PITCREW_RAY_HEADERS`, `RAY_AUTH_TOKEN`), never from the config file.
    An entry with a Kubernetes namespace runs on the watched cluster and says so."""
    from bot.adapters.ray.client import RayClusterConfig, headers_from_env

    headers = headers_from_env()
    kube_cluster = kube_cluster_name(settings)
    return [
        RayClusterConfig(
            s.name,
            s.address,
            headers,
            k8s_namespace=s.namespace,
            k8s_cluster=kube_cluster if s.namespace else "",
        )
        for s in settings.sources.ray
        if s.enabled
    ]


def ray_source_options(entry: RaySourceSettings) -> RaySourceOptions:
    """The polling options a `sources.ray` entry sets."""
    from bot.adapters.ray.source import RaySourceOptions

    return dataclasses.replace(
        RaySourceOptions(),
        stale_actor_age=entry.stale_actor_age,
        stale_scan_every=entry.stale_scan_every,
        down_after=entry.down_after,
    )


# -- the store ----------------------------------------------------------------------------------


def store_location(settings: Settings) -> str:
    """`store.url` (PostgreSQL, shared by replicas) when set, else the SQLite file."""
    return settings.store.url or str(settings.store.path)


def store_password(settings: Settings) -> str | None:
    secret = settings.secrets.store_password
    return secret.get_secret_value() if secret else None


def open_store(settings: Settings, *, init: bool = False) -> Store:
    """The store the settings name, opened (and migrated)."""
    from bot.adapters.store.store import Store

    return Store(
        store_location(settings),
        init=init,
        password=store_password(settings),
        cluster=cluster_name(settings),
    )


def probe_store(settings: Settings) -> Answer:
    """Which store the settings name and whether it answers; nothing is created or written."""
    from bot.adapters.store.connection import probe

    return probe(store_location(settings), store_password(settings))


# -- sources ------------------------------------------------------------------------------------


def ray_sources(
    settings: Settings, sink: Sink, bookmarks: Bookmarks | None = None
) -> list[RayClusterSource]:
    """The source kind `ray`: one polled source per enabled `sources.ray` entry. Without
    `bookmarks` failures are remembered in memory only; the daemon passes the store's."""
    from bot.adapters.ray.bookmarks import MemoryBookmarks
    from bot.adapters.ray.source import RayClusterSource

    marks = bookmarks if bookmarks is not None else MemoryBookmarks()
    entries = {s.name: s for s in settings.sources.ray}
    return [
        RayClusterSource(
            config,
            sink,
            marks,
            poll_interval=entries[config.name].poll_interval,
            options=ray_source_options(entries[config.name]),
        )
        for config in ray_cluster_configs(settings)
    ]


def kubernetes_sources(
    settings: Settings, sink: Sink, bookmarks: Bookmarks | None = None
) -> list[Source]:
    """The source kind `kubernetes` (`sources.kubernetes`) and, unless
    `sources.ray_discovery` turns it off, the RayCluster discovery on the same client."""
    from bot.adapters.kubernetes.source import KINDS_BY_PLURAL, KubernetesSource, KubeSourceConfig

    api = kube_api(settings)
    kube = settings.sources.kubernetes
    config = KubeSourceConfig(
        namespaces=tuple(kube.namespaces),
        kinds=tuple(KINDS_BY_PLURAL[r] for r in kube.resources),
        cluster=kube_cluster_name(settings),
    )
    built: list[Source] = [KubernetesSource(api, config, sink=sink)]
    built.extend(ray_discovery(settings, sink, bookmarks, api))
    built.extend(stuck_rayjobs(settings, sink, api))
    return built


def stuck_rayjobs(settings: Settings, sink: Sink, api: KubeApi) -> list[Source]:
    """The stuck-RayJob source `sources.rayjob_stuck` describes, or none when it is off."""
    if not settings.sources.finds_stuck_rayjobs():
        return []
    from bot.adapters.kuberay.stuck import StuckRayJobSource
    from bot.core.diagnosis.stuck import Thresholds

    stuck = settings.sources.rayjob_stuck
    thresholds = Thresholds(stuck.initializing, stuck.head_not_ready, stuck.dashboard_silent)
    return [
        StuckRayJobSource(
            api,
            sink,
            settings.sources.kubernetes.namespaces,
            thresholds,
            stuck.poll_interval,
            k8s_cluster=kube_cluster_name(settings),
        )
    ]


def ray_discovery(
    settings: Settings, sink: Sink, bookmarks: Bookmarks | None, api: KubeApi | None = None
) -> list[Source]:
    """The discovery source `sources.ray_discovery` describes, or none when it is off."""
    if not settings.sources.discovers_ray_clusters():
        return []
    from bot.adapters.kuberay.discovery import DiscoveryScope, RayDiscoverySource
    from bot.adapters.ray.client import headers_from_env

    discovery = settings.sources.ray_discovery
    scope = DiscoveryScope(
        namespaces=tuple(settings.sources.kubernetes.namespaces),
        url_template=discovery.url_template,
        configured=tuple(ray_cluster_configs(settings)),
        headers=headers_from_env(),
        poll_interval=discovery.poll_interval,
        k8s_cluster=kube_cluster_name(settings),
    )
    return [RayDiscoverySource(api or kube_api(settings), sink, bookmarks, scope=scope)]


# -- executors ----------------------------------------------------------------------------------


def echo_executor(settings: Settings, bookmarks: Bookmarks | None = None) -> Executors:
    """The executor kind `echo`: one recording executor for every action."""
    from bot.adapters.echo.executor import EchoExecutor

    echo = settings.actions.echo
    executor = EchoExecutor(echo.record, echo.delay.total_seconds())
    return dict.fromkeys(ACTION_SPECS, executor)


def kubernetes_executor(settings: Settings, bookmarks: Bookmarks | None = None) -> Executors:
    from bot.adapters.kubernetes.base import KubeActionConfig
    from bot.adapters.kubernetes.executors import executors

    config = KubeActionConfig(
        max_memory=settings.actions.bump_memory.cap, cluster=cluster_name(settings)
    )
    return executors(kube_api(settings), config)


def kuberay_executor(settings: Settings, bookmarks: Bookmarks | None = None) -> Executors:
    from bot.adapters.kuberay.rerun import executors
    from bot.adapters.kubernetes.base import KubeActionConfig

    return executors(kube_api(settings), KubeActionConfig(cluster=cluster_name(settings)))


def ray_executor(
    settings: Settings, bookmarks: Bookmarks | None = None, categorize: Categorize | None = None
) -> Executors:
    """The executor kind `ray` for the clusters of `sources.ray` and, when RayCluster
    discovery runs, the clusters it found (read from `bookmarks` at each lookup). Pass the
    store's bookmarks so the Ray source does not report a job pitcrew stopped, and the
    daemon's own classification as `categorize` (the resubmission's check)."""
    from bot.adapters.ray import executors
    from bot.adapters.ray.executor_base import RayClusters

    discovered: Callable[[], Sequence[RayClusterConfig]] | None = None
    if bookmarks is not None and settings.sources.discovers_ray_clusters():
        from bot.adapters.kuberay.clusters import discovered_configs

        marks = bookmarks

        def discovered() -> Sequence[RayClusterConfig]:
            return discovered_configs(marks)

    clusters = RayClusters(ray_cluster_configs(settings), discovered=discovered)
    max_retries = settings.actions.resubmit.max_retries
    categorize = categorize or configured_categorizer(settings)
    return executors.build(clusters, bookmarks, max_retries=max_retries, categorize=categorize)


SOURCE_KINDS: dict[str, SourceFactory] = {
    "ray": ray_sources,
    "kubernetes": kubernetes_sources,
}

EXECUTOR_KINDS: dict[str, ExecutorFactory] = {
    "echo": echo_executor,
    "kubernetes": kubernetes_executor,
    "kuberay": kuberay_executor,
    "ray": ray_executor,
}


def source_factory(kind: str) -> SourceFactory:
    """The factory of a source kind; raises PitcrewError when this pitcrew has none."""
    if kind not in SOURCE_KINDS:
        known = ", ".join(sorted(SOURCE_KINDS))
        raise PitcrewError(
            f"sources.{kind}: enabled, but this pitcrew has no {kind} source ({known})"
        )
    return SOURCE_KINDS[kind]


def executor_factory(kind: str) -> ExecutorFactory:
    """The factory of an executor kind; raises PitcrewError for an unknown one."""
    if kind not in EXECUTOR_KINDS:
        raise PitcrewError(f"actions.executors: unknown executor kind {kind!r}")
    return EXECUTOR_KINDS[kind]


def check_kinds(settings: Settings) -> list[str]:
    """Problems with the configured source and executor kinds, one line each."""
    problems = []
    for kind in settings.sources.enabled_kinds():
        if kind not in SOURCE_KINDS:
            problems.append(f"{settings.origin}: {_error(source_factory, kind)}")
    for kind in dict.fromkeys(settings.actions.executors.values()):
        if kind not in EXECUTOR_KINDS:
            problems.append(f"{settings.origin}: {_error(executor_factory, kind)}")
    return problems


def _error(lookup: Callable[[str], object], kind: str) -> str:
    try:
        lookup(kind)
    except PitcrewError as error:
        return str(error)
    return ""


def build_sources(
    settings: Settings, sink: Sink, bookmarks: Bookmarks | None = None
) -> list[Source]:
    """Every source the config enables, remembering what they reported in `bookmarks`."""
    built: list[Source] = []
    for kind in settings.sources.enabled_kinds():
        built.extend(source_factory(kind)(settings, sink, bookmarks))
    return built


def categorizer(library: Library) -> Categorize:
    """The daemon's own classification (its playbooks, `playbooks.dirs` included), for
    the Ray resubmission's check (not for dependency, version or application errors).
    One compiled engine per thread: Hyperscan's scratch space must not be shared."""
    engines = threading.local()

    def categorize(parts: Sequence[Any]) -> set[str]:
        engine: Engine | None = getattr(engines, "engine", None)
        if engine is None:
            engine = engines.engine = engine_of(library)
        return engine.categories(parts)

    return categorize


def configured_categorizer(settings: Settings) -> Categorize:
    """The configured playbooks' classification, loaded on first use (a `pitcrew
    approve` that runs no resubmission never loads it)."""
    made: list[Categorize] = []

    def categorize(parts: Sequence[Any]) -> set[str]:
        if not made:
            made.append(categorizer(load_builtin(list(settings.playbooks.dirs))))
        return made[0](parts)

    return categorize


def build_registry(
    settings: Settings, bookmarks: Bookmarks | None = None, categorize: Categorize | None = None
) -> Registry:
    """The executors `actions.executors` names, each kind built once, one executor per
    action. `categorize`: the daemon's own classification, which the `ray` kind's
    resubmission check uses. An action named exactly whose kind does not run it is a
    config error; one a pattern matches is left without an executor."""
    built: dict[str, Executors] = {}
    registry = Registry()
    for action, spec in ACTION_SPECS.items():
        kind = settings.actions.executor_for(action)
        if kind is None:
            continue
        if kind not in built:
            factory = executor_factory(kind)
            if factory is ray_executor:
                factory = functools.partial(ray_executor, categorize=categorize)
            built[kind] = factory(settings, bookmarks)
        executor = built[kind].get(action)
        if executor is not None:
            registry.register(action, executor)
        elif action in settings.actions.executors:
            raise PitcrewError(
                f"actions.executors: the {kind} executor does not run {action} "
                f"(its executor kind is {spec.executor})"
            )
    return registry
