"""Fixtures for the Kubernetes tests: kmock's KubernetesEmulator on a loopback port, driven
through the official `kubernetes` client over real HTTP.

The emulator is asyncio; the client and pitcrew's watch threads are synchronous. So the
emulator runs in an event loop of its own thread, and tests reach into it (to inject
watch reactions or change stored objects behind the API's back) with `Emulator.run`.
Every RayJob and RayCluster a test creates is validated against the real KubeRay CRD
schema first (`create` refuses an invalid one).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import kmock
import pytest
import yaml
from kubernetes import client

from bot.diagnose import Engine
from bot.incidents import workload_refs
from bot.inputs import InputPart
from bot.model import ObjectRef, Signal
from bot.playbooks import load_builtin
from bot.sources.kubernetes_api import BY_KIND, KubeApi
from tests.kube import objects

CRDS = Path("/work/shared/kuberay/crds")
SCHEMAS = {"RayJob": "ray.io_rayjobs.yaml", "RayCluster": "ray.io_rayclusters.yaml"}
LOG_PATH = re.compile(r"^/api/v1/namespaces/[^/]+/pods/[^/]+/log$")


@functools.cache
def crd_validator(kind: str) -> Any:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd = yaml.load((CRDS / SCHEMAS[kind]).read_text(), Loader=loader)
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    schema = version["schema"]["openAPIV3Schema"]
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema)


def validate_kuberay(obj: Mapping[str, Any]) -> None:
    """Raise unless `obj` is a valid ray.io/v1 object per the real CRD schema."""
    errors = sorted(crd_validator(obj["kind"]).iter_errors(obj), key=lambda e: list(e.path))
    if errors:
        shown = "; ".join(f"{'.'.join(map(str, e.path))}: {e.message[:120]}" for e in errors)
        raise AssertionError(f"{obj['kind']} {obj['metadata']['name']} is not valid: {shown}")


class Emulator:
    """kmock's KubernetesEmulator served on 127.0.0.1:<free port> from its own loop thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="kmock", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("kmock did not start")
        if self._failed is not None:
            raise self._failed
        configuration = client.Configuration()
        configuration.host = self.url
        configuration.retries = 0
        self.api_client = client.ApiClient(configuration)
        self.api = KubeApi(self.api_client, timeout=5.0)

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._main())
        except BaseException as error:  # surfaced to the test that started it
            self._failed = error
            self._ready.set()

    async def _main(self) -> None:
        self._stopping = asyncio.Event()
        async with kmock.KubernetesEmulator() as k, kmock.Server(k) as server:
            self.k = k
            self.url = str(server.url).rstrip("/")
            with warnings.catch_warnings():  # kmock reads its bundle with a deprecated API
                warnings.simplefilter("ignore", DeprecationWarning)
                k.resources.load_bundled()
            # A pod log nobody declared is a 404 (the emulator would answer with the pod).
            (k**-1)[kmock.method.GET, LOG_PATH] << 404
            self._ready.set()
            await self._stopping.wait()

    def run(self, fn: Callable[[Any], Any]) -> Any:
        """Call `fn(kmock)` on the emulator's loop and return its result."""

        async def call() -> Any:
            return fn(self.k)

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(10)

    def stop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self._stopping.set)
            self._thread.join(10)

    # -- conveniences ------------------------------------------------------------------------

    def install_kuberay(self) -> None:
        def declare(k: Any) -> None:
            k.resources["ray.io/v1/rayjobs"] = kmock.ResourceInfo(
                kind="RayJob", singular="rayjob", namespaced=True
            )
            k.resources["ray.io/v1/rayclusters"] = kmock.ResourceInfo(
                kind="RayCluster", singular="raycluster", namespaced=True
            )

        self.run(declare)

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create through the API (over HTTP, so watches see it)."""
        if obj.get("kind") in SCHEMAS:
            validate_kuberay(obj)
        resource = BY_KIND[obj["kind"]]
        return self.api.create(resource, obj["metadata"].get("namespace", ""), obj)

    def serve_log(self, namespace: str, pod: str, text: bytes) -> None:
        path = f"/api/v1/namespaces/{namespace}/pods/{pod}/log"
        self.run(lambda k: k[kmock.method.GET, path] << text)

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
    return Engine(load_builtin([]))


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


def install_seed(emulator: Emulator) -> dict[str, Any]:
    """The seed case's objects in the emulator, with the logs the kubelet would serve."""
    seed = objects.seed_objects()
    for obj in [*seed["nodes"], seed["quota"], seed["rayjob"], seed["cluster"], seed["job"]]:
        emulator.create(obj)
    for pod in seed["pods"]:
        emulator.create(pod)
    emulator.serve_log(
        objects.NS, seed["submitter_pod"]["metadata"]["name"], objects.seed_driver_log()
    )
    emulator.serve_log(
        objects.NS,
        seed["oom_pod"]["metadata"]["name"],
        b"(raylet) Worker 2321 started\n(WorkerDict pid=2321) loading Qwen2.5-7B shards\n",
    )
    return seed


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
    """The items one incident gathers: those that name the workload (as bot.incidents keys
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
