"""Leader election put together from the settings: the Lease in the cluster, this replica's
identity, and what a replica that lost the Lease does: it exits at once.

Why this exists: `leader_election.enabled` makes the daemon one of several replicas
(`bot.daemon.elector` decides over `bot.adapters.kubernetes.lease`). A leader that lost
its Lease, or whose write the store refused under a newer leader's term (fencing), must
stop everything it does at once, whatever thread noticed: it logs why, leaves the reason
in the container's termination message (`kubectl describe pod` shows it), and exits;
Kubernetes restarts it, and it comes back as a standby.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from bot.app.factories import kube_api
from bot.app.settings.sections import Settings
from bot.core.errors import StaleTermError
from bot.daemon.elector import Elector
from bot.daemon.ports import Clock

log = logging.getLogger("pitcrew.lease")

EXIT_DEPOSED = 3  # the exit status of a replica that lost its Lease
TERMINATION_LOG = Path("/dev/termination-log")  # Kubernetes' terminationMessagePath
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def identity() -> str:
    """This replica, as the Lease names its holder: the pod's name and a process's own
    suffix (client-go's convention), so a restarted container is a new holder."""
    host = os.environ.get("HOSTNAME") or socket.gethostname()
    return f"{host}_{uuid.uuid4().hex[:8]}"


def lease_namespace(settings: Settings) -> str:
    """`leader_election.namespace`, else the pod's own namespace, else `default`."""
    if settings.leader_election.namespace:
        return settings.leader_election.namespace
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text(encoding="utf-8").strip() or "default"
    except OSError:
        return "default"


def elector(
    settings: Settings, clock: Clock, on_lead: Callable[[int], None], floor: Callable[[], int]
) -> Elector | None:
    """The elector `leader_election` describes (None when it is off): `on_lead(term)`
    when this replica takes the Lease; losing it exits the process (`deposed`); `floor`
    is the store's newest term."""
    election = settings.leader_election
    if not election.enabled:
        return None
    from bot.adapters.kubernetes.lease import KubeLease

    each_try = max(1.0, election.retry_period.total_seconds())  # a hung call ends by then
    lock = KubeLease(kube_api(settings, timeout=each_try), lease_namespace(settings), election.name)
    config = election.config(identity())
    log.info("leader election on the %s as %s", lock.name, config.identity)
    return Elector(lock, config, clock=clock, on_lead=on_lead, on_lost=deposed, floor=floor)


def refused(error: StaleTermError) -> None:
    """The store refused a write under this leader's older term: a newer leader runs."""
    deposed(str(error))


def deposed(why: str) -> NoReturn:
    """This replica no longer leads: say why, where `kubectl describe pod` shows it, and
    exit at once (no drain, no flush: what is left is the new leader's)."""
    said = f"this replica no longer leads: {why}; it exits now and stands by once restarted"
    log.critical("%s", said)
    if TERMINATION_LOG.exists():  # mounted by the kubelet; never made outside a pod
        try:
            with TERMINATION_LOG.open("w", encoding="utf-8") as out:
                out.write(said[:4000] + "\n")
        except OSError:
            pass  # the log line says it
    for handler in logging.getLogger().handlers:
        handler.flush()
    os._exit(EXIT_DEPOSED)
