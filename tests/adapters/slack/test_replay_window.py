"""A signed Slack request is remembered until its signature expires (its timestamp +
five minutes), across a restart, and a timestamp over a minute in the future is refused.
Correctly signed requests (slack_sdk's SignatureVerifier), the store's own table."""

from __future__ import annotations

from pathlib import Path

import pytest
from slack_sdk.signature import SignatureVerifier

from bot.adapters.slack.events import Admitted, Gate
from bot.adapters.store.store import Store
from tests.support.faults import Measured

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
BODY = "token=x&team_id=T1&user_id=U1&command=%2Fpitcrew&text=silence+inc-1+2h"
NOW = 1_800_000_000


def signed(stamp: int) -> dict[str, str]:
    signature = SignatureVerifier(SECRET).generate_signature(timestamp=str(stamp), body=BODY)
    assert signature is not None
    return {"X-Slack-Request-Timestamp": str(stamp), "X-Slack-Signature": signature}


def admit(store: Store, headers: dict[str, str], at: float) -> str:
    answer = Gate(SignatureVerifier(SECRET), store, now=lambda: at).admit(headers, BODY.encode())
    return "admitted" if isinstance(answer, Admitted) else f"{answer.status} {answer.error}"


@pytest.mark.parametrize(
    ("stamp", "replayed_after", "answer"),
    [
        (NOW, 299, "401 replayed request"),
        (NOW, 301, "401 stale request: the timestamp is over five minutes off"),
        (NOW + 60, 359, "401 replayed request"),  # valid until its timestamp + 300
        (NOW + 60, 361, "401 stale request: the timestamp is over five minutes off"),
        (NOW - 200, 99, "401 replayed request"),
    ],
    ids=["now-inside", "now-expired", "ahead-inside", "ahead-expired", "behind-inside"],
)
def test_a_replay_is_refused_for_as_long_as_its_signature_is_valid_across_a_restart(
    tmp_path: Path, stamp: int, replayed_after: int, answer: str, measured: Measured
) -> None:
    with Store(tmp_path / "state.db") as store:
        assert admit(store, signed(stamp), NOW) == "admitted"
    with Store(tmp_path / "state.db") as restarted:
        replayed = admit(restarted, signed(stamp), NOW + replayed_after)
    measured.bad_clicks_accepted(int(replayed == "admitted"))
    assert replayed == answer


@pytest.mark.parametrize(("ahead", "answer"), [(60, "admitted"), (61, None), (290, None)])
def test_a_timestamp_over_a_minute_in_the_future_is_refused(
    tmp_path: Path, ahead: int, answer: str | None, measured: Measured
) -> None:
    with Store(tmp_path / "state.db") as store:
        got = admit(store, signed(NOW + ahead), NOW)
    measured.bad_clicks_accepted(int(answer is None and got == "admitted"))
    assert got == (answer or "401 the timestamp is over a minute in the future")


def test_the_memory_forgets_a_signature_once_it_has_expired(tmp_path: Path) -> None:
    with Store(tmp_path / "state.db") as store:
        assert admit(store, signed(NOW), NOW) == "admitted"
        assert store.first_time("v0=other", NOW + 301.0, NOW + 601.0) is True
        assert store.first_time(signed(NOW)["X-Slack-Signature"], NOW + 301.0, NOW + 300.0)
