"""The configuration's root model and its smaller sections (store, HTTP, chat, playbooks,
scheduler, pipeline, secrets).

Why this exists: one `Settings` value is what every command and the daemon are given;
the policy sections reuse the core's own models (`CorrelationConfig`, `NotifyConfig`,
`ApprovalPolicy`) so the file and the code cannot disagree about them.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from bot.adapters.store.urls import is_url
from bot.app.settings.actions import ActionSettings
from bot.app.settings.base import Closed
from bot.app.settings.election import LeaderElectionSettings
from bot.app.settings.sources import SourceSettings
from bot.core.actions.policy import ApprovalPolicy
from bot.core.incidents.grouping import CorrelationConfig
from bot.core.incidents.notify import NotifyConfig
from bot.core.incidents.silencing import describe_span

URL_PATTERN = "^(postgres(ql)?://.+)?$"


CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,99}")


class ClusterSettings(Closed):
    """Which cluster this pitcrew answers for (docs/operations.md, "Several clusters")."""

    name: str = Field(
        default="",
        description="this cluster's name on every card, button, proposal, action, Event, "
        "bundle, metric and /pitcrew answer, and the key of its incidents (Ray clusters found "
        "on it, and sources.ray entries with a namespace, key theirs by it too); required, "
        "and different for each, when more than one cluster posts to a Slack workspace. "
        "Empty: the kubeconfig context's name, or in-cluster in a pod (the same for every "
        "cluster)",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        if name and not CLUSTER_NAME.fullmatch(name):
            raise ValueError(
                f"{name[:120]!r} is not a cluster name: up to 100 letters, digits and "
                "_ . : @ / -, starting with a letter or digit"
            )
        return name


class StoreSettings(Closed):
    path: Path = Field(
        default=Path("pitcrew.db"),
        description="the SQLite file (the embedded store, one replica); relative to the "
        "working dir",
    )
    url: str = Field(
        default="",
        description="`postgresql://USER@HOST:PORT/DATABASE`: the store in PostgreSQL, which "
        "more than one replica can share (its password in the URL or in "
        "PITCREW_STORE_PASSWORD); empty: SQLite at `path`",
        json_schema_extra={"pattern": URL_PATTERN},
    )
    retention: timedelta = Field(
        default=timedelta(days=14), gt=timedelta(0), description="how long resolved state is kept"
    )
    min_free_mib: int = Field(
        default=16, ge=0, description="free MiB the store's disk needs for `pitcrew run` to start"
    )
    bundle_max_kib: int = Field(
        default=1024,
        ge=16,
        description="an evidence bundle's size cap, KiB of the tar.gz itself, headers and "
        "compression counted (files past it are left out, named in its README.txt)",
    )
    bundle_file_max_kib: int = Field(
        default=256,
        ge=4,
        description="each file's cap in a bundle, KiB (a driver log keeps its head and tail)",
    )

    @field_validator("url")
    @classmethod
    def _postgresql_url(cls, value: str) -> str:
        if value and not is_url(value):
            raise ValueError(
                "expected a postgresql://USER@HOST:PORT/DATABASE URL "
                "(leave it out for the SQLite file at store.path)"
            )
        return value

    @model_validator(mode="after")
    def _bundle_file_within_bundle(self) -> StoreSettings:
        if self.bundle_file_max_kib > self.bundle_max_kib:
            raise ValueError(
                f"bundle_file_max_kib ({self.bundle_file_max_kib}) is more than "
                f"bundle_max_kib ({self.bundle_max_kib}): no file could be that large"
            )
        return self


class HttpSettings(Closed):
    host: str = Field(default="127.0.0.1", min_length=1)
    port: int = Field(default=9464, ge=0, le=65535, description="0 picks a free port (logged)")
    ingest: bool = Field(default=True, description="accept evidence on POST /ingest")


class AlertmanagerSettings(Closed):
    """Alertmanager's webhook receiver (`bot.adapters.http.alertmanager`); its secret comes
    from PITCREW_ALERTMANAGER_TOKEN or the file PITCREW_ALERTMANAGER_TOKEN_FILE names."""

    enabled: bool = Field(
        default=False,
        description="take Alertmanager's webhook on POST /alertmanager: every request "
        "bears the token (bearer, or basic auth's password); without one, loopback only",
    )
    url: str = Field(
        default="",
        description="Alertmanager as people open it, for the card's links to the alert "
        "and to a prefilled silence; empty: the externalURL each notification names",
    )
    username: str = Field(
        default="",
        description="basic auth: the user Alertmanager's http_config sends, the token "
        "its password; empty: the token as a bearer token only",
    )

    @field_validator("url")
    @classmethod
    def _web_address(cls, value: str) -> str:
        if value and not re.fullmatch(r"https?://[^\s/?#]+[^\s?#]*", value):
            raise ValueError(
                "expected Alertmanager's address as people open it, like "
                f"https://alertmanager.example.com, not {value[:60]!r}"
            )
        return value.rstrip("/")


class ConsoleSettings(Closed):
    width: int | None = Field(default=None, ge=40, description="card width; default: terminal")


class SlackSettings(Closed):
    """Read by the Slack chat (`bot.adapters.slack.chat`); tokens come from the environment."""

    socket_mode: bool = Field(default=True, description="Socket Mode (needs SLACK_APP_TOKEN)")
    api_url: str = Field(
        default="https://slack.com/api/", min_length=1, description="Web API base URL"
    )
    events_path: str = Field(default="/slack/events", pattern=r"^/", description="HTTP mode")
    silence_for: timedelta = Field(
        default=timedelta(hours=4), gt=timedelta(0), description="the card's Silence button"
    )
    channel_interval: float = Field(
        default=1.0, ge=0, description="seconds between messages to one channel"
    )
    ping_interval: float = Field(default=10.0, gt=0, description="Socket Mode ping, seconds")
    timeout: int = Field(
        default=10,
        ge=1,
        description="seconds a Web API call may take; a card post with no answer by then "
        "is looked for in the channel's history before it is sent again",
    )


class ChatSettings(Closed):
    kind: Literal["auto", "console", "slack"] = Field(
        default="auto", description="auto: slack when SLACK_BOT_TOKEN is set, else console"
    )
    console: ConsoleSettings = ConsoleSettings()
    slack: SlackSettings = SlackSettings()


class PlaybookSettings(Closed):
    dirs: tuple[Path, ...] = Field(default=(), description="extra playbook directories")


def _interval(default: float) -> Any:
    return Field(default=timedelta(seconds=default), gt=timedelta(0))


class SchedulerSettings(Closed):
    tick: timedelta = _interval(1)
    expiry: timedelta = _interval(10)
    outbox: timedelta = _interval(5)
    cleanup: timedelta = _interval(3600)
    approved: timedelta = _interval(1)
    released: timedelta = _interval(2)  # how often the store is read for `pitcrew requeue`'s rows


class PipelineSettings(Closed):
    queue_size: int = Field(default=10000, ge=1, description="items that may wait (503 beyond)")
    queue_bytes: int = Field(
        default=256 << 20, ge=1 << 20, description="bytes of log text that may wait (503 beyond)"
    )
    busy_limit: timedelta = Field(
        default=timedelta(minutes=2),
        gt=timedelta(0),
        description="one item taking longer makes the pipeline unhealthy (/healthz)",
    )
    step_budget: timedelta = Field(
        default=timedelta(seconds=10),
        ge=timedelta(0),
        description="longest each step of one item (classifying its log text, correlating "
        "its findings, rendering its cards) may take; past it the item is quarantined "
        "(pitcrew status, pitcrew requeue) and the next one taken; 0 turns the budget off",
    )
    drain_timeout: timedelta = Field(
        default=timedelta(seconds=10),
        ge=timedelta(0),
        description="how long a stop works through the queue; what is left is kept in the "
        "store and taken in at the next start",
    )
    flush_timeout: timedelta = Field(
        default=timedelta(seconds=5),
        ge=timedelta(0),
        description="how long a stop delivers due chat messages; the rest wait in the store",
    )
    live_check_timeout: timedelta = Field(
        default=timedelta(seconds=5),
        gt=timedelta(0),
        description="how long a live check of an offer's facts may take before the offer "
        "is decided as withheld",
    )
    live_check_workers: int = Field(
        default=2, ge=1, description="threads that run live checks off the pipeline thread"
    )


class Secrets(BaseModel):
    """Chat tokens, from the environment only."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    slack_bot_token: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    ingest_token: SecretStr | None = None  # /ingest from beyond loopback: `Bearer` this
    alertmanager_token: SecretStr | None = None  # /alertmanager: bearer, or basic's password
    store_password: SecretStr | None = None  # PostgreSQL's, when store.url leaves it out


