"""Fixtures for the Kubernetes tests: kmock's KubernetesEmulator on a loopback port, driven
through the official `kubernetes` client over real HTTP.

The emulator is the demo's (`bot.app.demo.emulator.KubeEmulator`): asyncio, served from an
event loop of its own thread, which tests reach into (to inject watch reactions or
change stored objects behind the API's back) with `Emulator.run`.
Every RayJob and RayCluster a test creates is validated against the real KubeRay CRD
schema first (`create` refuses an invalid one).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import kmock
import pytest
import yaml

from bot.adapters.files.playbooks import builtin_engine
from bot.app.demo import seed
from bot.app.demo.emulator import KubeEmulator
from bot.core.diagnosis.engine import Engine
from bot.core.incidents.workloads import workload_refs
from bot.core.inputs import InputPart
from bot.core.model import ObjectRef, Signal
from tests.support.kuberay_crds import FILES as SCHEMAS
from tests.support.kuberay_crds import validate_kuberay


class Emulator(KubeEmulator):
    """The demo's emulator (bot.app.demo.emulator), refusing RayJobs and RayClusters that the
    real KubeRay CRD schema would refuse, with ways to look behind the API."""

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create through the API (over HTTP, so watches see it), validated first."""
        if obj.get("kind") in SCHEMAS:
            validate_kuberay(obj)
        return super().create(obj)

    def stored(self, plural: str, namespace: str | None, name: str) -> dict[str, Any]:
        """The object as the emulator stores it (bypassing the API)."""
        return self.run(lambda k: dict(k.objects[_resource(plural), namespace, name].raw))

    def mutate(
        self, plural: str, namespace: str | None, name: str, patch: Mapping[str, Any]
    ) -> None:
        """Change a stored object behind the API's back (no watch event): what a watch
        misses while it is disconnected."""
        self.run(lambda k: k.objects[_resource(plural), namespace, name].patch(dict(patch)))

    def requests(self, action: Any, plural: str) -> list[dict[str, str]]:
        """Query parameters of the requests of one action on one resource so far."""
        return self.run(
            lambda k: [dict(r.params) for r in k[action, kmock.resource(_resource(plural))]]
        )

    def request_headers(self, action: Any, plural: str) -> list[dict[str, str]]:
        """Headers of the requests of one action on one resource so far."""
        return self.run(
            lambda k: [dict(r.headers) for r in k[action, kmock.resource(_resource(plural))]]
        )


def _resource(plural: str) -> str:
    if plural in ("rayjobs", "rayclusters"):
        return f"ray.io/v1/{plural}"
    if plural in ("deployments", "replicasets", "statefulsets"):
        return f"apps/v1/{plural}"
    if plural in ("jobs", "cronjobs"):
        return f"batch/v1/{plural}"
    return f"v1/{plural}"


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    emu = Emulator()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture
def kuberay(emulator: Emulator) -> Emulator:
    """An emulator with the KubeRay CRDs installed (ray.io/v1 served)."""
    emulator.install_kuberay()
    return emulator


@pytest.fixture(scope="session")
def engine() -> Engine:
    return builtin_engine([])


def kubeconfig(directory: Path, emulator: Emulator) -> Path:
    """A kubeconfig whose `kmock` context points at the emulator (not the current one)."""
    path = directory / "kubeconfig"
    cluster = {"name": "kmock", "cluster": {"server": emulator.url}}
    user = {"name": "tester", "user": {"token": "not-checked"}}
    contexts = [
        {"name": name, "context": {"cluster": "kmock", "user": "tester"}}
        for name in ("kmock", "elsewhere")
    ]
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [user],
        "contexts": contexts,
        "current-context": "elsewhere",
    }
    path.write_text(yaml.safe_dump(document))
    return path


def write_daemon_config(
    tmp_path: Path, emulator: Emulator, discovery: Mapping[str, Any] | None = None, **sources: Any
) -> Path:
    """A `pitcrew run` config that watches the seed's namespace on the emulator, with fast
    ticks, one-second grouping, no actions and no Ray discovery unless `discovery` says;
    `sources` adds more sources' settings."""
    config = {
        "store": {"path": str(tmp_path / "state.db")},
        "http": {"host": "127.0.0.1", "port": 0},
        "notify": {"group_wait": "1s", "group_interval": "1s"},
        "actions": {"enabled": False},
        "sources": {
            "kubernetes": {
                "enabled": True,
                "kubeconfig": str(kubeconfig(tmp_path, emulator)),
                "context": "kmock",
                "namespaces": [seed.NS],
            },
            "ray_discovery": dict(discovery or {"enabled": False}),
            **sources,
        },
        "scheduler": {"tick": "200ms"},
    }
    path = tmp_path / "pitcrew.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def install_seed(emulator: Emulator) -> dict[str, Any]:
    """The seed case's objects in the emulator, with the logs the kubelet would serve."""
    return seed.install(emulator)


def wait_for(predicate: Callable[[], Any], timeout: float = 5.0, what: str = "") -> Any:
    """Poll until `predicate()` is truthy; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        time.sleep(0.01)


def of_workload(items: Iterable[InputPart], ref: ObjectRef) -> list[InputPart]:
    """The items one incident gathers: those that name the workload (as bot.core.incidents.correlator keys
    them), not the node taints and other workloads' failures seen in the same watch."""
    kept: list[InputPart] = []
    for item in items:
        if isinstance(item, Signal):
            if ref in workload_refs(item):
                kept.append(item)
        elif item.workload == ref:
            kept.append(item)
    return kept


@pytest.fixture(autouse=True)
def _quiet_kubernetes_client() -> None:
    logging.getLogger("urllib3").setLevel(logging.ERROR)
