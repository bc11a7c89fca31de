"""The daemon's configuration: one YAML file plus the environment, validated once.

Why this exists: `pitcrew run`, `pitcrew approve` and the other commands must
agree on where the store is, who may approve what and how cards are timed,
and a mistake in the file must be found before 3 a.m. Every section is a
closed pydantic model (unknown keys are errors), the policy sections reuse the
core's own models (`CorrelationConfig`, `NotifyConfig`, `ApprovalPolicy`), and
every problem is reported at once as `file:line: field: reason`. Durations
may be written `30s`, `10m`, `1h30m` or as seconds. Tokens never come from the
file: only from `SLACK_BOT_TOKEN`, `SLACK_APP_TOKEN`, `SLACK_SIGNING_SECRET`,
`PITCREW_INGEST_TOKEN` (what /ingest asks of clients beyond loopback) or the
files that `*_FILE` variables name; they are `SecretStr` and `render`
masks them. With no file at all every setting has a working default (console
chat, `./pitcrew.db`, loopback HTTP on port 9464).
"""

from __future__ import annotations

import difflib
import os
import re
import string
import types
from collections.abc import Mapping
from datetime import timedelta
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from bot.core import quantity
from bot.core.actions.catalog import CATALOG
from bot.core.actions.tuning import Overrides
from bot.core.approvals import ApprovalPolicy
from bot.core.durations import DURATION_HINT, format_duration, parse_duration
from bot.core.errors import PitcrewError
from bot.core.incidents import CorrelationConfig
from bot.core.notify import NotifyConfig
from bot.core.yamlsrc import Located, describe_yaml_error, load_located

CONFIG_ENV = "PITCREW_CONFIG"
SECRET_ENV = {
    "slack_bot_token": "SLACK_BOT_TOKEN",
    "slack_app_token": "SLACK_APP_TOKEN",
    "slack_signing_secret": "SLACK_SIGNING_SECRET",
    "ingest_token": "PITCREW_INGEST_TOKEN",
}
MASK = "**********"


# -- the sections -----------------------------------------------------------------------


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StoreSettings(Closed):
    path: Path = Field(
        default=Path("pitcrew.db"), description="the SQLite file; relative to the working dir"
    )
    retention: timedelta = Field(
        default=timedelta(days=14), gt=timedelta(0), description="how long resolved state is kept"
    )


class HttpSettings(Closed):
    host: str = Field(default="127.0.0.1", min_length=1)
    port: int = Field(default=9464, ge=0, le=65535, description="0 picks a free port (logged)")
    ingest: bool = Field(default=True, description="accept evidence on POST /ingest")


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


class ChatSettings(Closed):
    kind: Literal["auto", "console", "slack"] = Field(
        default="auto", description="auto: slack when SLACK_BOT_TOKEN is set, else console"
    )
    console: ConsoleSettings = ConsoleSettings()
    slack: SlackSettings = SlackSettings()


class BumpMemorySettings(Closed):
    factor: float = Field(default=1.5, gt=1.0, le=2.0)
    cap: str = Field(default="512Gi", description="never raise a limit above this")

    @field_validator("cap")
    @classmethod
    def _quantity(cls, value: str) -> str:
        quantity.parse_bytes(value)
        return value


class GpuPoolSettings(Closed):
    label_key: str = Field(default="nvidia.com/gpu.product", min_length=1)
    label_value: str = Field(default="NVIDIA-A100-SXM4-80GB", min_length=1)


class ResubmitSettings(Closed):
    max_retries: int = Field(default=2, ge=1, le=10)


class EchoSettings(Closed):
    """The built-in `echo` executor: runs nothing, records each execution (tests, demos)."""

    record: Path | None = Field(default=None, description="append one line per execution")
    delay: timedelta = Field(default=timedelta(0), ge=timedelta(0))


def _action_pattern(pattern: str) -> str:
    if not any(fnmatchcase(action, pattern) for action in CATALOG):
        raise ValueError(f"{pattern!r} names no action (known: {', '.join(sorted(CATALOG))})")
    return pattern


