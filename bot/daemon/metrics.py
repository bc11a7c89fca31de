"""Prometheus metrics of one pitcrew process, on a registry of its own (so tests and
several daemons in one process never share counters); every sample carries the label
`cluster` (this pitcrew's) when it has a name, so one Prometheus or one dashboard can
tell several clusters' pitcrews apart."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import Metric


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    cluster: str = ""

    def __post_init__(self) -> None:
        r = self.registry
        self.signals = Counter("pitcrew_signals", "Signals received", ["source"], registry=r)
        self.findings = Counter(
            "pitcrew_findings", "Findings by category", ["category"], registry=r
        )
        self.incidents = Counter("pitcrew_incidents_opened", "Incidents opened", registry=r)
        self.open_incidents = Gauge("pitcrew_incidents_open", "Incidents open now", registry=r)
        self.notifications = Counter(
            "pitcrew_notifications",
            "Chat messages by kind and result",
            ["kind", "result"],
            registry=r,
        )
        self.proposals = Counter(
            "pitcrew_proposals", "Proposal transitions by new state", ["state"], registry=r
        )
        self.actions = Counter(
            "pitcrew_actions",
            "Executed actions by action and result",
            ["action", "result"],
            registry=r,
        )
        self.chat_errors = Counter("pitcrew_chat_errors", "Chat delivery errors", registry=r)
        self.refused_clicks = Counter(
            "pitcrew_refused_approvals",
            "Approval attempts refused, by reason",
            ["reason"],
            registry=r,
        )
        fetches = "Evidence asked for, by outcome (allowed, refused, written)"
        self.evidence_fetches = Counter(
            "pitcrew_evidence_fetches", fetches, ["outcome"], registry=r
        )
        self.source_up = Gauge(
            "pitcrew_source_up", "1 when a source is healthy", ["source"], registry=r
        )
        self.pipeline_lag = Histogram(
            "pitcrew_pipeline_lag_seconds",
            "Time from a signal entering the queue to its decision",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5),
            registry=r,
        )
        self.queue_depth = Gauge("pitcrew_queue_depth", "Signals waiting", registry=r)
        self.render_failures = Counter(
            "pitcrew_render_failures",
            "Playbook texts that failed or ran over their render budget (shown as plain text)",
            ["playbook"],
            registry=r,
        )
        self.ingest_rejected = Counter(
            "pitcrew_ingest_rejected",
            "Requests to /ingest and /alertmanager refused, by path and reason "
            "(bad_credentials, unauthenticated, too_large, body_timeout, malformed, "
            "replayed, unavailable, method)",
            ["path", "reason"],
            registry=r,
        )
        self._failures(r)
        self._leader(r)

    def _failures(self, r: CollectorRegistry) -> None:
        """What a bug or a budget stopped: counted, the items kept (`bot.daemon.taking`)."""
        self.internal_errors = Counter(
            "pitcrew_internal_errors",
            "Bugs met by a daemon thread (logged with their traceback; the item is kept)",
            ["stage"],
            registry=r,
        )
        self.quarantined = Counter(
            "pitcrew_quarantined",
            "Items set aside until `pitcrew requeue`: over their time budget, or begun at two "
            "starts in a row and never finished",
            ["stage"],
            registry=r,
        )
        self.dead_letters = Counter(
            "pitcrew_dead_letters",
            "Notifications the outbox gave up on (shown by `pitcrew status`)",
            ["kind"],
            registry=r,
        )

    def _leader(self, r: CollectorRegistry) -> None:
        """Leader election: whether this replica leads, and the term it leads at."""
        self.leading = Gauge(
            "pitcrew_leader", "1 while this replica leads (leader election), else 0", registry=r
        )
        self.term = Gauge(
            "pitcrew_lease_term", "The fencing term this replica leads at", registry=r
        )

    def exposition(self) -> bytes:
        if not self.cluster:
            return generate_latest(self.registry)
        return generate_latest(_Labelled(self.registry, self.cluster))


@dataclass(frozen=True)
class _Labelled:
    """The registry's metrics as it collects them, each sample labelled with the cluster."""

    registry: CollectorRegistry
    cluster: str

    def collect(self) -> Iterator[Metric]:
        for metric in self.registry.collect():
            labelled = Metric(metric.name, metric.documentation, metric.type, metric.unit)
            labelled.samples = [
                s._replace(labels={"cluster": self.cluster, **s.labels}) for s in metric.samples
            ]
            yield labelled
