"""Ray clusters found on Kubernetes: one Ray poller per KubeRay RayCluster, for as long as
the RayCluster exists.

Why this exists: on Kubernetes, Ray clusters come and go with the RayJobs that create
them; nobody writes each one into `sources.ray`. When the Kubernetes source runs (and
`sources.ray_discovery` does not turn this off), pitcrew lists and watches the `ray.io/v1`
RayClusters of the namespaces it watches, and polls each one's dashboard with the Ray
source (`bot.adapters.ray.source`), exactly like a configured cluster.

Where a RayCluster's dashboard is: its head service (`status.head.serviceName`, else
the `spec.headGroupSpec.headService` name, else KubeRay's `<name>-head-svc`) in its
namespace, on the head service's `dashboard` port (its `headService` port, else the
`status.endpoints` port of a ClusterIP service, else the head container's `dashboard`
port, else 8265), put into `sources.ray_discovery.url_template`
(`http://{service}.{namespace}.svc:{port}`; a proxy may use `{namespace}` and `{name}`).
Dashboard headers come from the environment, as for configured clusters.

Guarantees:
- Stable identity: a discovered cluster is named `<namespace>.<name>` (never by uid),
  so its bookmarks (`ray/<namespace>.<name>/jobs`) survive restarts and a RayCluster
  recreated under the same name: a failure is still reported once.
- Signals carry the workload: each poller's config names the Kubernetes namespace, the
  RayCluster and the RayJob that owns it (`ownerReferences`, else KubeRay's
  `ray.io/originated-from-*` labels), so its signals have `namespace`, `ray_cluster`
  and `rayjob` fields and incidents key on the RayJob.
- No duplicates: a RayCluster whose URL is a configured `sources.ray` address is polled
  by that entry only; two RayClusters with one URL are polled once (the first by
  namespace/name).
- Quiet start: a RayCluster whose head Kubernetes does not report ready yet is polled
  with backoff but not reported unreachable until its dashboard has answered once;
  when its head becomes ready it is polled at once.
- Removal: a RayCluster deleted (or being deleted, or suspended) loses its poller after
  one last poll (a RayJob's cluster is often deleted right after its job failed).
- No KubeRay: when `ray.io/v1` RayClusters are not served, one warning is logged, the
  source stays healthy, and it looks again every `crd_recheck`.
- Executors find discovered clusters: the live set is written to the bookmark
  `ray-discovery/clusters` on every change; `discovered_configs(bookmarks)` reads it
  (`bot.adapters.ray.executors` looks clusters up by pitcrew name or RayCluster name there).

The daemon builds it with the Kubernetes source, on the same API client
(`bot.app.factories`). It is a
polled source: the scheduler calls `poll()` every `sources.ray_discovery.poll_interval`,
which polls every discovered cluster that is due (concurrently).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import CancelledError, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from bot.adapters.kuberay.clusters import (
    DEFAULT_TEMPLATE,
    DIRECTORY_KEY,
    DiscoveredCluster,
    directory_text,
    discover,
    plan,
)
from bot.adapters.kubernetes.api import RAY_CLUSTERS, KubeApi, WatchEvent
from bot.adapters.kubernetes.errors import KubeApiError
from bot.adapters.kubernetes.watch import NotServedError, WatchLoop
from bot.adapters.ray.bookmarks import MemoryBookmarks
from bot.adapters.ray.client import RayClusterConfig
from bot.adapters.ray.source import RayClusterSource, RaySourceOptions
from bot.core.inputs.values import text_at
from bot.daemon.ports import Bookmarks, Sink, utcnow

log = logging.getLogger(__name__)

# -- the source ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DiscoveryOptions:
    """How patiently RayClusters are listed and watched (as `KubeSourceConfig`)."""

    page_size: int = 500
    watch_timeout: int = 290
    read_timeout: float = 330.0
    backoff_initial: float = 0.5
    backoff_max: float = 60.0
    unhealthy_after: float = 120.0
    crd_recheck: float = 300.0
    """Seconds between looks for the KubeRay CRDs while they are not served."""
    max_workers: int = 8


@dataclass(frozen=True)
class DiscoveryScope:
    """Where RayClusters are looked for and how their dashboards are reached: the
    namespaces watched (none: every namespace), the dashboard URL template, the
    `sources.ray` clusters already configured (a RayCluster at one of their URLs is
    polled by that entry only), the dashboard headers, how often each cluster is polled,
    and the Kubernetes cluster's name its signals carry (`k8s_cluster`)."""

    namespaces: tuple[str, ...] = ()
    url_template: str = DEFAULT_TEMPLATE
    configured: tuple[RayClusterConfig, ...] = ()
    headers: Mapping[str, str] = field(default_factory=dict)
    poll_interval: timedelta = timedelta(seconds=10)
    k8s_cluster: str = ""


