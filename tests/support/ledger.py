"""The ledger's entry of one proposal, read as `pitcrew history` reads the ledger.

The daemon never looks an entry up by proposal; the tests that check what an action
left in the ledger do, through the store's `recent_actions`.
"""

from __future__ import annotations

from typing import Protocol

from bot.core.model import LedgerEntry


class Ledger(Protocol):
    def recent_actions(self, n: int) -> tuple[LedgerEntry, ...]: ...


def ledger_entry(store: Ledger, proposal_id: str) -> LedgerEntry | None:
    return next((e for e in store.recent_actions(10_000) if e.proposal_id == proposal_id), None)
