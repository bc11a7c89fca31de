"""What `/healthz` and `/readyz` answer, from the daemon's parts, and whether this replica
leads.

Why this exists: the kubelet restarts a pod whose `/healthz` fails and sends no traffic
to one whose `/readyz` fails, so each must ask exactly what this replica is responsible
for. The leader (or the only replica) runs the pipeline's thread, the outbox and the
sources, and answers for them; a standby (leader election) runs none of them and must not
be restarted or taken out for that: it answers for its chat connection, its store and
its elector. `/readyz` also says, in words (`notes`), which store it uses and how it
answered, whether this replica leads and who holds the Lease, and when clicks for
another cluster's pitcrew came here (`bot.daemon.strays`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.adapters.store.store import Store
from bot.core.errors import StoreError
from bot.daemon import strays
from bot.daemon.elector import Elector
from bot.daemon.metrics import Metrics
from bot.daemon.outbox import Outbox
from bot.daemon.ports import Chat, Source, utcnow
from bot.daemon.taking import Taking

log = logging.getLogger("pitcrew")


@dataclass
class Leadership:
    """Whether this replica leads: always, without leader election; with it, from the
    moment it holds the Lease and its leader's parts run."""

    elector: Elector | None = None
    running: threading.Event = field(default_factory=threading.Event)
    phase: threading.Lock = field(default_factory=threading.Lock)  # leading, or stopping
    stopping: bool = False

    def leads(self) -> bool:
        return self.elector is None or self.running.is_set()

    def note(self) -> str:
        """Who leads, in words ("" without leader election)."""
        if self.elector is None:
            return ""
        role = self.elector.role()
        lease = self.elector.lock.name
        if self.leads() and role.leading:
            return f"leading: this replica holds the {lease} (term {role.term})"
        holder = (
            f"{role.holder} holds the {lease} (term {role.term})"
            if role.holder
            else (f"nobody holds the {lease}")
        )
        problem = f"; {role.problem}" if role.problem else ""
        return f"standing by: {holder}{problem}"


@dataclass
class Health:
    """The probes' checks and notes over the daemon's parts."""

    queue: Taking
    outbox: Outbox
    chat: Chat
    store: Store
    sources: Sequence[Source]
    metrics: Metrics
    one_app: bool = False  # Socket Mode: a shared Slack app makes this replica not ready
    leadership: Leadership = field(default_factory=Leadership)
    store_answer: str = ""  # which store, and whether it answered at the last readiness check

    def liveness(self) -> dict[str, bool]:
        checks = {"chat": chat_ok(self.chat)}
        elector = self.leadership.elector
        if elector is not None:
            checks["lease"] = elector.alive()
        if self.leadership.leads():
            checks = {"pipeline": self.queue.alive(), "outbox": self.outbox.alive(), **checks}
        return checks

    def readiness(self) -> dict[str, bool]:
        store_ok, self.store_answer = store_answer(self.store)
        checks = {"store": store_ok, **self.liveness()}
        leading = self.leadership.leads()
        self.metrics.leading.set(1 if leading else 0)
        for source in self.sources if leading else ():  # a standby's sources do not run
            healthy = source_ok(source)
            self.metrics.source_up.labels(source=source.name).set(1 if healthy else 0)
            checks[f"source:{source.name}"] = healthy
        if self.one_app:  # HTTP mode serves its own clicks whoever shares the app: a note
            checks["slack_app"] = "slack_app" not in self.notes()
        return checks

    def notes(self) -> dict[str, str]:
        """What /readyz says beside its checks, in words."""
        said = {"store": self.store_answer}
        if leader := self.leadership.note():
            said["leader"] = leader
        try:
            shared = strays.problem(self.store.bookmark(strays.KEY), self.store.cluster, utcnow())
        except StoreError:
            return said  # the store's own note says so
        return {**said, "slack_app": shared} if shared else said


def store_answer(store: Store) -> tuple[bool, str]:
    """Readable, and its last write was not refused by the disk; and which store, in words."""
    try:
        store.ping()
    except StoreError as error:
        return False, f"{store.describe()}: does not answer: {error.problem}"
    failure = store.write_failure()
    if failure is not None:
        return False, f"{store.describe()}: answers, but its last write failed: {failure}"
    return True, f"{store.describe()}: answers"


def chat_ok(chat: Chat) -> bool:
    try:
        return bool(chat.healthy())
    except Exception as error:  # a probe answers unhealthy rather than failing the request
        log.warning("the %s chat's health check failed: %s", chat.name, error)
        return False


def source_ok(source: Source) -> bool:
    try:
        return bool(source.healthy())
    except Exception as error:  # a probe answers unhealthy rather than failing the request
        log.warning("the %s source's health check failed: %s", source.name, error)
        return False
