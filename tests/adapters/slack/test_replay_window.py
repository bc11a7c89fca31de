"""A signed Slack request is remembered until its signature expires (its timestamp +
five minutes), across a restart, whether it was taken or refused; the window is Slack's
five minutes either way of this host's clock. Correctly signed requests (slack_sdk's
SignatureVerifier), the store's own table."""

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
        (NOW, 301, "401 stale request: the timestamp is over five minutes old"),
        (NOW + 60, 359, "401 replayed request"),  # valid until its timestamp + 300
        (NOW + 60, 361, "401 stale request: the timestamp is over five minutes old"),
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


@pytest.mark.parametrize(
    ("ahead", "answer"),
    [
        (60, "admitted"),
        (299, "admitted"),
        (300, "admitted"),
        (301, "401 the timestamp is over five minutes ahead"),
        (3600, "401 the timestamp is over five minutes ahead"),
    ],
)
def test_a_timestamp_over_five_minutes_ahead_is_refused(
    tmp_path: Path, ahead: int, answer: str, measured: Measured
) -> None:
    with Store(tmp_path / "state.db") as store:
        got = admit(store, signed(NOW + ahead), NOW)
    measured.bad_clicks_accepted(int(ahead > 300 and got == "admitted"))
    assert got == answer


@pytest.mark.parametrize(
    ("ahead", "again_after", "first", "again"),
    [
        (290, 374, "admitted", "401 replayed request"),
        (
            301,
            0,
            "401 the timestamp is over five minutes ahead",
            "401 the timestamp is over five minutes ahead",
        ),
        (301, 74, "401 the timestamp is over five minutes ahead", "401 replayed request"),
        (400, 374, "401 the timestamp is over five minutes ahead", "401 replayed request"),
        (400, 699, "401 the timestamp is over five minutes ahead", "401 replayed request"),
        (
            400,
            701,
            "401 the timestamp is over five minutes ahead",
            "401 stale request: the timestamp is over five minutes old",
        ),
    ],
    ids=[
        "taken",
        "refused-still-ahead",
        "refused-then-inside",
        "far-ahead-then-inside",
        "far-ahead-last-second",
        "far-ahead-then-stale",
    ],
)
def test_a_refused_request_is_remembered_for_its_whole_window_across_a_restart(
    tmp_path: Path, ahead: int, again_after: int, first: str, again: str, measured: Measured
) -> None:
    """The same bytes sent again: a request refused for being ahead of the window is not
    taken when its time comes (it created a silence 374 s later)."""
    with Store(tmp_path / "state.db") as store:
        assert admit(store, signed(NOW + ahead), NOW) == first
    with Store(tmp_path / "state.db") as restarted:
        replayed = admit(restarted, signed(NOW + ahead), NOW + again_after)
    measured.bad_clicks_accepted(int(replayed == "admitted"))
    assert replayed == again


def test_the_memory_forgets_a_signature_once_it_has_expired(tmp_path: Path) -> None:
    with Store(tmp_path / "state.db") as store:
        assert admit(store, signed(NOW), NOW) == "admitted"
        assert store.first_time("v0=other", NOW + 301.0, NOW + 601.0) is True
        assert store.first_time(signed(NOW)["X-Slack-Signature"], NOW + 301.0, NOW + 300.0)
