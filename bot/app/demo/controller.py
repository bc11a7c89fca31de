"""The part of KubeRay's controller the demo needs: a recreated RayJob starts Running.

Why this exists: kmock's emulator stores objects but runs no controller, so a RayJob
pitcrew recreates (`kuberay.recreate_rayjob`) would never leave its empty status, and
the rerun could not be verified. This thread does what KubeRay would report: every
RayJob marked as recreated (`pitcrew.io/recreated-from`) is set `Running`, through the
API (so pitcrew's watch sees it). Labelled EMULATED on screen; never used elsewhere.
"""

from __future__ import annotations

import threading

from bot.adapters.kuberay.rerun import RECREATED_FROM
from bot.adapters.kubernetes.api import RAY_JOBS, KubeApi

RUNNING = {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}


class RayJobController:
    """Marks recreated RayJobs Running until stopped."""

    def __init__(self, api: KubeApi, namespace: str, every: float = 0.2) -> None:
        self.api = api
        self.namespace = namespace
        self.every = every
        self.started: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-kuberay", daemon=True)

    def __enter__(self) -> RayJobController:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            for job in self.api.list_all(RAY_JOBS, self.namespace):
                metadata = job.get("metadata") or {}
                status = job.get("status") or {}
                recreated = RECREATED_FROM in (metadata.get("annotations") or {})
                if recreated and status.get("jobDeploymentStatus") != "Running":
                    self.api.patch(RAY_JOBS, self.namespace, metadata["name"], {"status": RUNNING})
                    self.started.append(str(metadata["name"]))
