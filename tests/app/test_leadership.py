"""A deposed leader stops at once: a write its store refuses under a newer leader's term
ends the process (status 3) saying why, whatever thread met the refusal; the Lease's
namespace and this replica's identity come from the pod."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.app import leadership
from bot.app.settings.sections import Settings

DEPOSED = """
import sys, threading
from bot.adapters.store.store import Store
from bot.app.leadership import refused
old, new = Store(sys.argv[1], init=True), Store(sys.argv[1])
old.fence(1, refused)
new.fence(2)  # the replica that took the Lease over
thread = threading.Thread(target=lambda: old.set_bookmark("outbox", "late"))
thread.start()
thread.join()
print("still running")
"""


def test_a_write_refused_under_a_newer_term_ends_the_process_saying_why(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", DEPOSED, str(tmp_path / "state.db")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == leadership.EXIT_DEPOSED == 3
    assert "still running" not in done.stdout
    assert "this replica no longer leads: " in done.stderr
    assert "this pitcrew's term 1 is older than the store's 2" in done.stderr


def test_the_lease_is_in_the_configured_namespace_else_the_pods(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    named = Settings.model_validate(
        {
            "store": {"url": "postgresql://pitcrew@db/pitcrew"},
            "leader_election": {"namespace": "ops"},
        }
    )
    assert leadership.lease_namespace(named) == "ops"
    pod = tmp_path / "namespace"
    pod.write_text("pitcrew\n")
    monkeypatch.setattr(leadership, "SERVICE_ACCOUNT_NAMESPACE", pod)
    assert leadership.lease_namespace(Settings()) == "pitcrew"
    monkeypatch.setattr(leadership, "SERVICE_ACCOUNT_NAMESPACE", tmp_path / "none")
    assert leadership.lease_namespace(Settings()) == "default"


def test_each_process_is_a_holder_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTNAME", "pitcrew-7d9f-abcde")
    first, second = leadership.identity(), leadership.identity()
    assert first.startswith("pitcrew-7d9f-abcde_")
    assert len(first) == len("pitcrew-7d9f-abcde_") + 8
    assert first != second
