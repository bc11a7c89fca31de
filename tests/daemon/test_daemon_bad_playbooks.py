"""One bad playbook cannot stall or kill the daemon: the ordinary failure posted right
behind its evidence still gets its card within 5 s.

A real daemon in process (`wiring.build` + `start`, HTTP on a free loopback port)
loads the built-in library and ONE bad playbook from `playbooks.dirs`. Its evidence
goes to `/ingest` first (on a workload of its own), the seed's driver log right
behind it. The bad kinds: a template that would run for hours (loops nested over
`range` or over a string), raise, print or build gigabytes, or recurse without
end; and a regex that backtracks exponentially in Python's `re`, which RE2
confirms in linear time (it matches nothing and costs nothing). The bad
playbook's card shows its plain fallback text, `/healthz` answers while the daemon
works through it, `/metrics` counts the failed render under the playbook's name,
and the log names its file, line and reason once."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

import pytest

from bot.app import wiring as app
from bot.app.settings.loading import load
from bot.app.settings.sections import Settings
from bot.core.inputs.reader import read_stream
from tests.support.daemon import DRIVER_LOG, SEED, RecordingChat, config, engine, http
from tests.support.faults import Measured
from tests.support.playbooks import playbook, write_library

BAD = "bad-playbook"
DEADLINE = 5.0  # seconds from the ordinary failure's post to its card
BAD_WORKLOAD = "namespace=ml-train&workload=RayJob/bad-job"


@dataclass(frozen=True)
class Bad:
    """A bad playbook: its signature, its diagnosis template, the evidence that
    triggers it, and why its text cannot be rendered (None: it matches nothing)."""

    regex: str
    diagnosis: str
    evidence: bytes
    why: str | None

    @property
    def card(self) -> str | None:
        """The bad playbook's card: its plain fallback text."""
        if self.why is None:
            return None
        return f"Root cause: Playbook {BAD} (the playbook's text could not be rendered: {self.why})"


CASES = {
    "nested-loops": Bad(
        "BadThing happened",
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}x",
        b"BadThing happened here\n",
        "rendering took over 0.5s",
    ),
    "raises": Bad(
        "BadThing happened",
        "{{ 1 // 0 }}",
        b"BadThing happened here\n",
        "integer division or modulo by zero",
    ),
    "huge-output": Bad(
        "BadThing happened",
        "{% for i in range(99999) %}{{ 'word ' }}{% endfor %}",
        b"BadThing happened here\n",
        "the text grew over 20000 characters",
    ),
    "recursive-macro": Bad(
        "BadThing happened",
        "{% macro again() %}{{ again() }}{% endmacro %}{{ again() }}",
        b"BadThing happened here\n",
        "maximum recursion depth exceeded",
    ),
    "loops-over-a-string": Bad(
        "BadThing happened",
        "{% set s = 'a' * 20000 %}{% for a in s %}{% for b in s %}{% endfor %}{% endfor %}x",
        b"BadThing happened here\n",
        "rendering took over 0.5s",
    ),
    "a-gigabyte-string": Bad(
        "BadThing happened",
        "{{ 'x' | center(10**9) | length }}",
        b"BadThing happened here\n",
        "a width or count over 20000",
    ),
    "doubling-in-a-macro": Bad(
        "BadThing happened",
        "{% macro grow(s, n) %}{% if n %}{{ grow(s ~ s, n - 1) }}{% else %}{{ s | length }}"
        "{% endif %}{% endmacro %}{{ grow('ab', 60) }}",
        b"BadThing happened here\n",
        "a value over 20000 characters",
    ),
    "exponential-regex": Bad(
        "(a+)+$",
        "the line is all a's",
        b"a" * 50_000 + b"!\n",
        None,
    ),
}


@pytest.fixture(params=list(CASES), ids=list(CASES))
def case(request: pytest.FixtureRequest) -> Bad:
    return CASES[request.param]


@pytest.fixture
def daemon_settings(tmp_path: Path, case: Bad) -> Settings:
    """The `daemon` of tests/conftest.py with the case's playbook in its library."""
    doc = playbook(BAD, "application_error", [{"name": "bad", "regex": case.regex}])
    doc["diagnosis"] = case.diagnosis
    directory = write_library(tmp_path / "playbooks", doc)
    return load(config(tmp_path, playbooks=f"playbooks: {{dirs: [{directory}]}}\n"), {})


@pytest.fixture
def daemon_engine() -> None:
    return None  # the library the settings name: the built-in one and the bad playbook