def _executor_kind(kind: str) -> str:
    if not re.fullmatch(r"[a-z][a-z0-9_]*", kind):
        raise ValueError(f"{kind!r} is not an executor kind (a lowercase name such as echo)")
    return kind


ActionPattern = Annotated[str, AfterValidator(_action_pattern)]
ExecutorKind = Annotated[str, AfterValidator(_executor_kind)]


class ActionSettings(Closed):
    enabled: bool = Field(default=True, description="false: diagnose and notify only")
    executors: dict[ActionPattern, ExecutorKind] = Field(
        default_factory=dict,
        description="action id (or pattern) -> executor kind (echo, kubernetes, ray, ...)",
    )
    bump_memory: BumpMemorySettings = BumpMemorySettings()
    gpu_pool: GpuPoolSettings = GpuPoolSettings()
    resubmit: ResubmitSettings = ResubmitSettings()
    echo: EchoSettings = EchoSettings()

    def overrides(self) -> Overrides:
        """The parameter values these settings impose on offered actions."""
        return {
            "k8s.bump_memory": {"factor": self.bump_memory.factor, "cap": self.bump_memory.cap},
            "k8s.reschedule_gpu_pool": {
                "label_key": self.gpu_pool.label_key,
                "label_value": self.gpu_pool.label_value,
            },
            "ray.resubmit_job": {"max_retries": self.resubmit.max_retries},
        }

    def executor_for(self, action: str) -> str | None:
        """The executor kind configured for `action` (exact id first, then patterns)."""
        if action in self.executors:
            return self.executors[action]
        return next((k for p, k in self.executors.items() if fnmatchcase(action, p)), None)


class RaySourceSettings(Closed):
    """A Ray cluster to poll (Jobs and State APIs); filled in by the Ray source."""

    name: str = Field(min_length=1)
    enabled: bool = True
    address: str = Field(default="http://127.0.0.1:8265", min_length=1)
    namespace: str = Field(default="", description="Kubernetes namespace of the cluster")
    poll_interval: timedelta = Field(default=timedelta(seconds=10), gt=timedelta(0))
    stale_actor_age: timedelta = Field(
        default=timedelta(hours=1),
        gt=timedelta(0),
        description="a detached named actor is reported stale this long after its job finished",
    )
    stale_scan_every: timedelta = Field(
        default=timedelta(minutes=10),
        gt=timedelta(0),
        description="how often the stale-actor scan runs",
    )
    down_after: timedelta = Field(
        default=timedelta(minutes=2),
        gt=timedelta(0),
        description="an unreachable dashboard is reported once it has been down this long",
    )


class KubernetesSourceSettings(Closed):
    """Kubernetes watches (events, pods, nodes, RayJobs, RayClusters)."""

    enabled: bool = False
    kubeconfig: Path | None = None
    context: str = ""
    in_cluster: bool = False
    namespaces: tuple[str, ...] = Field(default=(), description="empty: all namespaces")
    resources: tuple[Literal["events", "pods", "nodes", "rayjobs", "rayclusters"], ...] = (
        "events",
        "pods",
        "nodes",
        "rayjobs",
        "rayclusters",
    )


DISCOVERY_PLACEHOLDERS = ("service", "namespace", "port", "name")
"""What `sources.ray_discovery.url_template` may name (bot.adapters.kuberay.discovery)."""


def _url_template(template: str) -> str:
    names = [field for _, field, _, _ in string.Formatter().parse(template) if field is not None]
    known = ", ".join(f"{{{n}}}" for n in DISCOVERY_PLACEHOLDERS)
    if any(not n for n in names):
        raise ValueError(f"placeholders must be named ({known})")
    unknown = sorted({n for n in names if n not in DISCOVERY_PLACEHOLDERS})
    if unknown:
        raise ValueError(f"unknown placeholder {{{unknown[0]}}} (known: {known})")
    sample = template.format(service="s", namespace="ns", port=8265, name="n")
    if not re.fullmatch(r"https?://[^/\s]+(/\S*)?", sample):
        raise ValueError(f"{template!r} does not make an http(s) URL")
    return template


