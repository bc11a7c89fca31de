"""kmock's Kubernetes API emulator on a loopback port, for the demo and the Kubernetes tests.

Why this exists: the seed case happened on Kubernetes, and a laptop has none. kmock's
KubernetesEmulator (from the Kopf author) answers the real API over HTTP — lists,
watches, patches, pod logs — so pitcrew's Kubernetes source and executors run
unchanged against it through the official client; only the cluster is pretend, and
the demo says so on screen. The emulator is asyncio; pitcrew's client and watch
threads are synchronous, so it serves from an event loop in a thread of its own,
and `run` reaches into that loop (to declare resources or answer a log request).
"""

from __future__ import annotations

import asyncio
import re
import threading
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import kmock
import yaml
from kubernetes import client

from bot.adapters.kubernetes.api import BY_KIND, KubeApi

LOG_PATH = re.compile(r"^/api/v1/namespaces/[^/]+/pods/[^/]+/log$")


class KubeEmulator:
    """kmock's KubernetesEmulator served on 127.0.0.1:<free port> from its own loop thread;
    `stop` ends it. `api` is pitcrew's client of it."""

    def __init__(self, start_timeout: float = 10.0) -> None:
        self.loop = asyncio.new_event_loop()
        self.url = ""
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="kmock", daemon=True)
        self._thread.start()
        if not self._ready.wait(start_timeout):
            self.stop()
            raise RuntimeError("the Kubernetes API emulator (kmock) did not start")
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
        except BaseException as error:  # surfaced to whoever started it
            self._failed = error
            self._ready.set()
        finally:
            self.loop.close()

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
        """End the server and its thread (idempotent)."""
        if self._thread.is_alive():
            stopping = getattr(self, "_stopping", None)
            if stopping is not None:
                self.loop.call_soon_threadsafe(stopping.set)
            self._thread.join(10)
        api_client = getattr(self, "api_client", None)
        if api_client is not None:
            api_client.close()

    # -- conveniences ------------------------------------------------------------------------

    def install_kuberay(self) -> None:
        """Serve KubeRay's ray.io/v1 RayJob and RayCluster resources."""

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
        resource = BY_KIND[obj["kind"]]
        return self.api.create(resource, obj["metadata"].get("namespace", ""), obj)

    def serve_log(self, namespace: str, pod: str, text: bytes) -> None:
        """What `GET .../pods/POD/log` answers from now on."""
        path = f"/api/v1/namespaces/{namespace}/pods/{pod}/log"
        self.run(lambda k: k[kmock.method.GET, path] << text)

    def write_kubeconfig(self, path: Path, context: str = "kmock") -> Path:
        """A kubeconfig whose `context` points at the emulator (it checks no credentials)."""
        document = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": "demo", "user": {"token": "not-checked"}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": "demo"}}],
            "current-context": context,
        }
        path.write_text(yaml.safe_dump(document))
        return path
