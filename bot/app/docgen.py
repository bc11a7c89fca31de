"""The generated docs: the configuration reference and the Helm chart's schema of it, from
`bot.app.settings`, and the failure classes, from the playbooks (`bot.app.classes_doc`).

Why this exists: the settings model is the one definition of pitcrew's config
file, and the playbooks and the taxonomy the one definition of the failure classes; a
hand-written page would drift from them. Each is generated and committed, and
`make check` fails when one is stale:

    python -m bot.app.docgen           # rewrite every generated file
    python -m bot.app.docgen --check   # exit 1 naming every stale file

`docs/configuration.md` lists every key with its type, default and meaning. In
`helm/pitcrew/values.schema.json` only the `config` property and the
`config.*` definitions are generated (the rest of that file is the chart's own):
the same closed schema, minus the keys the chart sets itself (`CHART_OWNED`),
so `helm install` rejects a misspelt or misplaced pitcrew key before any pod runs.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path, PurePath
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from bot.adapters.files.playbooks import builtin_dir, load_library
from bot.adapters.ray.client import HEADERS_ENV, TOKEN_ENV
from bot.app import classes_doc
from bot.app.settings import loading
from bot.app.settings.sections import Settings
from bot.core.durations import format_duration

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = Path("docs/configuration.md")
FAILURE_CLASSES = Path("docs/failure-classes.md")
CHART_SCHEMA = Path("helm/pitcrew/values.schema.json")
PREFIX = "config."

DURATION_PATTERN = r"^ *([0-9]+(\.[0-9]+)?|([0-9]+(\.[0-9]+)? *(ms|s|m|h|d|w) *)+)$"
DURATION: dict[str, Any] = {
    "type": ["string", "number"],
    "pattern": DURATION_PATTERN,
    "format": "pitcrew-duration",
}

# Keys the Helm chart sets from its own values; the chart's schema has no room for them.
CHART_OWNED: dict[str, tuple[str, ...]] = {
    "Settings": ("playbooks",),
    "StoreSettings": ("path", "url"),
    "LeaderElectionSettings": ("enabled", "namespace", "name"),
    "HttpSettings": ("port",),
    "ActionSettings": ("enabled",),
    "KubernetesSourceSettings": ("namespaces", "in_cluster", "kubeconfig", "context"),
}
CHART_NOTE = (
    "pitcrew's configuration (docs/configuration.md). Set by the chart, and so not "
    "allowed here: store.path (persistence.mountPath), store.url (store.url), "
    "http.port (service.port), "
    "actions.enabled (actions.enabled), playbooks (extraPlaybooks, extraPlaybooksConfigMap), "
    "sources.kubernetes.namespaces (watchNamespaces), sources.kubernetes.in_cluster, "
    "kubeconfig and context (the pod's service account)."
)
HIDDEN = ("secrets", "origin")  # not read from the file


# -- the JSON Schema ----------------------------------------------------------------------


class _Generator(GenerateJsonSchema):
    """Durations as pitcrew reads them (`10m`, `1h30m` or seconds); defaults as written
    in a config file; no titles."""

    def timedelta_schema(self, schema: core_schema.TimedeltaSchema) -> JsonSchemaValue:
        return dict(DURATION)

    def encode_default(self, dft: Any) -> Any:
        return _plain(dft)

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def _plain(value: Any) -> Any:
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, BaseModel):
        return _plain(value.model_dump(mode="python"))
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def settings_schema() -> dict[str, Any]:
    """The config file's JSON Schema: `properties` of the top level, models in `$defs`."""
    schema = Settings.model_json_schema(
        mode="validation", schema_generator=_Generator, ref_template="#/$defs/{model}"
    )
    for key in HIDDEN:
        schema["properties"].pop(key, None)
    _strip_titles(schema)
    _drop_unused(schema)
    return schema


def _strip_titles(node: Any) -> None:
    """No titles, and no defaults next to a `$ref` (a section's defaults are its keys')."""
    if isinstance(node, dict):
        node.pop("title", None)
        if "$ref" in node:
            node.pop("default", None)
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for sub in value.values():
                    _strip_titles(sub)
            else:
                _strip_titles(value)
    elif isinstance(node, list):
        for item in node:
            _strip_titles(item)


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {str(node["$ref"]).rsplit("/", 1)[-1]} if "$ref" in node else set()
        for value in node.values():
            found |= _refs(value)
        return found
    if isinstance(node, list):
        return set().union(*(_refs(item) for item in node)) if node else set()
    return set()


def _drop_unused(schema: dict[str, Any]) -> None:
    """Remove the definitions nothing outside `$defs` reaches any more."""
    defs: dict[str, Any] = schema.get("$defs", {})
    seen: set[str] = set()
    todo = list(_refs({k: v for k, v in schema.items() if k != "$defs"}))
    while todo:
        name = todo.pop()
        if name not in seen and name in defs:
            seen.add(name)
            todo.extend(_refs(defs[name]))
    for name in set(defs) - seen:
        del defs[name]


