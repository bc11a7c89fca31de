"""`pitcrew status` lists the cards posted while Slack's history did not answer and not
yet checked for a duplicate, and names a row it cannot read: what a person looks at
when a channel may hold two cards of one incident."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from typer.testing import CliRunner

from bot.adapters.store.store import Store
from bot.app.cli_app import app as cli_app
from tests.support.unchecked_cards import A, B, at


def status(db: Path) -> str:
    shown = CliRunner().invoke(cli_app, ["status", "--store", str(db)])
    assert shown.exit_code == 0, shown.output
    return shown.output


def test_status_lists_the_cards_awaiting_the_duplicate_check(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    with Store(db) as store:
        store.remember_unchecked(A, at(0))
        store.remember_unchecked(B, at(1))
    assert (
        "cards posted while Slack's history did not answer: 2\n"
        "  inc-a  C0PITCREW 1772366400.000100  checked once it answers\n"
        "  inc-b  C0PITCREW 1772366410.000300  checked once it answers\n"
    ) in status(db)

    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE unchecked_cards SET ts = '' WHERE incident_id = 'inc-a'")
        conn.execute("UPDATE unchecked_cards SET since = 'soon' WHERE incident_id = 'inc-b'")
    assert (
        "cards posted while Slack's history did not answer: 1\n"
        "  inc-a  C0PITCREW (a post that went unanswered)  checked once it answers\n"
        f"  the card of 'inc-b' in 'C0PITCREW' posted unchecked is unreadable in {db}: "
        "since: expected an ISO 8601 time, got 'soon'\n"
    ) in status(db)


def test_status_of_a_store_without_them_says_none(tmp_path: Path) -> None:
    with Store(tmp_path / "state.db"):
        pass
    assert "cards posted while Slack's history did not answer: 0\n" in status(tmp_path / "state.db")
