"""Reading the configuration: the YAML file and the environment, every problem at once,
and showing the effective configuration back with its secrets masked.

Why this exists: a mistake in the file must be found before 3 a.m., and reported as
`file:line: field: reason` for all of them in one go; tokens never come from the file,
only from the environment or the files its `*_FILE` variables name.
"""

from __future__ import annotations

import difflib
import os
import types
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, SecretStr, ValidationError

from bot.adapters.store.urls import redacted
from bot.app.settings.sections import Secrets, Settings
from bot.core.durations import DURATION_HINT, format_duration, parse_duration
from bot.core.errors import PitcrewError
from bot.core.yamlsrc import Located, describe_yaml_error, load_located

CONFIG_ENV = "PITCREW_CONFIG"
SECRET_ENV = {
    "slack_bot_token": "SLACK_BOT_TOKEN",
    "slack_app_token": "SLACK_APP_TOKEN",
    "slack_signing_secret": "SLACK_SIGNING_SECRET",
    "ingest_token": "PITCREW_INGEST_TOKEN",
    "alertmanager_token": "PITCREW_ALERTMANAGER_TOKEN",
    "store_password": "PITCREW_STORE_PASSWORD",
}
MASK = "**********"
# Keys that moved, and where to: a config written for an earlier release is told.
MOVED = {"sources.kubernetes.cluster": "cluster.name"}


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
    path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    client: bool = False,
) -> Settings:
    """Settings from `path` (or $PITCREW_CONFIG) and the environment; raises ConfigError
    listing every problem. `client`: for a command that talks to a running daemon or its
    store (`ingest`, `status`, ...), which needs none of the chat's tokens."""
    env = os.environ if environ is None else environ
    file = config_path(path, env)
    problems: list[str] = []
    secrets = _secrets(env, problems)
    if file is None:
        defaults = Settings(secrets=secrets)
        if not client:
            problems.extend(_cross_checks(defaults, None, "(defaults)"))
        if problems:
            raise ConfigError(problems)
        return defaults
    source = str(file)
    located = _read(file, source, problems)
    loaded = None if located is None else _validate(located, source, secrets, problems)
    if loaded is not None and not client:
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
        moved = MOVED.get(_dotted(loc))
        if moved:
            return f"moved to {moved}"
        known = _known_keys(loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        listing = f" (known: {', '.join(known)})" if known and not close else ""
        return f"unknown key{hint}{listing}"
    if kind == "missing":
        return "required"
    if kind.startswith("time_delta"):
        return DURATION_HINT
    if kind in _SHAPES:
        return f"expected {_SHAPES[kind]}, not {_shape_of(item.get('input'))}"
    ctx = item.get("ctx") or {}
    if kind in _BOUNDS:
        key, word = _BOUNDS[kind]
        bound = ctx.get(key)
        shown = bound if isinstance(bound, str) else _value(bound)
        return f"must be {word} {shown}, not {_value(item.get('input'))}"
    if kind in ("literal_error", "enum") and "expected" in ctx:
        return f"must be {ctx['expected']}, not {_value(item.get('input'))}"
    message = str(item["msg"])
    return message.removeprefix("Value error, ")


# pydantic's bounds, said as a person would ("must be at most 65535, not 99999").
_BOUNDS = {
    "less_than_equal": ("le", "at most"),
    "greater_than_equal": ("ge", "at least"),
    "greater_than": ("gt", "more than"),
    "less_than": ("lt", "less than"),
}


def _value(value: Any) -> str:
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, str):
        return repr(value[:40])
    return str(value)


# What pydantic's type errors expect, said without its class names ("a valid dictionary
# or instance of ChatSettings").
_SHAPES = {
    "model_type": "a mapping of settings",
    "model_attributes_type": "a mapping of settings",
    "dict_type": "a mapping",
    "list_type": "a list",
    "tuple_type": "a list",
    "string_type": "text",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
}


def _shape_of(value: Any) -> str:
    if isinstance(value, bool):
        return f"{str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the text {value[:40]!r}"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return "nothing" if value is None else type(value).__name__


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
    """Problems no single section can see: tokens the chosen chat and the Alertmanager
    receiver need."""
    return _slack_tokens(settings, located, source) + _alertmanager(settings, located, source)


def _where(located: Located | None, source: str, *path: str) -> str:
    line = located.line_of(path) if located else None
    return f"{source}:{line or 1}" if located else source


_TOKEN = "PITCREW_ALERTMANAGER_TOKEN"
_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def _alertmanager(settings: Settings, located: Located | None, source: str) -> list[str]:
    """The receiver's secret: what it needs to answer beyond loopback, and basic auth's."""
    receiver, token = settings.alertmanager, settings.secrets.alertmanager_token
    problems = []
    if receiver.enabled and token is None and settings.http.host not in _LOOPBACK_HOSTS:
        problems.append(
            f"{_where(located, source, 'alertmanager', 'enabled')}: alertmanager.enabled: "
            f"without {_TOKEN} (or {_TOKEN}_FILE) POST /alertmanager answers loopback "
            f"clients only, and http.host is {settings.http.host}: set the token and send "
            "it from Alertmanager's http_config (authorization or basic_auth)"
        )
    if receiver.username and token is None:
        problems.append(
            f"{_where(located, source, 'alertmanager', 'username')}: alertmanager.username: "
            f"basic auth needs {_TOKEN} (or {_TOKEN}_FILE) in the environment as its password"
        )
    if token is not None and not receiver.enabled:
        problems.append(
            f"{_where(located, source, 'alertmanager')}: alertmanager.enabled: {_TOKEN} is "
            "set but the receiver is off; set alertmanager.enabled: true, or unset the token"
        )
    return problems


def _slack_tokens(settings: Settings, located: Located | None, source: str) -> list[str]:
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
    data["store"]["url"] = redacted(settings.store.url)  # a password in it is not shown
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
