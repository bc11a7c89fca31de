"""Live facts are fetched off the pipeline thread, with a timeout.

An offer that waits on a live fact (is the actor stale? how often was the job
resubmitted?) makes its incident ask for it; the daemon's live-check workers run the
executor's `check`, and the answer comes back on the pipeline's queue as one more item.
A Ray dashboard that accepts connections and never answers holds only the card of the
incident that waits on it, and only until the check times out: then its offers are
decided, withheld with the reason. Other workloads' cards go out as if nothing waited.
"""

from __future__ import annotations

import io
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.ray.client import DashboardUnreachableError, RayClusterConfig
from bot.adapters.ray.executor_base import RayClusters
from bot.adapters.ray.executors import build as ray_executor
from bot.app import factories
from bot.app import wiring as app
from bot.app.settings.loading import load
from bot.app.settings.sections import Settings
from bot.core.actions.facts import FactAnswer, awaiting, merged, settle
from bot.core.incidents.assessment import assessor
from bot.core.incidents.correlator import ChangeKind, Correlator
from bot.core.inputs.reader import read_stream
from bot.core.model import ActionOffer, ObjectRef
from bot.daemon.feed import Context, LiveFacts, observe
from bot.daemon.live_checks import LiveChecks, ask
from tests.support.clash_job import JOB, KILL_FACTS, SUBMISSION, clash, clash_parts, config, offer
from tests.support.daemon import DESCRIBE, RecordingChat, engine, seed

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
KILL_WAITS = (
    "ray.kill_actor: needs a live check that the name's live holder, resolved with the State "
    "API, is one actor in an explicit namespace (not an anonymous per-job one)"
)


# -- the core: which offers wait, and what an answer does -------------------------------------


def test_an_offer_waiting_on_a_live_fact_names_the_fact_as_a_value() -> None:
    diagnosis = clash()
    kill, resubmit = offer(diagnosis, "ray.kill_actor"), offer(diagnosis, "ray.resubmit_job")
    assert (kill.pending_fact, resubmit.pending_fact) == (
        "ray.holder_explicit",
        "ray.resubmits_below_cap",
    )
    assert [o.action for o in awaiting(diagnosis)] == ["ray.kill_actor", "ray.resubmit_job"]


def test_an_offer_withheld_for_another_reason_does_not_wait() -> None:
    """With the OOMKilled pod the clash is a symptom: its kill is withheld, not waiting."""
    diagnosis = engine().diagnose([*clash_parts(), *seed(DESCRIBE).parts])
    kill = offer(diagnosis, "ray.kill_actor")
    assert (kill.offered, kill.pending_fact) == (False, "")
    assert (
        kill.reason == "the clash is a symptom of pod_oom_killed; killing the actor would not help"
    )
    assert "ray.kill_actor" not in [o.action for o in awaiting(diagnosis)]


def test_facts_that_disagree_are_false() -> None:
    assert merged([{"a": True, "b": True}, {"a": False}]) == {"a": False, "b": True}


def test_an_offer_whose_check_gave_no_answer_is_decided_withheld_with_the_reason() -> None:
    diagnosis = clash()
    settled = settle(diagnosis, FactAnswer(problems={"ray.kill_actor": "it timed out"}))
    kill = offer(settled, "ray.kill_actor")
    assert (kill.offered, kill.pending_fact) == (False, "")
    assert kill.reason == KILL_WAITS.removeprefix("ray.kill_actor: ") + " (it timed out)"
    assert offer(settled, "ray.resubmit_job") == offer(diagnosis, "ray.resubmit_job")


def test_the_correlator_asks_once_and_learns_from_the_answer() -> None:
    correlator = Correlator(assessor(engine().library))
    findings = list(engine().diagnose(clash_parts()).findings)
    (opened,) = correlator.add(findings[0].finding, T0)
    asked = [o.action for o in opened.asks]
    for ranked in findings[1:]:
        for change in correlator.add(ranked.finding, T0):
            asked.extend(o.action for o in change.asks)
    assert sorted(asked) == ["ray.kill_actor", "ray.resubmit_job"]  # each once

    facts = dict.fromkeys(KILL_FACTS, True)
    learned = correlator.learn(opened.incident.id, FactAnswer(facts), T0 + timedelta(seconds=2))
    assert learned is not None
    assert learned.kind is ChangeKind.UPDATED
    assert offer(learned.incident.diagnosis, "ray.kill_actor").offered
    assert learned.asks == ()
    assert correlator.learn("inc-gone", FactAnswer(facts), T0) is None


