"""Requests already seen, kept in the store: signed chat requests for Slack's signature
window, Alertmanager's alerts (by fingerprint, start and state) for the store's retention.

Why this exists: a signed request copied off the wire can be sent again for five
minutes, and a daemon that remembered what it had seen only in memory forgot
it at a restart, so a replayed `/pitcrew silence` was accepted after one. A
request's signature is written here the first time with the moment its
signature stops being valid (its timestamp + five minutes, not its receipt: a
request stamped in the future stays valid longer); a second copy before then
finds it and is refused. Rows past that moment are deleted as new ones come. An
alert's row is written before it is queued and forgotten if the queue refuses it, so
the copy Alertmanager sends again is taken (`bot.adapters.http.alertmanager`).
"""

from __future__ import annotations

from bot.adapters.store.connection import SharedConnection


class ReplayRecords(SharedConnection):
    def first_time(self, signature: str, now: float, until: float) -> bool:
        """Record `signature`, valid until `until` (seconds since the epoch, as `now`);
        False when it was seen before and is still valid."""
        with self._writing("remember a signed request") as conn:
            conn.execute("DELETE FROM seen_requests WHERE forget_at < ?", (now,))
            added = conn.execute(
                """INSERT INTO seen_requests (signature, forget_at) VALUES (?, ?)
                   ON CONFLICT (signature) DO NOTHING""",
                (signature, max(until, now)),
            ).rowcount
        return added == 1

    def forget(self, signature: str) -> None:
        """Forget `signature`: what it stood for was not taken after all (the queue was
        full), so the sender's next copy must be taken."""
        with self._writing("forget a request") as conn:
            conn.execute("DELETE FROM seen_requests WHERE signature = ?", (signature,))
