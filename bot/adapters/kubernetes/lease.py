"""The Lease pitcrew's replicas elect their leader with: `coordination.k8s.io/v1`.

Why this exists: the election's decisions (`bot.daemon.lease`) need a record that one
write at a time can change, and Kubernetes gives every cluster one: a Lease, replaced
(PUT) only from the `resourceVersion` it was read at, so of two replicas writing at once
the API server refuses one (409). This module reads and writes that Lease through the
official client and turns it into the election's `LeaseRecord` and back (client-go's
fields: `holderIdentity`, `leaseDurationSeconds`, `acquireTime`, `renewTime`,
`leaseTransitions`). A Lease whose fields are malformed reads as what can be read of it
(a holder without a duration holds it for the default 15 s), never as an error: a
replica must be able to take over from whatever is there.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.adapters.kubernetes.api import LEASES, KubeApi, RbacRule
from bot.adapters.kubernetes.errors import ConflictError
from bot.core.inputs.values import as_map, text_at
from bot.daemon.lease import LEASE_DURATION, LeaseConflictError, LeaseRecord

RULES = (
    RbacRule(
        "coordination.k8s.io",
        ("leases",),
        ("get", "create", "update"),
        "elect one leader among pitcrew's replicas (leader_election.enabled)",
    ),
)


class KubeLease:
    """One named Lease in one namespace (`bot.daemon.lease.LeaseLock`)."""

    def __init__(self, api: KubeApi, namespace: str, name: str) -> None:
        self.api = api
        self.namespace = namespace
        self.lease = name
        self.name = f"Lease {namespace}/{name}"

    def get(self) -> LeaseRecord | None:
        found = self.api.get(LEASES, self.namespace, self.lease)
        return None if found is None else record_of(found)

    def create(self, record: LeaseRecord) -> LeaseRecord:
        try:
            return record_of(self.api.create(LEASES, self.namespace, self.manifest(record)))
        except ConflictError as error:
            raise LeaseConflictError(f"the {self.name} exists already") from error

    def update(self, record: LeaseRecord) -> LeaseRecord:
        try:
            stored = self.api.replace(LEASES, self.namespace, self.lease, self.manifest(record))
        except ConflictError as error:
            raise LeaseConflictError(
                f"the {self.name} changed since version {record.version}"
            ) from error
        return record_of(stored)

    def manifest(self, record: LeaseRecord) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.lease, "namespace": self.namespace}
        if record.version:
            metadata["resourceVersion"] = record.version
        spec: dict[str, Any] = {
            "holderIdentity": record.holder,
            "leaseDurationSeconds": max(1, round(record.duration.total_seconds())),
            "leaseTransitions": record.transitions,
        }
        if record.acquired is not None:
            spec["acquireTime"] = micro_time(record.acquired)
        if record.renewed is not None:
            spec["renewTime"] = micro_time(record.renewed)
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": spec,
        }


def record_of(lease: Mapping[str, Any]) -> LeaseRecord:
    """A Lease as the election reads it."""
    spec = as_map(lease.get("spec"))
    seconds = spec.get("leaseDurationSeconds")
    duration = (
        timedelta(seconds=seconds)
        if isinstance(seconds, int) and not isinstance(seconds, bool) and seconds > 0
        else LEASE_DURATION
    )
    transitions = spec.get("leaseTransitions")
    return LeaseRecord(
        holder=text_at(spec, "holderIdentity"),
        duration=duration,
        acquired=parse_micro_time(spec.get("acquireTime")),
        renewed=parse_micro_time(spec.get("renewTime")),
        transitions=transitions if isinstance(transitions, int) and transitions >= 0 else 0,
        version=text_at(lease, "metadata", "resourceVersion"),
    )


def micro_time(value: datetime) -> str:
    """Kubernetes' MicroTime: RFC 3339 in UTC with microseconds."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
