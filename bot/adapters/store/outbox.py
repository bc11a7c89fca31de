"""The notification outbox, the delivery records and the cards' chat references.

The outbox returns only undelivered messages, oldest first per incident and
channel, so a chat outage delays cards but never loses or repeats them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from bot.adapters.store.connection import SharedConnection
from bot.adapters.store.database import Row, Tx
from bot.core.codec import decode_time, dumps, encode_time
from bot.core.incidents.notify import Delivery
from bot.core.model import Notification, NotificationKind


@dataclass(frozen=True, slots=True)
class OutboxMessage:
    """An undelivered notification (its `id` set) with its delivery attempts so far."""

    notification: Notification
    attempts: int = 0
    last_error: str = ""
    next_attempt_at: datetime | None = None
    held: str = ""  # why it waits for a person (the bot not in the channel), "" if not


class OutboxState:
    """Outbox row states: pending until delivered, or abandoned when it can never be."""

    PENDING = "pending"
    DELIVERED = "delivered"
    ABANDONED = "abandoned"


class OutboxRecords(SharedConnection):
    """Queued notifications, what the chat has seen of each incident, and where its card is."""

    def enqueue(self, notification: Notification) -> Notification:
        """Queue a notification; returns it with its outbox id (which also fixes its order).

        It is due from its `created_at` (at once if that is None)."""
        with self._writing(f"queue a notification for incident {notification.incident_id}") as conn:
            return _insert_notification(conn, notification)

    def save_delivery(
        self,
        delivery: Delivery,
        notifications: Iterable[Notification] = (),
        *,
        done: bool = False,
    ) -> tuple[Notification, ...]:
        """Record what the chat has seen of an incident together with the notifications
        that make it so, in one transaction: a restart neither loses a card nor posts it
        twice. `done`: the card needs nothing more (resolved and said so). The incident
        must be stored first. Returns the notifications with their outbox ids."""
        with self._writing(f"save the delivery record of incident {delivery.incident_id}") as conn:
            conn.execute(
                """INSERT INTO deliveries (incident_id, done, body) VALUES (?, ?, ?)
                   ON CONFLICT (incident_id) DO UPDATE SET done = excluded.done,
                       body = excluded.body""",
                (delivery.incident_id, int(done), dumps(delivery)),
            )
            return tuple(_insert_notification(conn, n) for n in notifications)

    def delivery(self, incident_id: str) -> Delivery | None:
        with self._reading(f"read the delivery record of incident {incident_id}") as conn:
            row = conn.execute(
                "SELECT body FROM deliveries WHERE incident_id = ?", (incident_id,)
            ).fetchone()
        return None if row is None else self._load(Delivery, row["body"], incident_id)

    def pending_deliveries(self) -> tuple[Delivery, ...]:
        """Delivery records of incidents whose card still needs something (not done)."""
        with self._reading("list pending delivery records") as conn:
            rows = conn.execute(
                "SELECT incident_id, body FROM deliveries WHERE done = 0 ORDER BY incident_id"
            ).fetchall()
        return tuple(self._load(Delivery, row["body"], row["incident_id"]) for row in rows)

    def next_due(self, now: datetime) -> OutboxMessage | None:
        """The oldest undelivered message that heads its (incident, channel) queue and whose
        next attempt is due at `now`. Later messages of a queue wait behind its head, so
        an update never overtakes the post it updates."""
        with self._reading("read the outbox") as conn:
            row = conn.execute(
                """SELECT * FROM outbox AS o
                   WHERE o.status = ?
                     AND o.id = (SELECT MIN(h.id) FROM outbox AS h
                                 WHERE h.status = o.status AND h.incident_id = o.incident_id
                                   AND h.channel = o.channel)
                     AND (o.next_attempt_at IS NULL OR o.next_attempt_at <= ?)
                   ORDER BY o.id LIMIT 1""",
                (OutboxState.PENDING, encode_time(now)),
            ).fetchone()
        return None if row is None else self._outbox_message(row)

    def pending_notifications(self) -> int:
        with self._reading("count the outbox") as conn:
            row = conn.execute(
                "SELECT COUNT(*) AS n FROM outbox WHERE status = ?", (OutboxState.PENDING,)
            ).fetchone()
        return int(row["n"])

    def mark_delivered(self, message_id: int, chat_ref: str, at: datetime) -> bool:
        """The chat accepted the message; a POST's `chat_ref` becomes the incident's card in
        its channel (see `chat_ref`). False if the message was not pending."""
        with self._writing(f"mark notification {message_id} delivered") as conn:
            row = conn.execute(
                "SELECT incident_id, channel, kind FROM outbox WHERE id = ? AND status = ?",
                (message_id, OutboxState.PENDING),
            ).fetchone()
            if row is None:
                return False
            conn.execute(
                "UPDATE outbox SET status = ?, chat_ref = ?, settled_at = ? WHERE id = ?",
                (OutboxState.DELIVERED, chat_ref, encode_time(at), message_id),
            )
            if row["kind"] == NotificationKind.POST.value:
                _remember_chat_ref(conn, row["incident_id"], row["channel"], chat_ref, at)
            return True

    def mark_failed(
        self, message_id: int, error: str, next_attempt_at: datetime, held: str = ""
    ) -> bool:
        """A delivery attempt failed: count it and retry no earlier than `next_attempt_at`;
        `held`: why it waits for a person to act ("" when it does not)."""
        with self._writing(f"record a failed delivery of notification {message_id}") as conn:
            return (
                conn.execute(
                    """UPDATE outbox SET attempts = attempts + 1, last_error = ?,
                           next_attempt_at = ?, held = ? WHERE id = ? AND status = ?""",
                    (error, encode_time(next_attempt_at), held, message_id, OutboxState.PENDING),
                ).rowcount
                == 1
            )

    def mark_abandoned(self, message_id: int, error: str, at: datetime) -> bool:
        """Give up on a message the chat will never accept, so it stops blocking its queue."""
        with self._writing(f"abandon notification {message_id}") as conn:
            return (
                conn.execute(
                    """UPDATE outbox SET status = ?, attempts = attempts + 1, last_error = ?,
                           settled_at = ? WHERE id = ? AND status = ?""",
                    (
                        OutboxState.ABANDONED,
                        error,
                        encode_time(at),
                        message_id,
                        OutboxState.PENDING,
                    ),
                ).rowcount
                == 1
            )

    def dead_letters(self, limit: int = 20) -> tuple[OutboxMessage, ...]:
        """Messages the outbox gave up on, newest first (`pitcrew status`)."""
        with self._reading("list abandoned notifications") as conn:
            rows = conn.execute(
                "SELECT * FROM outbox WHERE status = ? ORDER BY id DESC LIMIT ?",
                (OutboxState.ABANDONED, limit),
            ).fetchall()
        return tuple(self._outbox_message(row) for row in rows)

    def dead_letter_count(self) -> int:
        """How many messages the outbox gave up on (kept for `store.retention`)."""
        with self._reading("count abandoned notifications") as conn:
            row = conn.execute(
                "SELECT COUNT(*) AS n FROM outbox WHERE status = ?", (OutboxState.ABANDONED,)
            ).fetchone()
        return int(row["n"])

    def held_notifications(self, limit: int = 20) -> tuple[OutboxMessage, ...]:
        """Undelivered messages waiting for a person to act (`held`), oldest first."""
        with self._reading("list held notifications") as conn:
            rows = conn.execute(
                "SELECT * FROM outbox WHERE status = ? AND held <> '' ORDER BY id LIMIT ?",
                (OutboxState.PENDING, limit),
            ).fetchall()
        return tuple(self._outbox_message(row) for row in rows)

    def chat_ref(self, incident_id: str, channel: str | None = None) -> str | None:
        """The chat reference of the incident's card (its delivered POST) in `channel`,
        or in the channel it was posted to first when `channel` is None."""
        sql = "SELECT ref FROM chat_refs WHERE incident_id = ?"
        args = [incident_id]
        if channel is not None:
            sql += " AND channel = ?"
            args.append(channel)
        with self._reading(f"read the chat reference of incident {incident_id}") as conn:
            row = conn.execute(sql + " ORDER BY posted_at, rowid LIMIT 1", args).fetchone()
        return None if row is None else str(row["ref"])

    def _outbox_message(self, row: Row) -> OutboxMessage:
        notification = self._load(Notification, row["body"], f"notification {row['id']}")
        retry_at = row["next_attempt_at"]
        return OutboxMessage(
            notification=dataclasses.replace(notification, id=int(row["id"])),
            attempts=int(row["attempts"]),
            last_error=str(row["last_error"]),
            next_attempt_at=None if retry_at is None else decode_time(retry_at),
            held=str(row["held"]),
        )


def _insert_notification(conn: Tx, notification: Notification) -> Notification:
    body = dumps(dataclasses.replace(notification, id=None))
    due = None if notification.created_at is None else encode_time(notification.created_at)
    row = conn.execute(
        """INSERT INTO outbox (incident_id, channel, kind, next_attempt_at, body)
           VALUES (?, ?, ?, ?, ?) RETURNING id""",
        (notification.incident_id, notification.channel, notification.kind.value, due, body),
    ).fetchone()
    return dataclasses.replace(notification, id=int(row["id"]))


def _remember_chat_ref(conn: Tx, incident_id: str, channel: str, ref: str, at: datetime) -> None:
    conn.execute(
        """INSERT INTO chat_refs (incident_id, channel, ref, posted_at) VALUES (?, ?, ?, ?)
           ON CONFLICT (incident_id, channel)
           DO UPDATE SET ref = excluded.ref, posted_at = excluded.posted_at""",
        (incident_id, channel, ref, encode_time(at)),
    )