def chart_definitions() -> dict[str, Any]:
    """The `config` property and `config.*` definitions of the chart's values.schema.json."""
    schema = settings_schema()
    defs: dict[str, Any] = schema.pop("$defs")
    defs["Settings"] = schema
    for model, keys in CHART_OWNED.items():
        for key in keys:
            defs[model]["properties"].pop(key)
    root = {"$defs": defs, "$ref": "#/$defs/Settings"}
    _drop_unused(root)
    text = json.dumps(root["$defs"]).replace('"#/$defs/', f'"#/definitions/{PREFIX}')
    renamed: dict[str, Any] = {f"{PREFIX}{k}": v for k, v in json.loads(text).items()}
    return {
        "property": {"description": CHART_NOTE, "$ref": f"#/definitions/{PREFIX}Settings"},
        "definitions": dict(sorted(renamed.items())),
    }


def chart_schema(current: dict[str, Any]) -> dict[str, Any]:
    """`current` (the chart's values.schema.json) with its generated parts replaced."""
    generated = chart_definitions()
    updated = copy.deepcopy(current)
    updated.setdefault("properties", {})["config"] = generated["property"]
    own = {k: v for k, v in updated.get("definitions", {}).items() if not k.startswith(PREFIX)}
    updated["definitions"] = {**own, **generated["definitions"]}
    return updated


# -- the reference --------------------------------------------------------------------------

INTRO = f"""\
# Configuration reference

<!-- Generated from bot/app/settings/ by `python -m bot.app.docgen`; do not edit by hand. -->

`pitcrew run` and the commands that work on its state read one YAML file:
`--config FILE`, else `${loading.CONFIG_ENV}`, else none (every key below has a
working default). Every section is closed: an unknown key is an error, and
`pitcrew config check FILE` reports every problem at once as
`file:line: field: reason`; `pitcrew config show FILE` prints the effective
configuration. Durations are written `500ms`, `30s`, `10m`, `1h30m`, `2d`, `1w`,
or as a number of seconds. In the Helm chart this file is the `config` value
(`helm/pitcrew/values.yaml`), less the keys the chart sets itself.

## Environment

| variable | meaning |
|---|---|
| `{loading.CONFIG_ENV}` | the config file, when `--config` is not given |
{{secrets}}| `PITCREW_CACHE_DIR` | where compiled playbook patterns and the validated \
playbooks are cached (default `$XDG_CACHE_HOME/pitcrew` or `~/.cache/pitcrew`; `off`: \
no cache; safe to delete) |
| `{HEADERS_ENV}` | a JSON object of extra HTTP headers for the Ray dashboards (auth proxies) |
| `{TOKEN_ENV}` | Ray token authentication: \
sent to the dashboards as `Authorization: Bearer <token>` |

Tokens are never read from the file; each may instead be in a file named by
`<VARIABLE>_FILE` (a mounted Kubernetes Secret), not both. They are masked
wherever settings are shown.
"""

_SECRET_MEANING = {
    "slack_bot_token": (
        "the Slack app's bot token (`xoxb-…`); setting it makes `chat.kind: auto` Slack"
    ),
    "slack_app_token": "the app-level token (`xapp-…`, scope `connections:write`) for Socket Mode",
    "slack_signing_secret": "verifies requests in Slack's HTTP mode (`socket_mode: false`)",
    "ingest_token": "what `POST /ingest` asks of clients beyond loopback: `Bearer` it",
    "alertmanager_token": (
        "what `POST /alertmanager` asks of every client (`alertmanager.enabled`): as "
        "Alertmanager's `http_config.authorization` credentials, or basic auth's password"
    ),
    "store_password": "PostgreSQL's password, when `store.url` leaves it out",
}


def reference() -> str:
    """docs/configuration.md."""
    schema = settings_schema()
    defs: dict[str, Any] = schema["$defs"]
    secrets = "".join(
        f"| `{name}`, `{name}_FILE` | {_SECRET_MEANING.get(field, '')} |\n"
        for field, name in loading.SECRET_ENV.items()
    )
    parts = [INTRO.replace("{secrets}", secrets)]
    for key, prop in schema["properties"].items():
        _section(parts, key, prop, defs)
    parts.append(
        "## All defaults\n\n`pitcrew config show` with no file:\n\n```yaml\n"
        + loading.render(Settings()).split("\n", 1)[1]
        + "```\n"
    )
    return "\n".join(parts)