class RayDiscoverySettings(Closed):
    """Ray clusters found from KubeRay RayCluster objects in the namespaces the Kubernetes
    source watches (`sources.kubernetes`): each RayCluster's dashboard is polled like a
    `sources.ray` entry named `<namespace>.<name>` for as long as the RayCluster exists,
    and its signals name the namespace, the RayCluster and the RayJob that owns it. A
    RayCluster at the address of a `sources.ray` entry is polled by that entry only. The
    `ray` executors find these clusters by that name or by the RayCluster's name."""

    enabled: bool | None = Field(
        default=None,
        description="null: on when sources.kubernetes is enabled and watches rayclusters; "
        "true needs sources.kubernetes.enabled",
    )
    url_template: Annotated[str, AfterValidator(_url_template)] = Field(
        default="http://{service}.{namespace}.svc:{port}",
        description="a RayCluster's dashboard URL from {service} (its head service), "
        "{namespace}, {port} (the head service's dashboard port, 8265 unless the RayCluster "
        "says otherwise) and {name}; e.g. a proxy: https://ray.example.com/{namespace}/{name}",
    )
    poll_interval: timedelta = Field(
        default=timedelta(seconds=10),
        gt=timedelta(0),
        description="how often each discovered dashboard is polled",
    )


class SourceSettings(Closed):
    ray: tuple[RaySourceSettings, ...] = ()
    kubernetes: KubernetesSourceSettings = KubernetesSourceSettings()
    ray_discovery: RayDiscoverySettings = RayDiscoverySettings()

    @model_validator(mode="after")
    def _discovery_needs_kubernetes(self) -> SourceSettings:
        if self.ray_discovery.enabled and not self.kubernetes.enabled:
            raise ValueError(
                "ray_discovery.enabled: discovering RayClusters needs sources.kubernetes.enabled"
            )
        return self

    def discovers_ray_clusters(self) -> bool:
        """Whether RayCluster discovery runs (with the Kubernetes source, see
        RayDiscoverySettings.enabled)."""
        enabled = self.ray_discovery.enabled
        if not self.kubernetes.enabled or enabled is False:
            return False
        return enabled is True or "rayclusters" in self.kubernetes.resources

    @field_validator("ray")
    @classmethod
    def _unique(cls, value: tuple[RaySourceSettings, ...]) -> tuple[RaySourceSettings, ...]:
        names = [s.name for s in value]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"source names must be unique: {', '.join(duplicates)}")
        return value

    def enabled_kinds(self) -> tuple[str, ...]:
        kinds = []
        if any(s.enabled for s in self.ray):
            kinds.append("ray")
        if self.kubernetes.enabled:
            kinds.append("kubernetes")
        return tuple(kinds)


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


class PipelineSettings(Closed):
    queue_size: int = Field(default=10000, ge=1)
    drain_timeout: timedelta = Field(default=timedelta(seconds=10), ge=timedelta(0))
    flush_timeout: timedelta = Field(default=timedelta(seconds=5), ge=timedelta(0))


class Secrets(BaseModel):
    """Chat tokens, from the environment only."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    slack_bot_token: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    ingest_token: SecretStr | None = None  # /ingest from beyond loopback: `Bearer` this


class Settings(Closed):
    store: StoreSettings = StoreSettings()
    http: HttpSettings = HttpSettings()
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

    @property
    def chat_kind(self) -> Literal["console", "slack"]:
        if self.chat.kind == "auto":
            return "slack" if self.secrets.slack_bot_token else "console"
        return self.chat.kind


# -- loading ----------------------------------------------------------------------------


class ConfigError(PitcrewError):
    """The configuration is invalid; `problems` has one `file:line: field: reason` each."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


