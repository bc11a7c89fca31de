"""The store keeps the audit of evidence fetches on either store: every ask, allowed or
refused, with who asked, how and what they were answered, newest first across a restart,
until `store.retention` has passed."""

from __future__ import annotations

from datetime import timedelta

from bot.adapters.store.store import Store
from bot.daemon.ports import EvidenceFetch
from tests.support.records import minutes

REFUSAL = "U0BOB may fetch evidence only in namespaces shop-* (approvals.approvers[1])"
ASKS = (
    EvidenceFetch("inc-1", "U0BOB", "slack C0PITCREW", "refused", REFUSAL, minutes(1)),
    EvidenceFetch("inc-1", "U0ALICE", "slack C0PITCREW", "allowed", "", minutes(2)),
    EvidenceFetch("inc-2", "console:ops", "console", "written", "/tmp/inc-2.tar.gz", minutes(90)),
)


def test_every_ask_is_kept_newest_first_across_a_restart(store_location: str) -> None:
    with Store(store_location) as store:
        for fetch in ASKS:
            store.record_fetch(fetch)
    with Store(store_location) as reopened:
        assert reopened.recent_fetches() == tuple(reversed(ASKS))
        assert reopened.recent_fetches(2) == (ASKS[2], ASKS[1])


def test_the_audit_goes_once_its_retention_has_passed(store: Store) -> None:
    for fetch in ASKS:
        store.record_fetch(fetch)
    store.cleanup(minutes(70), retention=timedelta(minutes=60))
    assert store.recent_fetches() == (ASKS[2],)
