"""The evidence bundle reaches the card's thread through Slack: a failed RayJob's card is
posted to the Slack Web API emulator (the real `slack_sdk` client), its bundle is
captured off the pipeline thread and uploaded with `files.uploadV2` into that thread, a
tar.gz a person can open."""

from __future__ import annotations

import io
import tarfile
import threading
from pathlib import Path

from bot.adapters.kuberay.capture import Bundle
from bot.adapters.slack.chat import SlackChat
from bot.adapters.store.store import Store
from bot.core.incidents.assessment import assessor
from bot.core.incidents.correlator import Correlator
from bot.core.incidents.notify import NotifyConfig
from bot.core.inputs.kuberay import rayjob_parts
from bot.daemon.budget import BudgetedClassifier
from bot.daemon.capture import CaptureWorker
from bot.daemon.feed import Captured, Context, observe
from bot.daemon.outbox import Backoff, Outbox
from bot.daemon.pipeline import Pipeline, PipelineConfig, Workers
from tests.e2e.slack.conftest import CHANNEL, slack_config
from tests.support.daemon import NS, Clock, engine
from tests.support.slack_emulator import SlackEmulator

RAYJOB = {
    "apiVersion": "ray.io/v1",
    "kind": "RayJob",
    "metadata": {"name": "train", "namespace": NS},
    "status": {
        "jobDeploymentStatus": "Failed",
        "jobStatus": "FAILED",
        "reason": "AppFailed",
        "rayClusterName": "train-raycluster-abcde",
        "message": "Job entrypoint command failed with exit code 1",
    },
}


def collect(kind: str, namespace: str, name: str) -> bytes:
    bundle = Bundle()
    bundle.add("driver.log", b"training step 1\nRayActorError: The actor died\n", 4096)
    return bundle.packed(1 << 20, f"pitcrew evidence bundle of {kind} {namespace}/{name}")


def test_the_bundle_is_uploaded_into_the_cards_thread(tmp_path: Path) -> None:
    store = Store(tmp_path / "pitcrew.db")
    clock = Clock()
    arrived: list[Captured] = []
    ready = threading.Event()

    def submit(item: Captured) -> bool:
        arrived.append(item)
        ready.set()
        return True

    def write(incident_id: str, name: str, body: bytes) -> str:
        path = tmp_path / f"{incident_id}-{name}"
        path.write_bytes(body)
        return str(path)

    worker = CaptureWorker(collect, store.save_bundle, write, submit)
    pipeline = Pipeline(
        BudgetedClassifier(engine()),
        Correlator(assessor(engine().library)),
        store,
        clock,
        config=PipelineConfig(notify=NotifyConfig(default_channel=CHANNEL, group_wait=0)),
        workers=Workers(capture=worker),
    )
    emulator = SlackEmulator().start()
    chat = SlackChat(slack_config(emulator))
    outbox = Outbox(store, chat, clock=clock, backoff=Backoff(jitter=0.0))
    try:
        pipeline.process(observe(rayjob_parts(RAYJOB), Context(namespace=NS)))
        outbox.deliver_due()
        (card,) = emulator.parents()
        assert ready.wait(20), "no bundle captured"
        pipeline.process(arrived[0])
        outbox.deliver_due()
        (shared,) = emulator.shared_files()
        assert (shared.channel, shared.thread_ts) == (CHANNEL, card.ts)
        assert shared.comment.startswith(f"Evidence bundle of RayJob {NS}/train (")
        with tarfile.open(fileobj=io.BytesIO(shared.data), mode="r:gz") as tar:
            assert sorted(tar.getnames()) == ["README.txt", "driver.log"]
    finally:
        worker.close()
        chat.stop()
        emulator.stop()
        store.close()