def config_path(explicit: str | os.PathLike[str] | None, environ: Mapping[str, str]) -> Path | None:
    """The file to read: the one given, else $PITCREW_CONFIG, else none (defaults)."""
    if explicit is not None:
        return Path(explicit)
    named = environ.get(CONFIG_ENV, "")
    return Path(named) if named else None


def load(
    path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Settings from `path` (or $PITCREW_CONFIG) and the environment; raises ConfigError
    listing every problem."""
    env = os.environ if environ is None else environ
    file = config_path(path, env)
    problems: list[str] = []
    secrets = _secrets(env, problems)
    if file is None:
        defaults = Settings(secrets=secrets)
        problems.extend(_cross_checks(defaults, None, "(defaults)"))
        if problems:
            raise ConfigError(problems)
        return defaults
    source = str(file)
    located = _read(file, source, problems)
    loaded = None if located is None else _validate(located, source, secrets, problems)
    if loaded is not None:
        problems.extend(_cross_checks(loaded, located, source))
    if problems or loaded is None:
        raise ConfigError(sorted(problems, key=lambda p: _line_number(p, source)))
    return loaded


def _line_number(problem: str, source: str) -> int:
    """Environment problems first, then the file's in line order."""
    head = problem.removeprefix(f"{source}:").split(":", 1)[0]
    return int(head) if problem.startswith(f"{source}:") and head.isdigit() else 0


def _read(file: Path, source: str, problems: list[str]) -> Located | None:
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        problems.append(f"{source}: no such file")
        return None
    except (OSError, UnicodeDecodeError) as error:
        problems.append(f"{source}: cannot read: {error}")
        return None
    try:
        documents = load_located(text, source)
    except yaml.YAMLError as error:
        line, reason = describe_yaml_error(error)
        problems.append(f"{source}:{line}: {reason}" if line else f"{source}: {reason}")
        return None
    if len(documents) > 1:
        problems.append(f"{source}: one YAML document expected, found {len(documents)}")
        return None
    located = documents[0] if documents else Located({}, {})
    if located.data is None:
        return Located({}, located.lines)
    if not isinstance(located.data, dict):
        problems.append(f"{source}:1: the configuration must be a mapping of sections")
        return None
    return located


def _validate(
    located: Located, source: str, secrets: Secrets, problems: list[str]
) -> Settings | None:
    data = dict(located.data)
    if "secrets" in data:
        line = located.line_of(("secrets",)) or 1
        names = ", ".join(f"{v} or {v}_FILE" for v in SECRET_ENV.values())
        problems.append(
            f"{source}:{line}: secrets: tokens are read only from the environment ({names})"
        )
        data.pop("secrets")
    if "origin" in data:
        problems.append(f"{source}:{located.line_of(('origin',)) or 1}: origin: unknown key")
        data.pop("origin")
    try:
        settings = Settings.model_validate(_durations(Settings, data))
    except ValidationError as error:
        problems.extend(_describe(error, located, source))
        return None
    return settings.model_copy(update={"secrets": secrets, "origin": source})


def _describe(error: ValidationError, located: Located, source: str) -> list[str]:
    lines = []
    for item in error.errors():
        loc = tuple(part for part in item["loc"] if part != "[key]")
        line = located.line_of(loc) or 1
        field = _dotted(loc) or "(top level)"
        lines.append(f"{source}:{line}: {field}: {_reason(item, loc)}")
    return lines


def _dotted(loc: tuple[str | int, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _reason(item: Any, loc: tuple[str | int, ...]) -> str:
    kind = str(item["type"])
    if kind == "extra_forbidden":
        known = _known_keys(loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        listing = f" (known: {', '.join(known)})" if known and not close else ""
        return f"unknown key{hint}{listing}"
    if kind == "missing":
        return "required"
    if kind.startswith("time_delta"):
        return DURATION_HINT
    message = str(item["msg"])
    return message.removeprefix("Value error, ")


def _known_keys(loc: tuple[str | int, ...]) -> list[str]:
    annotation: Any = Settings
    for part in loc:
        model = _model_of(annotation)
        if model is not None and isinstance(part, str):
            field = model.model_fields.get(part)
            if field is None:
                return []
            annotation = field.annotation
        else:
            annotation = _item_type(annotation)
    model = _model_of(annotation)
    if model is None:
        return []
    return [name for name, field in model.model_fields.items() if not field.exclude]


def _model_of(annotation: Any) -> type[BaseModel] | None:
    for candidate in (annotation, *_union_arms(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _union_arms(annotation: Any) -> tuple[Any, ...]:
    if get_origin(annotation) in (Union, types.UnionType):
        return tuple(a for a in get_args(annotation) if a is not type(None))
    return ()


def _item_type(annotation: Any) -> Any:
    for candidate in (annotation, *_union_arms(annotation)):
        origin = get_origin(candidate)
        args = get_args(candidate)
        if origin in (tuple, list) and args:
            return args[0]
        if origin is dict and len(args) == 2:
            return args[1]
    return None


def _is_duration(annotation: Any) -> bool:
    return annotation is timedelta or timedelta in _union_arms(annotation)


def _durations(annotation: Any, value: Any) -> Any:
    """`value` with duration strings (`10m`) turned into seconds wherever the model
    expects a timedelta; anything unreadable is left for validation to report."""
    if _is_duration(annotation) and isinstance(value, str):
        try:
            return parse_duration(value).total_seconds()
        except ValueError:
            return value
    model = _model_of(annotation)
    if model is not None and isinstance(value, dict):
        fields = model.model_fields
        return {
            k: _durations(fields[k].annotation, v) if k in fields else v for k, v in value.items()
        }
    item = _item_type(annotation)
    if item is not None and isinstance(value, list):
        return [_durations(item, v) for v in value]
    if item is not None and isinstance(value, dict):
        return {k: _durations(item, v) for k, v in value.items()}
    return value


def _secrets(environ: Mapping[str, str], problems: list[str]) -> Secrets:
    values: dict[str, SecretStr] = {}
    for field, name in SECRET_ENV.items():
        direct = environ.get(name, "")
        named_file = environ.get(f"{name}_FILE", "")
        if direct and named_file:
            problems.append(f"environment: {name}: set {name} or {name}_FILE, not both")
            continue
        if named_file:
            try:
                direct = Path(named_file).read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as error:
                why = getattr(error, "strerror", None) or type(error).__name__
                problems.append(f"environment: {name}_FILE: cannot read {named_file}: {why}")
                continue
            if not direct:
                problems.append(f"environment: {name}_FILE: {named_file} is empty")
                continue
        if direct:
            values[field] = SecretStr(direct)
    return Secrets(**values)


def _cross_checks(settings: Settings, located: Located | None, source: str) -> list[str]:
    """Problems no single section can see: tokens the chosen chat needs."""
    if settings.chat_kind != "slack":
        return []
    secrets = settings.secrets
    needed = [("slack_bot_token", secrets.slack_bot_token)]
    if settings.chat.slack.socket_mode:
        needed.append(("slack_app_token", secrets.slack_app_token))
    else:
        needed.append(("slack_signing_secret", secrets.slack_signing_secret))
    missing = [SECRET_ENV[name] for name, value in needed if value is None]
    if not missing:
        return []
    line = located.line_of(("chat", "kind")) if located else None
    where = f"{source}:{line or 1}" if located else source
    need = " and ".join(f"{m} (or {m}_FILE)" for m in missing)
    return [f"{where}: chat.kind: the Slack chat needs {need} in the environment"]


# -- showing ----------------------------------------------------------------------------


def render(settings: Settings) -> str:
    """The effective configuration as YAML, durations readable, secrets masked."""
    data = _plain(settings.model_dump(mode="python"))
    data["secrets"] = {
        name: (MASK if getattr(settings.secrets, field) is not None else None)
        for field, name in SECRET_ENV.items()
    }
    header = f"# effective configuration from {settings.origin}\n"
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _plain(value: Any) -> Any:
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, SecretStr):
        return MASK
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | frozenset | set):
        return [_plain(v) for v in value]
    return value
