"""Cards posted while the chat's history did not answer, kept until they are checked.

Why this exists: before a card is posted the channel's history is searched for an
earlier one of its incident; when that look fails the card is posted anyway and
checked once history answers again (`bot.adapters.slack.reconcile`). Kept in
memory only, a restart (or a kill) before then left a possible second card in
the channel for good. A row is written when such a card is posted, read back at
the next start, and deleted once its card is checked. One row per channel and
incident: a later card of the incident posted unchecked replaces the row, since
the card the chat keeps is the latest. A row without a `ts` is a post that went
unanswered (Slack may have it; which card is kept is not known yet). Rows go with their
incident at cleanup.
"""

from __future__ import annotations

from datetime import datetime

from bot.adapters.store.connection import SharedConnection
from bot.core.codec import CodecError, decode_time, encode_time
from bot.daemon.ports import KeptUnchecked, UncheckedCard


class UncheckedRecords(SharedConnection):
    """Cards posted unchecked, oldest first."""

    def remember_unchecked(self, card: UncheckedCard, at: datetime) -> None:
        since = None if card.since is None else encode_time(card.since)
        with self._writing("remember a card posted unchecked") as conn:
            conn.execute(
                """INSERT INTO unchecked_cards (channel_id, incident_id, ts, since, posted_at)
                   VALUES (?, ?, ?, ?, ?)
                   ON CONFLICT (channel_id, incident_id) DO UPDATE SET ts = excluded.ts,
                       since = excluded.since, posted_at = excluded.posted_at""",
                (card.channel_id, card.incident_id, card.ts, since, encode_time(at)),
            )

    def unchecked_cards(self) -> KeptUnchecked:
        """Every card still to check, oldest post first; a row that cannot be read is
        named with its problem and stays in the table."""
        with self._reading("read cards posted unchecked") as conn:
            rows = conn.execute(
                """SELECT channel_id, incident_id, ts, since FROM unchecked_cards
                   ORDER BY posted_at, channel_id, incident_id"""
            ).fetchall()
        cards: list[UncheckedCard] = []
        unreadable: list[str] = []
        for row in rows:
            channel_id, incident_id, ts = row["channel_id"], row["incident_id"], row["ts"]
            where = f"the card of {incident_id!r} in {channel_id!r} posted unchecked"
            try:
                since = None if row["since"] is None else decode_time(row["since"], "since")
            except CodecError as exc:
                unreadable.append(f"{where} is unreadable in {self.path}: {exc}")
                continue
            missing = [name for name in ("channel_id", "incident_id") if not row[name]]
            if missing:
                unreadable.append(f"{where} is unreadable in {self.path}: no {missing[0]}")
                continue
            cards.append(UncheckedCard(str(channel_id), str(ts or ""), str(incident_id), since))
        return KeptUnchecked(tuple(cards), tuple(unreadable))

    def forget_unchecked(self, card: UncheckedCard) -> None:
        """The card is checked; a later card of its incident remembered since stays."""
        with self._writing("forget a card checked") as conn:
            conn.execute(
                "DELETE FROM unchecked_cards WHERE channel_id = ? AND incident_id = ? AND ts = ?",
                (card.channel_id, card.incident_id, card.ts),
            )