@dataclass
class _Retired:
    poller: RayClusterSource
    final: bool  # poll once more before closing (a deleted RayCluster, not a replaced one)


class RayDiscoverySource:
    """RayClusters watched, their dashboards polled; see the module docstring."""

    name = "ray-discovery"

    def __init__(
        self,
        api: KubeApi,
        sink: Sink,
        bookmarks: Bookmarks | None = None,
        *,
        scope: DiscoveryScope | None = None,
        ray_options: RaySourceOptions | None = None,
        options: DiscoveryOptions | None = None,
        clock: Callable[[], datetime] = utcnow,
        rng: Callable[[], float] = random.random,
    ) -> None:
        """`ray_options`: how each discovered cluster's poller polls (as a configured
        cluster's); `options`: how RayClusters are listed and watched."""
        self.api = api
        self.sink = sink
        self.bookmarks: Bookmarks = bookmarks if bookmarks is not None else MemoryBookmarks()
        self.scope = scope or DiscoveryScope()
        self.poll_interval = self.scope.poll_interval
        self.ray_options = ray_options
        self.options = options or DiscoveryOptions()
        self.clock = clock
        self.rng = rng
        self.kuberay = "not checked"
        self.started = False
        self._stop = threading.Event()
        self._lock = threading.RLock()
        self._poll_lock = threading.Lock()
        self._entries: dict[str, DiscoveredCluster] = {}
        self._pollers: dict[str, RayClusterSource] = {}
        self._seen: dict[str, DiscoveredCluster] = {}
        self._retired: list[_Retired] = []
        self._shadowed: dict[str, str] = {}
        self._directory: str | None = None
        self._absent_logged = False
        self._scopes: list[_Scope] = []
        self._threads: list[threading.Thread] = []
        self._pool: ThreadPoolExecutor | None = None

    # -- the daemon's surface ----------------------------------------------------------

    def start(self) -> None:
        """One list+watch thread per namespace (or one for the whole cluster)."""
        if self.started:
            raise RuntimeError("RayCluster discovery is already started")
        self.started = True
        self._stop.clear()
        scopes: list[str | None] = list(self.scope.namespaces) or [None]
        self._scopes = [_Scope(self, namespace) for namespace in scopes]
        for scope in self._scopes:
            thread = threading.Thread(
                target=scope.run, name=f"pitcrew-ray-discovery-{scope.id}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop watching, wait for the threads, close every poller."""
        self._stop.set()
        for scope in self._scopes:
            scope.close()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._threads = []
        self.started = False
        with self._lock:  # not the poll lock: a poll in progress fails fast once closed
            pollers = [*self._pollers.values(), *(r.poller for r in self._retired)]
            self._pollers, self._retired, self._seen = {}, [], {}
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        for poller in pollers:
            _quietly(poller.stop)

    def healthy(self) -> bool:
        """The watches are connected (or in sync lately, or KubeRay is not installed). An
        unreachable dashboard is in `status()`, not here: a RayCluster still starting is
        not pitcrew failing."""
        if not self.started or self._stop.is_set():
            return False
        now = time.monotonic()
        return all(scope.healthy(now) for scope in self._scopes)

    def synced(self) -> bool:
        """Every watch has listed once (or found KubeRay absent)."""
        return self.started and all(scope.synced for scope in self._scopes)

    def poll(self) -> None:
        """Poll every discovered cluster that is due (concurrently), and a deleted one
        a last time before its poller closes."""
        with self._poll_lock:
            with self._lock:
                if self._stop.is_set():
                    return
                active = list(self._pollers.values())
                retired, self._retired = self._retired, []
                due = active + [r.poller for r in retired if r.final]
                if len(due) > 1 and self._pool is None:
                    self._pool = ThreadPoolExecutor(
                        max_workers=self.options.max_workers, thread_name_prefix="ray-discovery"
                    )
                pool = self._pool
            if len(due) > 1 and pool is not None:
                try:
                    list(pool.map(_poll_one, due))
                except (CancelledError, RuntimeError):  # stopped meanwhile: the pool is shut
                    return
            else:
                for poller in due:
                    _poll_one(poller)
            for item in retired:
                _quietly(item.poller.stop)

    def clusters(self) -> dict[str, RayClusterConfig]:
        """The clusters polled now, by pitcrew's name."""
        with self._lock:
            return {name: poller.config for name, poller in self._pollers.items()}

    def status(self) -> dict[str, Any]:
        """Watches, KubeRay, and every discovered cluster's poller (for /pitcrew status)."""
        now = time.monotonic()
        with self._lock:
            clusters = {
                name: {
                    **poller.status(),
                    "raycluster": f"{poller.config.k8s_namespace}/{poller.config.ray_cluster}",
                    "rayjob": poller.config.rayjob,
                }
                for name, poller in self._pollers.items()
            }
            shadowed = dict(self._shadowed)
        return {
            "healthy": self.healthy(),
            "kuberay": self.kuberay,
            "namespaces": list(self.scope.namespaces) or "all",
            "watches": {scope.id: scope.status(now) for scope in self._scopes},
            "clusters": clusters,
            "shadowed": shadowed,
        }

    # -- called by the watches ------------------------------------------------------------

    def stopping(self) -> bool:
        return self._stop.is_set()

    def sleep(self, seconds: float) -> None:
        self._stop.wait(seconds)

    def absent(self) -> None:
        """KubeRay's CRDs are not served: said once, looked for again later."""
        with self._lock:
            self.kuberay = "absent: ray.io/v1 RayClusters are not served"
            if self._absent_logged:
                return
            self._absent_logged = True
        log.warning(
            "KubeRay CRDs are not installed in %s: no RayClusters to discover "
            "(looking again every %.0fs)",
            self.api.host,
            self.options.crd_recheck,
        )

    def present(self) -> None:
        with self._lock:
            was_absent = self.kuberay.startswith("absent")
            self.kuberay = "watching"
        if was_absent:
            log.info("KubeRay CRDs are served in %s now: discovering RayClusters", self.api.host)

    def replace_scope(self, namespace: str | None, objects: Iterable[Mapping[str, Any]]) -> None:
        """After a list: the RayClusters of one scope are exactly these."""
        found = [d for d in (discover(obj, self.scope.url_template) for obj in objects) if d]
        with self._lock:
            kept = {
                key: item
                for key, item in self._entries.items()
                if namespace is not None and item.namespace != namespace
            }
            kept.update({item.key: item for item in found})
            self._entries = kept
            self._apply()

    def upsert(self, obj: Mapping[str, Any]) -> None:
        """A RayCluster added or changed (one being deleted or suspended is removed)."""
        item = discover(obj, self.scope.url_template)
        key = f"{text_at(obj, 'metadata', 'namespace')}/{text_at(obj, 'metadata', 'name')}"
        with self._lock:
            if item is None:
                if self._entries.pop(key, None) is None:
                    return
            elif self._entries.get(key) == item:
                return
            else:
                self._entries[key] = item
            self._apply()

    def remove(self, obj: Mapping[str, Any]) -> None:
        key = f"{text_at(obj, 'metadata', 'namespace')}/{text_at(obj, 'metadata', 'name')}"
        with self._lock:
            if self._entries.pop(key, None) is not None:
                self._apply()

    # -- keeping the pollers in line with the RayClusters -----------------------------------

    def _apply(self) -> None:
        """Add, replace and retire pollers to match the discovered RayClusters; record the
        live set for the executors. Called with the lock held."""
        scope = self.scope
        wanted = plan(self._entries.values(), scope.configured, scope.headers, scope.k8s_cluster)
        for name in [n for n in self._pollers if n not in wanted.pollers]:
            self._retire(name, final=True)
            log.info("Ray cluster %s: its RayCluster is gone; no longer polled", name)
        for name, (config, item) in wanted.pollers.items():
            current = self._pollers.get(name)
            if current is not None and current.config != config:
                self._retire(name, final=False)
                current = None
                log.info("Ray cluster %s: now at %s", name, config.url)
            new = current is None
            if current is None:
                current = self._add(config)
                log.info(
                    "discovered RayCluster %s%s: polling its dashboard %s as %s",
                    item.key,
                    f" (RayJob {item.rayjob})" if item.rayjob else "",
                    config.url,
                    name,
                )
            before = self._seen.get(name)
            current.source.set_starting(name, not item.head_ready)
            came_up = item.head_ready and (
                before is None or not before.head_ready or before.head != item.head
            )
            if came_up and not new:
                current.source.retry_now(name)
            self._seen[name] = item
        self._seen = {n: s for n, s in self._seen.items() if n in wanted.pollers}
        for key, why in wanted.shadowed.items():
            if self._shadowed.get(key) != why:
                log.info("RayCluster %s: not polled on its own: %s", key, why)
        self._shadowed = dict(wanted.shadowed)
        text = directory_text(wanted.directory)
        if text != self._directory:
            try:
                self.bookmarks.set(DIRECTORY_KEY, text)
                self._directory = text
            except Exception:
                log.exception("cannot record the discovered Ray clusters for the executors")

    def _add(self, config: RayClusterConfig) -> RayClusterSource:
        for retired in self._retired:
            if retired.poller.config.name == config.name:
                retired.final = False  # one poller per name (and bookmark) at a time
        poller = RayClusterSource(
            config,
            self.sink,
            self.bookmarks,
            poll_interval=self.poll_interval,
            options=self.ray_options,
            clock=self.clock,
        )
        self._pollers[config.name] = poller
        return poller

    def _retire(self, name: str, *, final: bool) -> None:
        poller = self._pollers.pop(name)
        self._retired.append(_Retired(poller, final))


def _poll_one(poller: RayClusterSource) -> None:
    try:
        poller.poll()
    except Exception:  # RaySource reports its own failures; this is a bug, not an outage
        log.exception("%s: polling failed", poller.name)


def _quietly(call: Callable[[], object]) -> None:
    try:
        call()
    except Exception:
        log.exception("closing a Ray poller failed")


class _Scope(WatchLoop):
    """The RayClusters of one namespace (or the whole cluster): list, watch, resume, relist."""

    COUNTS = ("lists", "events", "gone", "cuts", "errors")
    WHAT = "RayCluster discovery"
    LOG = log

    def __init__(self, source: RayDiscoverySource, namespace: str | None) -> None:
        super().__init__(source, source.options, RAY_CLUSTERS, namespace, "RayCluster")
        self.source = source
        self.absent = False
        self._items: list[Mapping[str, Any]] = []

    def healthy(self, now: float) -> bool:
        if self.absent:
            return True  # KubeRay not installed is not a failure of the source
        return super().healthy(now)

    def _relist(self) -> None:
        if not self._served():
            raise NotServedError(f"{RAY_CLUSTERS} is not served")
        super()._relist()

    def _served(self) -> bool:
        try:
            return self.source.api.served(
                RAY_CLUSTERS.group, RAY_CLUSTERS.version, RAY_CLUSTERS.plural
            )
        except KubeApiError:  # discovery forbidden or failing: the list will tell
            return True

    def _not_served(self, error: NotServedError) -> bool:
        self.absent = True
        self.synced = True
        self.rv = None
        self.state = "absent"
        self.source.absent()
        self.source.replace_scope(self.namespace, [])
        self.source.sleep(self.source.options.crd_recheck)
        return True

    def _list_started(self) -> None:
        self._items = []

    def _listed(self, items: Iterable[Mapping[str, Any]]) -> None:
        self._items.extend(items)

    def _list_done(self) -> None:
        items, self._items = self._items, []
        if self.absent:
            self.absent = False
        self.source.present()
        self.source.replace_scope(self.namespace, items)
        self.synced = True

    def _apply(self, event: WatchEvent) -> None:
        if event.type in ("ADDED", "MODIFIED"):
            self.source.upsert(event.object)
        elif event.type == "DELETED":
            self.source.remove(event.object)
