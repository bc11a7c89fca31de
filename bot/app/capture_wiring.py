"""Evidence bundles wired from the settings: the kuberay collector on the Kubernetes
source's client, the store that keeps them, and the files the chat uploads.

Why this exists: with `sources.kubernetes` on, the daemon captures a failing RayJob's
or RayCluster's evidence (`bot.daemon.capture.CaptureWorker`) before KubeRay deletes its
cluster; the collector reads Kubernetes and the RayCluster's dashboard (where
`sources.ray_discovery.url_template` says it is), which the daemon does not know.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bot.app.settings.sections import Settings
from bot.core.text import file_name
from bot.daemon.capture import CaptureWorker
from bot.daemon.feed import Captured

TIMEOUT = 30.0
"""A capture's deadline, collector and store together (each request has its own bound)."""


def bundles_dir(settings: Settings) -> Path:
    """Bundle files for the chat to upload, beside the store (`bundles/`)."""
    return Path(str(settings.store.path)).absolute().parent / "bundles"


def bundle_limits(settings: Settings) -> tuple[int, int]:
    """(each file's cap, the bundle's cap) in bytes, from `store.bundle_*_kib`."""
    store = settings.store
    return store.bundle_file_max_kib * 1024, store.bundle_max_kib * 1024


def capture_worker(
    settings: Settings,
    save: Callable[[str, str, bytes, Any], None],
    submit: Callable[[Captured], bool],
) -> CaptureWorker | None:
    """The capture worker when the Kubernetes source runs; None otherwise (or in memory)."""
    if not settings.sources.kubernetes.enabled or str(settings.store.path) == ":memory:":
        return None
    from bot.adapters.kuberay.capture import EvidenceCollector
    from bot.adapters.kuberay.clusters import discover
    from bot.adapters.ray.client import RayDashboard, headers_from_env
    from bot.app.factories import cluster_name, kube_api

    template = settings.sources.ray_discovery.url_template
    headers = headers_from_env()

    def dashboard(cluster: Mapping[str, Any]) -> RayDashboard | None:
        found = discover(cluster, template)
        return RayDashboard(found.url, headers, 10.0) if found is not None else None

    collectors: list[EvidenceCollector] = []  # the Kubernetes client, made at the first capture

    def collect(kind: str, namespace: str, name: str) -> bytes:
        if not collectors:
            file_limit, total_limit = bundle_limits(settings)
            collectors.append(
                EvidenceCollector(
                    kube_api(settings),
                    dashboard,
                    file_limit=file_limit,
                    total_limit=total_limit,
                    cluster=cluster_name(settings),
                )
            )
        return collectors[0].collect(kind, namespace, name)

    directory = bundles_dir(settings)

    def write(incident_id: str, name: str, body: bytes) -> str:
        directory.mkdir(parents=True, exist_ok=True)
        stem = file_name(name.removesuffix(".tar.gz"))
        path = directory / f"{file_name(incident_id)}-{stem}.tar.gz"
        path.write_bytes(body)
        return str(path)

    return CaptureWorker(collect, save, write, submit, timeout=TIMEOUT)


def prune_bundles(directory: Path, older_than: float) -> int:
    """Delete the bundle files last written before `older_than` (a timestamp): the store
    keeps the bundles themselves as long as their incidents; returns how many."""
    removed = 0
    for path in directory.glob("*.tar.gz") if directory.is_dir() else ():
        if path.stat().st_mtime < older_than:
            path.unlink(missing_ok=True)
            removed += 1
    return removed