class Settings(Closed):
    cluster: ClusterSettings = ClusterSettings()
    leader_election: LeaderElectionSettings = LeaderElectionSettings()
    store: StoreSettings = StoreSettings()
    http: HttpSettings = HttpSettings()
    alertmanager: AlertmanagerSettings = AlertmanagerSettings()
    chat: ChatSettings = ChatSettings()
    correlation: CorrelationConfig = CorrelationConfig()
    notify: NotifyConfig = NotifyConfig()
    approvals: ApprovalPolicy = ApprovalPolicy()
    actions: ActionSettings = ActionSettings()
    sources: SourceSettings = SourceSettings()
    playbooks: PlaybookSettings = PlaybookSettings()
    scheduler: SchedulerSettings = SchedulerSettings()
    pipeline: PipelineSettings = PipelineSettings()
    secrets: Secrets = Field(default_factory=Secrets, exclude=True)
    origin: str = Field(default="(built-in defaults)", exclude=True)

    @model_validator(mode="after")
    def _silence_button_within_policy(self) -> Settings:
        button, longest = self.chat.slack.silence_for, self.approvals.max_silence
        if button > longest:
            raise ValueError(
                f"chat.slack.silence_for ({describe_span(button)}) is longer than "
                f"approvals.max_silence ({describe_span(longest)}): every Silence click "
                "would be refused"
            )
        return self

    @model_validator(mode="after")
    def _election_on_a_shared_store(self) -> Settings:
        if self.leader_election.enabled and not self.store.url:
            raise ValueError(
                "leader_election.enabled needs a store its replicas share: store.url "
                "(PostgreSQL); the SQLite file is one daemon's"
            )
        return self

    @property
    def chat_kind(self) -> Literal["console", "slack"]:
        if self.chat.kind == "auto":
            return "slack" if self.secrets.slack_bot_token else "console"
        return self.chat.kind
