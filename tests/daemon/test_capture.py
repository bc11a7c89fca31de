"""Evidence bundles off the pipeline thread (bot.daemon.capture): a RayJob's incident asks
for its bundle once, the bundle is kept in the store and reaches the card's thread as one
file, and a capture that hangs never holds up another workload's card."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path

from bot.adapters.store.store import Store
from bot.core.incidents.notify import NotifyConfig
from bot.core.inputs.kuberay import rayjob_parts
from bot.core.model import ObjectRef
from bot.daemon.capture import CaptureWorker
from bot.daemon.feed import Captured, Context, Observation, observe
from bot.daemon.pipeline import Workers
from tests.support.daemon import NS, Clock, RecordingChat, rig

HUNG = ObjectRef("RayJob", "hangs", NS)
OTHER = ObjectRef("RayJob", "verl-ppo-qwen", NS)


def failed(rayjob: ObjectRef) -> Observation:
    """A RayJob's status as KubeRay writes it when its Ray job failed."""
    obj = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": rayjob.name, "namespace": rayjob.namespace},
        "status": {
            "jobDeploymentStatus": "Failed",
            "jobStatus": "FAILED",
            "reason": "AppFailed",
            "rayClusterName": f"{rayjob.name}-raycluster-abcde",
            "message": "Job entrypoint command failed with exit code 1",
        },
    }
    return observe(rayjob_parts(obj), Context(namespace=NS, workload=rayjob))


def test_a_hung_capture_does_not_delay_another_workloads_card(tmp_path: Path) -> None:
    clock = Clock()
    chat = RecordingChat()
    release = threading.Event()
    asked: list[tuple[str, str, str]] = []
    items: list[Captured] = []

    def collect(kind: str, namespace: str, name: str) -> bytes:
        asked.append((kind, namespace, name))
        if name == HUNG.name:
            release.wait(30)  # a dashboard that never answers
        return b"bundle of " + name.encode()

    def write(incident_id: str, name: str, body: bytes) -> str:
        path = tmp_path / f"{incident_id}-{name}"
        path.write_bytes(body)
        return str(path)

    made: list[CaptureWorker] = []

    def capture(store: Store) -> Workers:
        made.append(
            CaptureWorker(
                collect, store.save_bundle, write, lambda i: items.append(i) or True, timeout=60
            )
        )
        return Workers(capture=made[0])

    no_wait = NotifyConfig(group_wait=timedelta(0))
    setup = rig(tmp_path / "state.db", clock, chat, notify=no_wait, workers=capture)
    try:
        setup.feed(failed(HUNG))  # its capture hangs on a pool thread
        started = time.monotonic()
        setup.feed(failed(OTHER))
        posts = [c for c in chat.calls if c.kind == "post"]
        assert time.monotonic() - started < 1.0
        assert len(posts) == 2  # both cards, the second not waiting on the hung capture
        deadline = time.monotonic() + 10
        while not items and time.monotonic() < deadline:
            time.sleep(0.01)
        [captured] = items  # the other workload's bundle; the hung one still running
        assert ("RayJob", NS, OTHER.name) in asked
        setup.pipeline.process(captured)  # back on the pipeline's queue
        setup.outbox.deliver_due()
        [attached] = [c for c in chat.calls if c.kind == "attach"]
        assert attached.path == captured.path
        assert attached.text.startswith(f"Evidence bundle of RayJob {NS}/{OTHER.name} (")
        assert attached.text.endswith(f"`pitcrew bundle {captured.incident_id}`")
        [kept] = setup.store.bundles(captured.incident_id)
        assert kept.body == b"bundle of verl-ppo-qwen"
        assert kept.name == "failed.tar.gz"  # captured as the RayJob failed
        # asked once per incident and attempt: a second finding asks nothing more
        setup.feed(failed(OTHER))
        assert asked.count(("RayJob", NS, OTHER.name)) == 1
    finally:
        release.set()
        made[0].close()