def _model(prop: dict[str, Any], defs: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    ref = prop.get("$ref")
    if ref is None:
        return None
    name = str(ref).rsplit("/", 1)[-1]
    return name, defs[name]


def _section(parts: list[str], path: str, prop: dict[str, Any], defs: dict[str, Any]) -> None:
    found = _model(prop, defs)
    if found is None:
        return
    _, model = found
    level = "##" if "." not in path and "[]" not in path else "###"
    lines = [f"{level} `{path}`", ""]
    about = model.get("description") or prop.get("description")
    if about:
        lines += [_sentence(str(about)), ""]
    lines += ["| key | type | default | meaning |", "|---|---|---|---|"]
    nested: list[tuple[str, dict[str, Any]]] = []
    required = set(model.get("required", ()))
    for key, sub in model["properties"].items():
        dotted = f"{path}.{key}"
        if _model(sub, defs) is not None:
            nested.append((dotted, sub))
            lines.append(f"| `{dotted}` | section | | see [`{dotted}`](#{_anchor(dotted)}) |")
            continue
        items = sub.get("items")
        if sub.get("type") == "array" and isinstance(items, dict) and _model(items, defs):
            nested.append((f"{dotted}[]", items))
            kind = f"list of [`{dotted}[]`](#{_anchor(dotted + '[]')})"
        else:
            kind = _type(sub, defs)
        default = "**required**" if key in required else _default(sub)
        meaning = _cell(str(sub.get("description", "")))
        lines.append(f"| `{dotted}` | {kind} | {default} | {meaning} |")
    parts.append("\n".join(lines) + "\n")
    for dotted, sub in nested:
        _section(parts, dotted, sub, defs)


def _anchor(path: str) -> str:
    return "".join(c for c in path.lower() if c.isalnum() or c in "-_ ").replace(" ", "-")


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return text if text.endswith((".", ")")) else text + "."


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _default(prop: dict[str, Any]) -> str:
    if "default" not in prop:
        return ""
    value = prop["default"]
    if value is None:
        return "null"
    if value == "":
        return '`""`'
    if isinstance(value, dict | list) and not value:
        return "`{}`" if isinstance(value, dict) else "`[]`"
    return (
        f"`{_cell(json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value)}`"
    )


def _type(prop: dict[str, Any], defs: dict[str, Any]) -> str:
    if prop.get("format") == DURATION["format"]:
        return "duration"
    if "anyOf" in prop:
        arms = [a for a in prop["anyOf"] if a.get("type") != "null"]
        nullable = len(arms) < len(prop["anyOf"])
        text = " or ".join(_type(a, defs) for a in arms)
        return f"{text}, or null" if nullable else text
    if "enum" in prop:
        return "one of " + ", ".join(f"`{v}`" for v in prop["enum"])
    kind = prop.get("type")
    if kind == "array":
        items = prop.get("items", {})
        return f"list of {_plural(_type(items, defs))}" if items else "list"
    if kind == "object":
        values = prop.get("additionalProperties")
        if isinstance(values, dict):
            return f"map of string to {_type(values, defs)}"
        return "map"
    names = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean"}
    text = names.get(str(kind), str(kind))
    if prop.get("format") == "path":
        text = "path"
    bounds = [
        f"{sign} {prop[key]}"
        for key, sign in (
            ("minimum", "≥"),
            ("exclusiveMinimum", ">"),
            ("maximum", "≤"),
            ("exclusiveMaximum", "<"),
        )
        if key in prop
    ]
    if prop.get("minLength") == 1:
        text = f"non-empty {text}"
    if "pattern" in prop:
        bounds.append(f"matching `{prop['pattern']}`")
    return f"{text} ({', '.join(bounds)})" if bounds else text


def _plural(text: str) -> str:
    if text.startswith("one of "):
        return "values, each " + text
    head, _, rest = text.partition(" (")
    return f"{head}s" + (f" ({rest}" if rest else "")


# -- files ----------------------------------------------------------------------------------


def outputs(root: Path = ROOT) -> dict[Path, str]:
    """Every generated file under `root` with the text it should hold."""
    schema_file = root / CHART_SCHEMA
    current = json.loads(schema_file.read_text(encoding="utf-8"))
    return {
        root / REFERENCE: reference(),
        schema_file: json.dumps(chart_schema(current), indent=2, ensure_ascii=False) + "\n",
        root / FAILURE_CLASSES: classes_doc.page(load_library([builtin_dir()])),
    }


def stale(root: Path = ROOT) -> list[Path]:
    """The generated files whose committed text differs from a fresh generation."""
    return [
        path
        for path, text in outputs(root).items()
        if not path.exists() or path.read_text(encoding="utf-8") != text
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bot.app.docgen", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is stale")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: here)")
    args = parser.parse_args(argv)
    if args.check:
        old = stale(args.root)
        for path in old:
            sys.stderr.write(f"{path}: stale; run python -m bot.app.docgen\n")
        return 1 if old else 0
    for path, text in outputs(args.root).items():
        path.write_text(text, encoding="utf-8")
        sys.stdout.write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