def _cards(chat: RecordingChat) -> list[str]:
    with chat.lock:
        return [c.report.diagnosis for c in chat.calls if c.kind == "post" and c.report]


def _card(chat: RecordingChat, text: str, deadline: float) -> bool:
    """A card saying exactly `text` was posted before `deadline`."""
    while time.monotonic() < deadline:
        if text in _cards(chat):
            return True
        time.sleep(0.02)
    return False


@pytest.mark.slow
def test_a_bad_playbook_costs_only_its_own_card(
    daemon: app.Daemon, case: Bad, measured: Measured, caplog: pytest.LogCaptureFixture
) -> None:
    base = f"http://127.0.0.1:{daemon.http.port}"
    chat = daemon.outbox._chat
    assert isinstance(chat, RecordingChat)
    driver_log = (SEED / DRIVER_LOG).read_bytes()
    ordinary = engine().diagnose(read_stream(BytesIO(driver_log), DRIVER_LOG)).text  # built-ins

    status, body = http(f"{base}/ingest?origin=bad.log&{BAD_WORKLOAD}", case.evidence)
    assert (status, json.loads(body)) == (202, {"accepted": 1})
    posted = time.monotonic()
    status, _ = http(f"{base}/ingest?origin=driver.log", driver_log)
    assert status == 202
    healthz = http(f"{base}/healthz")  # while the daemon works through the bad playbook
    arrived = _card(chat, ordinary, posted + DEADLINE)
    bad = case.card is not None and _card(chat, case.card, time.monotonic() + 1)
    # evidence that should reach a card: the ordinary failure, and the bad playbook's
    measured.lost(accepted=1 + (case.card is not None), arrived=arrived + bad)

    assert arrived, f"no ordinary card within {DEADLINE:g}s; cards: {_cards(chat)}"
    assert healthz[0] == 200
    assert json.loads(healthz[1])["checks"]["pipeline"] is True
    metrics = http(f"{base}/metrics")[1].decode()
    counter = f'pitcrew_render_failures_total{{playbook="{BAD}"}}'
    if case.card is None:
        assert _cards(chat) == [ordinary]
        assert counter not in metrics
    else:
        assert sorted(_cards(chat)) == sorted([ordinary, case.card])
        assert f"{counter} 1.0" in metrics.splitlines()
    source = daemon.settings.playbooks.dirs[0] / f"{BAD}.yaml"
    logged = [
        r.getMessage().partition(": ")[2]
        for r in caplog.records
        if r.name == "pitcrew.pipeline" and "could not be rendered" in r.getMessage()
    ]
    expected = [
        f"the text of playbook {BAD} ({source}:8) could not be rendered, "
        f"the card shows its plain text: {case.why}"
    ]
    assert logged == (expected if case.why else [])


MISSING = b"ModuleNotFoundError: No module named 'vllm'\n"


@pytest.mark.slow
def test_a_bad_playbook_in_the_same_log_costs_only_its_own_line_of_the_card(
    daemon: app.Daemon, case: Bad, measured: Measured
) -> None:
    """The bad playbook's evidence and an ordinary failure in one log are one card: the
    ordinary root cause as it reads without the bad playbook, the bad finding's plain
    text under it, one failed render counted."""
    base = f"http://127.0.0.1:{daemon.http.port}"
    chat = daemon.outbox._chat
    assert isinstance(chat, RecordingChat)
    log = case.evidence + MISSING
    alone = engine().diagnose(read_stream(BytesIO(log), "driver.log")).text  # built-ins only
    symptom = f"Symptom of dependency_runtime_env: Playbook {BAD} "
    expected = alone + (
        f"\n{symptom}(the playbook's text could not be rendered: {case.why})" if case.why else ""
    )

    posted = time.monotonic()
    status, body = http(f"{base}/ingest?origin=driver.log", log)
    assert (status, json.loads(body)) == (202, {"accepted": 1})
    arrived = _card(chat, expected, posted + DEADLINE)
    measured.lost(accepted=1, arrived=arrived)

    assert arrived, f"no card within {DEADLINE:g}s; cards: {_cards(chat)}"
    assert _cards(chat) == [expected]
    metrics = http(f"{base}/metrics")[1].decode().splitlines()
    counted = [line for line in metrics if line.startswith("pitcrew_render_failures_total{")]
    assert counted == (
        [f'pitcrew_render_failures_total{{playbook="{BAD}"}} 1.0'] if case.why else []
    )