# -- the workers -------------------------------------------------------------------------------


class Queue:
    def __init__(self) -> None:
        self.items: list[Any] = []
        self.arrived = threading.Event()

    def submit(self, item: Any) -> bool:
        self.items.append(item)
        self.arrived.set()
        return True


def test_a_failing_check_is_named_in_the_answer() -> None:
    def broken(o: ActionOffer) -> tuple[dict[str, bool], str]:
        raise DashboardUnreachableError("http://ray:8265/api/actors", "connection refused")

    checked = ask(awaiting(clash()), {"ray.kill_actor": broken})
    assert checked.answer == FactAnswer(
        problems={
            "ray.kill_actor": "the live check could not tell: "
            "http://ray:8265/api/actors: connection refused"
        }
    )


def test_a_check_that_never_answers_is_answered_by_the_timeout_once() -> None:
    release = threading.Event()

    def hangs(o: ActionOffer) -> tuple[dict[str, bool], str]:
        release.wait(10)
        return {"ray.not_live_verl": True}, ""

    sink = Queue()
    checks = LiveChecks({"ray.kill_actor": hangs}, sink, timeout=0.3)
    try:
        began = time.monotonic()
        assert checks.request("inc-1", awaiting(clash()))
        assert not checks.request("inc-2", ())  # nothing to check: no answer will come
        assert sink.arrived.wait(5)
        waited = time.monotonic() - began
        release.set()
        time.sleep(0.2)
    finally:
        checks.close()
    assert 0.3 <= waited < 1.0
    assert sink.items == [
        LiveFacts(
            "inc-1",
            FactAnswer(problems={"ray.kill_actor": "the live check did not answer within 0.3 s"}),
        )
    ]


# -- in the daemon, against a dashboard that never answers -------------------------------------


@pytest.fixture
def silent_dashboard() -> Iterator[str]:
    """A loopback server that accepts connections and never replies."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            accepted.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(2)
    for conn in accepted:
        conn.close()
    server.close()


@pytest.fixture
def daemon_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, silent_dashboard: str
) -> Settings:
    """The `daemon` of tests/conftest.py with `ray.*` run by an executor whose dashboard
    never answers."""
    hung = RayClusterConfig("hung", silent_dashboard, timeout=5.0)

    def silentray(settings: Any, marks: Any) -> Any:
        return ray_executor(RayClusters([hung]), categorize=lambda parts: set())

    monkeypatch.setitem(factories.EXECUTOR_KINDS, "silentray", silentray)
    return load(config(tmp_path, "silentray", "pipeline: {live_check_timeout: 1s}"), {})


def card_of(chat: RecordingChat, title_part: str) -> Callable[[], Any]:
    def find() -> Any:
        return next(
            (c.report for c in chat.calls if c.report and title_part in c.report.title), None
        )

    return find


def wait_for(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {check}")


def test_a_dashboard_that_never_answers_delays_no_other_card_and_its_offers_time_out(
    daemon: app.Daemon,
) -> None:
    chat = daemon.outbox._chat
    assert isinstance(chat, RecordingChat)
    parts = read_stream(io.BytesIO(JOB.encode()), f"ray://hung/jobs/{SUBMISSION}")
    began = time.monotonic()
    assert daemon.queue.submit(
        observe(parts, Context("hung", "", ObjectRef("RayJobSubmission", SUBMISSION)))
    )
    assert daemon.queue.submit(seed(DESCRIBE))  # another workload: an OOMKilled pod

    wait_for(card_of(chat, "verl"))
    other_after = time.monotonic() - began
    waiting = wait_for(card_of(chat, SUBMISSION))
    waiting_after = time.monotonic() - began
    print(f"\nother card after {other_after:.3f} s; waiting card after {waiting_after:.3f} s")

    assert other_after < 1.0
    assert 1.0 <= waiting_after < 3.0
    assert waiting.withheld == (
        f"{KILL_WAITS} (the live check did not answer within 1 s)",
        "ray.resubmit_job: needs a live check that the job has been resubmitted fewer times "
        "than allowed (the live check did not answer within 1 s)",
    )
    (view,) = [v for v in daemon.service.incidents() if v.incident.ray_job_id == SUBMISSION]
    assert view.proposals == ()
