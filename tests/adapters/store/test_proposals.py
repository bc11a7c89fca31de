"""The proposals and actions a pitcrew stores name its cluster; those stored before
clusters were named, or by a pitcrew that had none, read as the local cluster's. On both
stores (tests/adapters/store/conftest.py)."""

from __future__ import annotations

from bot.adapters.store.store import Store
from bot.core.model import ActionResult
from tests.support.ledger import ledger_entry
from tests.support.records import T0, incident, ledger, proposal


def test_a_proposal_and_its_action_carry_the_cluster_of_the_pitcrew_that_stored_them(
    store_location: str,
) -> None:
    with Store(store_location, cluster="eu-a") as store:
        store.upsert_incident(incident("inc-1"))
        store.create_proposal(proposal("p-1"))
        store.start_action(ledger("p-1"))
        store.finish_action("p-1", ActionResult.SUCCEEDED, T0)
        stored = store.get_proposal("p-1")
        entry = ledger_entry(store, "p-1")
    assert stored is not None
    assert stored.cluster == "eu-a"
    assert entry is not None
    assert (entry.cluster, entry.result) == ("eu-a", "succeeded")


def test_rows_stored_before_clusters_were_named_read_as_the_local_cluster(
    store_location: str,
) -> None:
    with Store(store_location) as before:  # no name: what every store held until now
        before.upsert_incident(incident("inc-1"))
        before.create_proposal(proposal("p-1"))
        before.start_action(ledger("p-1"))
    with Store(store_location, cluster="eu-a") as after:
        stored = after.get_proposal("p-1")
        entry = ledger_entry(after, "p-1")
    assert stored is not None
    assert stored.cluster == "eu-a"
    assert entry is not None
    assert entry.cluster == "eu-a"


def test_a_proposal_of_another_cluster_keeps_its_name(store_location: str) -> None:
    with Store(store_location, cluster="eu-a") as store:
        store.upsert_incident(incident("inc-1"))
        store.create_proposal(proposal("p-2", cluster="eu-b"))
        stored = store.get_proposal("p-2")
    assert stored is not None
    assert stored.cluster == "eu-b"
