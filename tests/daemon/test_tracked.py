"""What the pipeline keeps about an incident until its card is final: one record, forgotten
whole, that also says what the card waits for besides its own timing.

Read as a specification: "why is this card late?" has one answer, the wait that held it
(`Tracked.held`): `group_wait` for a new incident, the memory evidence that sizes an OOM
kill's bump, or a live check's answer on the offers the card would show, each until its
own deadline; a click goes past the first two and not the third. An incident whose card
never posts (resolved unseen) leaves nothing behind, the evidence bundles that waited
for its card included.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from bot.adapters.store.store import Store
from bot.core.actions.facts import FactAnswer
from bot.core.actions.memory_evidence import MemoryTarget
from bot.core.incidents.notify import Delivery, Hold, NotifyConfig, Wait
from bot.core.inputs.kuberay import rayjob_parts
from bot.core.model import Incident, ObjectRef
from bot.daemon.capture import CaptureWorker
from bot.daemon.feed import Context, Healthy, Item, LiveFacts, Observation, Refresh, observe
from bot.daemon.memory_worker import MemoryWorker
from bot.daemon.pipeline import Workers
from bot.daemon.tracked import Tracked
from tests.support.clash_job import clash_parts
from tests.support.daemon import DESCRIBE, NS, RAYCLUSTER, T0, Clock, RecordingChat, Rig, rig, seed

RAYJOB = ObjectRef("RayJob", "verl-ppo-qwen", NS)
LIVE_HOLD = timedelta(seconds=30)  # PipelineConfig's default


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def rayjob_failed() -> Observation:
    """A RayJob's status as KubeRay writes it when its Ray job failed."""
    obj = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": RAYJOB.name, "namespace": NS},
        "status": {
            "jobDeploymentStatus": "Failed",
            "jobStatus": "FAILED",
            "reason": "AppFailed",
            "rayClusterName": f"{RAYJOB.name}-raycluster-abcde",
            "message": "Job entrypoint command failed with exit code 1",
        },
    }
    return observe(rayjob_parts(obj), Context(namespace=NS, workload=RAYJOB))


def started(
    tmp_path: Path, workers: Callable[[Store], Workers] | None = None, group_wait: int = 10
) -> Rig:
    notify = NotifyConfig(group_wait=timedelta(seconds=group_wait))
    return rig(tmp_path / "state.db", Clock(), RecordingChat(), notify=notify, workers=workers)


def only_incident(r: Rig) -> Incident:
    (incident,) = r.store.open_incidents()
    return incident


def posts(r: Rig) -> int:
    return sum(c.kind == "post" for c in r.chat.calls)


def held(r: Rig, incident: Incident) -> Wait | None:
    """What held the incident's card back at the pipeline's last decision about it."""
    tracked = r.pipeline.tracked(incident.id)
    assert tracked is not None
    return tracked.held


# -- the record: which hold applies -----------------------------------------------------------


@pytest.fixture(scope="module")
def incidents(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Incident]:
    """An OOM kill's incident (its bump is sized from memory evidence) and a Ray job's
    (nothing is sized from it), as the pipeline keeps them."""
    found = {}
    for name, item in (("oom", seed(DESCRIBE, RAYCLUSTER)), ("clash", observe(clash_parts()))):
        r = started(tmp_path_factory.mktemp(name))
        r.feed(item)
        found[name] = only_incident(r)
    return found


POSTED = Delivery("inc", "pitcrew", T0, T0, "digest")


@pytest.mark.parametrize(
    ("kind", "live_since", "evidence_due", "delivery", "hold"),
    [
        ("oom", None, None, None, None),
        ("oom", None, at(60), None, Hold(Wait.EVIDENCE, at(60))),
        ("oom", None, at(60), POSTED, None),  # the card is out: evidence only updates it
        ("clash", None, at(60), None, None),  # no bump is sized from the evidence
        ("clash", at(5), None, None, Hold(Wait.LIVE_CHECK, at(35))),
        ("oom", at(5), at(60), None, Hold(Wait.LIVE_CHECK, at(35))),  # the live check first
        ("clash", at(5), None, POSTED, Hold(Wait.LIVE_CHECK, at(35))),  # updates wait too
    ],
    ids=["nothing", "evidence", "posted", "not-sized", "live", "both", "live-posted"],
)
def test_the_record_says_which_hold_applies(
    incidents: dict[str, Incident],
    kind: str,
    live_since: datetime | None,
    evidence_due: datetime | None,
    delivery: Delivery | None,
    hold: Hold | None,
) -> None:
    tracked = Tracked(evidence_due=evidence_due)
    if live_since is not None:
        tracked.hold_for_live_check(live_since)
    assert tracked.hold(incidents[kind], delivery, LIVE_HOLD) == hold


