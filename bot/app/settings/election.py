"""The `leader_election` section: several replicas, one leader, on a Lease.

Why this exists: a second replica keeps cards coming and clicks answered while the
first one's pod is rescheduled, but only one may watch, post and act. With election on,
the replica that holds a `coordination.k8s.io/v1` Lease leads (`bot.daemon.elector`);
the others serve probes, metrics and Slack's requests and take over when it stops
renewing. Off (the default) is one replica and no Lease. Replicas share their state, so
election needs the PostgreSQL store (`store.url`); the durations are client-go's and
keep its rules.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field, model_validator

from bot.app.settings.base import Closed
from bot.daemon.lease import LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD, ElectionConfig


class LeaderElectionSettings(Closed):
    enabled: bool = Field(
        default=False,
        description="several replicas on one PostgreSQL store (store.url): the one holding "
        "the Lease watches, posts and acts, the others serve probes, metrics and Slack's "
        "requests and take over when it stops renewing it; false: one replica, no Lease",
    )
    namespace: str = Field(
        default="",
        description="the Lease's namespace; empty: the pod's own (its service account's), "
        "else default",
    )
    name: str = Field(default="pitcrew", min_length=1, description="the Lease's name")
    lease_duration: timedelta = Field(
        default=LEASE_DURATION,
        description="how long a standby waits, after the Lease last changed, to take it over",
    )
    renew_deadline: timedelta = Field(
        default=RENEW_DEADLINE,
        description="a leader that has not renewed the Lease for this long stops at once "
        "(the process exits, and is restarted as a standby)",
    )
    retry_period: timedelta = Field(
        default=RETRY_PERIOD, description="how often the Lease is renewed, or tried for"
    )

    @model_validator(mode="after")
    def _client_go_rules(self) -> LeaderElectionSettings:
        ElectionConfig(  # raises ValueError naming the rule a duration breaks
            "check", self.lease_duration, self.renew_deadline, self.retry_period
        )
        return self

    def config(self, identity: str) -> ElectionConfig:
        return ElectionConfig(identity, self.lease_duration, self.renew_deadline, self.retry_period)
