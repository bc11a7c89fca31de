"""Two replicas of one cluster's pitcrew, elected on a Lease: the harness of the failover
tests (tests/e2e/failover/) and of bench/failover.py.

Why this exists: a failover is only shown by the parts a user runs: two real `pitcrew run`
processes (SIGKILL, SIGSTOP, a cut network reach them as they would a pod), one
PostgreSQL store they share (the session's real server), kmock's Kubernetes API with the
seed's RayCluster to patch and Leases with the API server's concurrency rules
(`tests/support/kube_leases.py`), and the Slack emulator in HTTP mode (a click is a
signed request to either replica). A replica may reach the API through a `TcpProxy`, so
a test can cut the leader off the API alone.

What the tests measure is read from the parts themselves: how often the RayCluster's
memory limit changed (kmock keeps each version of an object), the proposal and ledger
rows in the store, the cards in the channel.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kmock

from bot.adapters.slack import blocks
from bot.adapters.store.store import Store
from bot.app.demo import seed
from bot.core.model import ActionResult, ProposalState
from tests.e2e.kubernetes.conftest import Emulator, kubeconfig
from tests.e2e.slack.conftest import (
    APPROVER,
    SECRET,
    click_payload,
    payload_form,
    post,
    sign,
)
from tests.support.daemon import DESCRIBE, DRIVER_LOG, SEED, WORKLOAD
from tests.support.daemon_process import Daemon, wait_until
from tests.support.flood import send
from tests.support.kube_leases import serve_leases, stored_lease
from tests.support.slack_emulator import BOT_TOKEN, TEAM_ID, Posted, SlackEmulator
from tests.support.tcp_proxy import TcpProxy

NS = seed.NS
TARGET = "verl-ppo-qwen-raycluster-x7k2p"  # the seed's RayCluster: its worker group's memory
LEASE_NS, LEASE = "pitcrew", "pitcrew"
CLUSTER = "eu-a"
LEASE_DURATION, RENEW_DEADLINE = 15.0, 10.0  # client-go's, pitcrew's defaults
SLACK = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SECRET}
EXIT_DEPOSED = 3  # bot.app.leadership.EXIT_DEPOSED


def prepare(kube: Emulator) -> None:
    """The cluster: KubeRay's CRDs, Leases, the seed's objects (the OOM-killed worker's
    RayCluster at 16Gi)."""
    kube.install_kuberay()
    serve_leases(kube)
    seed.install(kube)


@dataclass
class Slowed:
    """Requests kmock answers late (a create's change made at once): a window to kill in.
    Each is answered here, after the wait, as kmock's emulator answers it: a reaction that
    only waits and falls through is used once by kmock, so it would slow one request."""

    seconds: dict[str, float] = field(default_factory=dict)

    def install(self, kube: Emulator) -> None:
        quotas = kmock.resource("v1/resourcequotas")
        events = kmock.resource("v1/events")

        async def listed(request: Any) -> Any:  # the plan reads the quota after the claim
            await asyncio.sleep(self.seconds.get("quotas", 0.0))
            items = [
                obj.raw
                for (resource, namespace, _), obj in kube.k.objects.items()
                if resource.plural == "resourcequotas"
                and namespace == request.namespace
                and not obj.deleted
            ]
            return {"apiVersion": "v1", "kind": "ResourceQuotaList", "metadata": {}, "items": items}

        async def created(request: Any) -> Any:  # the Event, after the patch
            await asyncio.sleep(self.seconds.get("events", 0.0))
            metadata = request.data["metadata"]
            namespace = request.namespace or metadata.get("namespace")
            stored = kube.k.objects[events, namespace, metadata["name"]]
            return kmock.Response(status=201, payload=stored.raw)

        def declare(k: Any) -> None:
            k[kmock.action.LIST, quotas] << listed
            k[kmock.action.CREATE, events] << created

        kube.run(declare)


@dataclass
class Pair:
    """The replicas of cluster `eu-a` (`start` each), and what they act on."""

    home: Path
    kube: Emulator
    slack: SlackEmulator
    store_url: str
    daemons: list[Daemon]
    proxies: dict[str, TcpProxy] = field(default_factory=dict)

    def start(self, name: str, *, through_proxy: bool = False) -> Daemon:
        """A replica, its API reached through a proxy of its own when asked; ready."""
        home = self.home / name
        home.mkdir(exist_ok=True)
        url = self.kube.url
        if through_proxy:
            proxy = TcpProxy(("127.0.0.1", int(url.rsplit(":", 1)[1])))
            proxy.start()
            self.proxies[name] = proxy
            url = proxy.url
        write_config(home, self.slack, self.store_url, _kubeconfig(home, self.kube, url))
        daemon = Daemon(home, name, env=SLACK)
        self.daemons.append(daemon)
        daemon.ready()
        return daemon

    def stop(self) -> None:
        for daemon in self.daemons:
            daemon.kill()
        for proxy in self.proxies.values():
            proxy.stop()

    # -- the Lease and who leads --------------------------------------------------------------

    def leading(self, daemon: Daemon) -> bool:
        return readyz(daemon).get("notes", {}).get("leader", "").startswith("leading")

    def wait_leader(self, *candidates: Daemon, timeout: float = 60) -> Daemon:
        found = wait_until(
            lambda: next(
                (d for d in candidates if d.proc.poll() is None and self.leading(d)), None
            ),
            timeout,
            "a replica to lead",
        )
        assert isinstance(found, Daemon)
        return found

    def term(self) -> int:
        lease = stored_lease(self.kube, LEASE_NS, LEASE) or {}
        return int(lease.get("spec", {}).get("leaseTransitions", 0))

    # -- the card and its click -----------------------------------------------------------

    def ingest(self, daemon: Daemon) -> None:
        """The seed's driver log and worker pod, as a CI job posts them to `/ingest`."""
        for name, query in ((DRIVER_LOG, f"&workload={WORKLOAD}"), (DESCRIBE, "")):
            url = f"{daemon.url}/ingest?origin={name}{query}"
            assert send(url, (SEED / name).read_bytes()) == "202"

    def card(self, timeout: float = 90) -> Posted:
        """The incident's card once it offers its Approve button."""
        found = wait_until(
            lambda: next((c for c in self.slack.parents() if approve(c) is not None), None),
            timeout,
            "the card with its Approve button",
        )
        assert isinstance(found, Posted)
        return found

    def click(self, daemon: Daemon, card: Posted) -> None:
        """A signed click on the card's Approve button, to `daemon`'s /slack/events."""
        button = approve(card)
        assert button is not None
        body = payload_form(
            click_payload(self.slack, blocks.APPROVE_ACTION, button["value"], ts=card.ts)
        )
        assert post(daemon.events, body, sign(body)).status == 200

    # -- what the store and the cluster say ----------------------------------------------

    def proposal(self) -> tuple[ProposalState | None, ActionResult | None]:
        """The bump's proposal state and its ledger result (None: none yet)."""
        with Store(self.store_url) as store:
            for incident in store.recent_incidents(10):
                for found in store.proposals_for_incident(incident.id):
                    if found.action == "k8s.bump_memory":
                        entry = store.action_entry(found.id)
                        return found.state, entry.result if entry else None
        return None, None

    def limits(self) -> list[str]:
        """The RayCluster's worker memory limit in each version kmock kept, changes only."""

        def read(k: Any) -> list[str]:
            stored = k.objects[kmock.resource("ray.io/v1/rayclusters"), NS, TARGET]
            values: list[str] = []
            for version in stored.history:
                if version is None:
                    continue
                raw = version.raw
                groups = raw.get("spec", {}).get("workerGroupSpecs", [{}])
                container = groups[0]["template"]["spec"]["containers"][0]
                value = str(container["resources"]["limits"]["memory"])
                if not values or values[-1] != value:
                    values.append(value)
            return values

        result: list[str] = self.kube.run(read)
        return result

    def cards(self) -> tuple[int, int]:
        """(cards in the channel, incidents they are for)."""
        cards = self.slack.parents()
        named = {str((c.metadata or {}).get("event_payload", {}).get("incident_id")) for c in cards}
        return len(cards), len(named)


def approve(card: Posted) -> dict[str, Any] | None:
    return next(
        (
            element
            for block in card.blocks
            if block["type"] == "actions"
            for element in block["elements"]
            if element["action_id"] == blocks.APPROVE_ACTION
        ),
        None,
    )


def applied(card: Posted) -> bool:
    return "applied and verified" in json.dumps(card.blocks, ensure_ascii=False)


def readyz(daemon: Daemon) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(f"{daemon.url}/readyz", timeout=5) as answer:
            found: dict[str, Any] = json.loads(answer.read())
    except urllib.error.HTTPError as error:
        found = json.loads(error.read())
    except OSError:
        return {}
    return found


def since(start: float) -> float:
    return time.monotonic() - start


def _kubeconfig(home: Path, kube: Emulator, url: str) -> Path:
    path = kubeconfig(home, kube)
    path.write_text(path.read_text().replace(kube.url, url))
    return path


def write_config(home: Path, slack: SlackEmulator, store_url: str, config: Path) -> None:
    (home / "pitcrew.yaml").write_text(
        f"""\
cluster: {{name: {CLUSTER}}}
store: {{url: "{store_url}"}}
http: {{host: 127.0.0.1, port: 0}}
leader_election: {{enabled: true, namespace: {LEASE_NS}, name: {LEASE}}}
chat:
  kind: slack
  slack: {{socket_mode: false, api_url: "{slack.api_url}", channel_interval: 0}}
notify: {{group_wait: 0s, group_interval: 1s, default_channel: pitcrew}}
approvals:
  approvers: [{{users: ["{APPROVER}"], namespaces: ["ml-*"]}}]
  teams: ["{TEAM_ID}"]
actions:
  executors: {{"k8s.*": kubernetes}}
sources:
  kubernetes: {{kubeconfig: {config}, context: kmock}}
pipeline: {{live_check_timeout: 15s}}
scheduler: {{tick: 200ms, approved: 200ms, outbox: 1s, expiry: 1s}}
"""
    )