def test_the_card_waits_until_every_live_check_it_asked_for_answered() -> None:
    tracked = Tracked()
    tracked.hold_for_live_check(at(5))
    tracked.hold_for_live_check(at(8))
    tracked.answered()
    assert (tracked.live_since, tracked.live_due) == (at(5), 1)
    tracked.answered()
    assert (tracked.live_since, tracked.live_due) == (None, 0)


# -- the pipeline: why each card is late ---------------------------------------------------


def test_a_new_incident_waits_for_group_wait(tmp_path: Path) -> None:
    r = started(tmp_path)
    r.feed(seed(DESCRIBE, RAYCLUSTER))
    incident = only_incident(r)
    assert held(r, incident) is Wait.GROUP_WAIT
    r.tick(until=10)
    assert posts(r) == 1
    assert held(r, incident) is None


def test_an_oom_kill_waits_for_the_memory_evidence_that_sizes_its_bump(tmp_path: Path) -> None:
    answers: list[Item] = []

    def unanswered(target: MemoryTarget) -> object:
        raise OSError("Prometheus is slow today")

    def memory(store: Store) -> Workers:
        worker = MemoryWorker(unanswered, answers.append, headroom=1.25, timeout=30)
        return Workers(memory=worker)

    r = started(tmp_path, memory)
    r.feed(seed(DESCRIBE, RAYCLUSTER))
    incident = only_incident(r)
    r.tick(until=20)  # group_wait (10 s) passed; the evidence's deadline (30 s) not yet
    assert (posts(r), held(r, incident)) == (0, Wait.EVIDENCE)
    r.pipeline.process(Refresh(incident.id, urgent=True))  # a click goes past it
    r.outbox.deliver_due()
    assert posts(r) == 1


def test_an_offer_waiting_on_a_live_check_holds_its_card_clicks_included(tmp_path: Path) -> None:
    asked: list[str] = []

    def live(store: Store) -> Workers:
        return Workers(check_live=lambda incident_id, offers: asked.append(incident_id) or True)

    r = started(tmp_path, live)
    r.feed(observe(clash_parts()))
    incident = only_incident(r)
    assert asked == [incident.id, incident.id]  # its two findings each asked once
    r.tick(until=20)  # group_wait (10 s) passed; the live check's hold (30 s) not yet
    r.pipeline.process(Refresh(incident.id, urgent=True))
    r.outbox.deliver_due()
    assert (posts(r), held(r, incident)) == (0, Wait.LIVE_CHECK)
    r.feed(LiveFacts(incident.id, FactAnswer()))  # one answer of two
    assert (posts(r), held(r, incident)) == (0, Wait.LIVE_CHECK)
    r.feed(LiveFacts(incident.id, FactAnswer()))  # the last: out it goes
    assert posts(r) == 1


def test_a_live_check_that_never_answers_holds_the_card_until_live_hold(tmp_path: Path) -> None:
    def live(store: Store) -> Workers:
        return Workers(check_live=lambda incident_id, offers: True)

    r = started(tmp_path, live)
    r.feed(observe(clash_parts()))
    r.tick(until=29)
    assert posts(r) == 0
    r.tick(until=30)  # asked at T0: 30 s later the card goes out as it is
    assert posts(r) == 1


# -- forgotten whole ---------------------------------------------------------------------------


def test_an_incident_whose_card_never_posts_is_forgotten_whole(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    captured: list[Item] = []

    def write(incident_id: str, name: str, body: bytes) -> str:
        path = tmp_path / f"{incident_id}-{name}"
        path.write_bytes(body)
        return str(path)

    made: list[CaptureWorker] = []

    def collect(kind: str, namespace: str, name: str) -> bytes:
        return b"bundle"

    def workers(store: Store) -> Workers:
        def keep(item: Item) -> bool:
            captured.append(item)
            return True

        made.append(CaptureWorker(collect, store.save_bundle, write, keep))
        return Workers(capture=made[0])

    r = started(tmp_path, workers, group_wait=60)
    r.feed(rayjob_failed())
    incident = only_incident(r)
    deadline = time.monotonic() + 10
    while not captured and time.monotonic() < deadline:  # the capture runs off the thread
        time.sleep(0.01)
    made[0].close()
    (bundle,) = captured
    r.pipeline.process(bundle)
    kept = r.pipeline.tracked(incident.id)
    assert kept is not None
    assert [b.path for b in kept.bundles] == [write(incident.id, "failed.tar.gz", b"bundle")]

    r.feed(Healthy(RAYJOB))  # resolved before its card was posted
    assert r.pipeline.tracked(incident.id) is None
    caplog.set_level(logging.INFO, "pitcrew.pipeline")
    r.pipeline.process(bundle)  # a late bundle does not bring it back
    assert r.pipeline.tracked(incident.id) is None
    assert (
        f"incident {incident.id} was never posted: its bundle is kept for "
        f"`pitcrew bundle {incident.id}`"
    ) in caplog.messages
    assert r.chat.calls == []
    assert [b.name for b in r.store.bundles(incident.id)] == ["failed.tar.gz"]
