"""The message catalogue: what the systems pitcrew reads can print, entry by entry.

Why this exists: a signature written from the excerpt at hand demands that
excerpt's wording; one checked against what Ray, KubeRay, Kubernetes, vLLM,
PyTorch, NCCL and the NVIDIA driver actually print carries over to text nobody
here has seen. Each entry (one YAML file per project or area under
`playbooks/catalogue/`) is one message read from its project's source: the
text with `{name}` marking its variable parts, the file and versions that print
it, the TAXONOMY class it must classify to and the playbook signature that must
recognize it. A message reworded across releases keeps every wording
(`wordings`: each template with the file and release tags that print it), so a
signature is held to what every release prints, not to the newest text alone.
`bot.core.quality.carriers` wraps each filled wording the ways it reaches a user;
`bot.core.quality.coverage` checks every carried text classifies to its class.
Pure: a file's text in, entries out; a bad file fails with its name, line and
the entry's id.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from bot.core.errors import PlaybookError
from bot.core.playbooks.schema import parse_document
from bot.core.taxonomy import Category
from bot.core.yamlsrc import Located

Project = Literal[
    "ray",
    "kuberay",
    "kubernetes",
    "vllm",
    "pytorch",
    "nccl",
    "nvidia",
    "containerd",
    "cri-o",
    "docker",
    "volcano",
    "kueue",
]
Kind = Literal["log", "event", "status"]

_ID = r"^[a-z0-9][a-z0-9-]*[a-z0-9]$"
_SIGNATURE = r"^[a-z0-9][a-z0-9-]*[a-z0-9]/[a-z0-9][a-z0-9_-]*$"
# `{name}` marks a variable part; `{{` and `}}` are literal braces.
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([a-z_][a-z0-9_]*)\}|[{}]")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Wording(_Strict):
    """One way a release printed the entry's message: its provenance and its text."""

    template: str = Field(min_length=1, description="the text; `{name}` marks a variable part")
    versions: str = Field(
        min_length=1, description="the release tags that print it, oldest-newest, as read"
    )
    source: str | None = Field(
        default=None, min_length=1, description="the file at those tags, when not the entry's"
    )
    values: dict[str, str] = Field(
        default_factory=dict, description="fills for placeholders only this wording has"
    )

    @field_validator("template")
    @classmethod
    def _placeholders_close(cls, template: str) -> str:
        placeholders(template)
        return template

    @model_validator(mode="after")
    def _own_values(self) -> Wording:
        stray = sorted(set(self.values) - placeholders(self.template))
        if stray:
            raise ValueError(f"values name no placeholder of the template: {', '.join(stray)}")
        return self


class Entry(_Strict):
    """One message a system prints, as read from its source."""

    id: str = Field(pattern=_ID, description="unique within the file")
    category: Category = Field(alias="class", description="the TAXONOMY class it must classify to")
    signature: str = Field(
        pattern=_SIGNATURE, description="<playbook id>/<match name> that must recognize it"
    )
    emitter: str = Field(min_length=1, description="the component that prints it")
    kind: Kind = Field(description="log line, Kubernetes Event, or a status field")
    source: str = Field(min_length=1, description="the file in its project's repository")
    versions: str = Field(min_length=1, description="the versions that print it, as read")
    message: str = Field(min_length=1, description="the text; `{name}` marks a variable part")
    values: dict[str, str] = Field(default_factory=dict, description="plausible fills")
    wordings: list[Wording] = Field(
        default_factory=list,
        description="every wording across releases, the entry's `message` among them",
    )
    reason: str | None = Field(
        default=None,
        pattern=r"^[A-Z][A-Za-z0-9]*$",
        description="the reason printed beside the message (an event's; a status's reason)",
    )
    object: str | None = Field(
        default=None,
        pattern=r"^[A-Z][A-Za-z]*$",
        description="the kind of object an event or status is about (default Pod; RayJob "
        "for a KubeRay status, RayCluster for a KubeRay event)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Entry:
        if self.kind == "event" and self.reason is None:
            raise ValueError("an event entry needs the `reason` printed beside its message")
        if self.kind == "log" and (self.reason is not None or self.object is not None):
            raise ValueError("`reason` and `object` apply to event and status entries only")
        names = placeholders(self.message)
        for wording in self.wordings:
            names |= placeholders(wording.template)
        unknown = sorted(set(self.values) - names)
        if unknown:
            raise ValueError(f"values name no placeholder of the message: {', '.join(unknown)}")
        return self

    @field_validator("wordings")
    @classmethod
    def _message_among_wordings(
        cls, wordings: list[Wording], info: ValidationInfo
    ) -> list[Wording]:
        if not wordings:
            return wordings
        seen: dict[str, int] = {}
        for index, wording in enumerate(wordings):
            if wording.template in seen:
                raise ValueError(f"wordings {seen[wording.template]} and {index} are the same text")
            seen[wording.template] = index
        message = info.data.get("message")
        if message is not None and message not in seen:
            raise ValueError(
                "the message is none of the wordings: list it as one"
                " (`message: &current ...`, then `- template: *current`)"
            )
        return wordings

    @property
    def every_wording(self) -> tuple[Wording, ...]:
        """The wordings to hold a signature to: the listed ones, else the message alone."""
        if self.wordings:
            return tuple(self.wordings)
        return (Wording(template=self.message, versions=self.versions),)


class CatalogueFile(_Strict):
    project: Project
    entries: list[Entry] = Field(min_length=1)


@dataclass(frozen=True, slots=True)
class CatalogueEntry:
    """An entry with where it was read from."""

    entry: Entry
    project: str
    source: str
    line: int | None

    @property
    def key(self) -> str:
        """`<file>#<id>`: unique across the catalogue."""
        name = self.source.rsplit("/", 1)[-1]
        return f"{name}#{self.entry.id}"


def placeholders(message: str) -> set[str]:
    """The `{name}`s of a message; a lone brace is an error."""
    names: set[str] = set()
    for match in _PLACEHOLDER.finditer(message):
        token = match.group(0)
        if token in ("{{", "}}"):
            continue
        if match.group(1) is None:
            raise ValueError(f"lone {token!r} at offset {match.start()}: write {token * 2}")
        names.add(match.group(1))
    return names


def fill(entry: Entry, wording: Wording | None = None) -> str:
    """The message (or one of its wordings) with every placeholder filled: the wording's
    value, the entry's, else one by name."""
    if wording is None:
        return fill_text(entry.message, entry.values)
    return fill_text(wording.template, {**entry.values, **wording.values})


def fill_text(message: str, values: Mapping[str, str]) -> str:
    """`message` with every placeholder filled: from `values`, else a plausible one by name."""

    def value(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0]
        name = match.group(1) or ""
        return values.get(name) or default_value(name)

    return _PLACEHOLDER.sub(value, message).rstrip("\n")


_DEFAULTS: Mapping[str, str] = {
    "ip": "10.4.3.21",
    "node_ip": "10.4.3.21",
    "address": "10.4.3.21:6379",
    "gcs_address": "10.4.0.9:6379",
    "pid": "4721",
    "port": "8265",
    "namespace": "ml",
    "pod": "train-grpo-worker-gpu-7xk2p",
    "pod_name": "train-grpo-worker-gpu-7xk2p",
    "node": "gke-ml-a100-pool-8f2c-vq4n",
    "node_name": "gke-ml-a100-pool-8f2c-vq4n",
    "container": "ray-worker",
    "image": "rayproject/ray:2.40.0-py310-gpu",
    "cluster": "train-grpo-raycluster-x7k2p",
    "raycluster": "train-grpo-raycluster-x7k2p",
    "rayjob": "train-grpo",
    "job": "train-grpo",
    "name": "train-grpo",
    "group": "gpu-workers",
    "actor_name": "TrainWorker",
    "class_name": "TrainWorker",
    "function_name": "rollout",
    "task_name": "rollout",
    "error": "connection refused",
    "status": "FAILED",
    "reason": "Error",
    "version": "2.40.0",
}
_NUMBER = re.compile(
    r"(?:^|_)(?:size|bytes|count|num|mb|gb|mib|gib|seconds|secs|ms|timeout|port|code|limit"
    r"|used|total|capacity|threshold|rank|index|attempts?|retries|restarts|replicas|pid)(?:_|$)"
)


def default_value(name: str) -> str:
    """A plausible fill for a placeholder the entry gives no value for."""
    if name in _DEFAULTS:
        return _DEFAULTS[name]
    if name.endswith("_id") or name == "id":
        return "c8f0a3e2d6b1f4a97e5d0c3b2a1f9e8d7c6b5a40"
    if name.endswith(("_ip", "_address")):
        return "10.4.3.21"
    if _NUMBER.search(name):
        return "2"
    return name.replace("_", "-")


def parse_catalogue(text: str, source: str) -> tuple[CatalogueEntry, ...]:
    """A catalogue file's entries; PlaybookError names the file, line and entry id."""
    document = parse_document(text, source)
    try:
        parsed = CatalogueFile.model_validate(document.data)
    except ValidationError as error:
        raise problem(error, source, document) from None
    seen: dict[str, int] = {}
    entries: list[CatalogueEntry] = []
    for index, entry in enumerate(parsed.entries):
        line = document.line_of(("entries", index))
        if entry.id in seen:
            where = str(line or "")
            raise PlaybookError(
                source, where, f"entry {entry.id!r}: id already used (entry {seen[entry.id]})"
            )
        seen[entry.id] = index
        entries.append(CatalogueEntry(entry, parsed.project, source, line))
    return tuple(entries)


def check_unique(entries: Iterable[CatalogueEntry]) -> None:
    """No two files give the same file name (entry keys are file#id)."""
    seen: dict[str, str] = {}
    for item in entries:
        if seen.setdefault(item.key, item.source) != item.source:
            raise PlaybookError(item.source, "", f"{item.key}: also in {seen[item.key]}")


def problem(error: ValidationError, source: str, document: Located) -> PlaybookError:
    """The first problem as `file:line: entry 'id': field: reason`, the rest counted."""
    problem: dict[str, Any] = dict(error.errors()[0])
    loc = tuple(problem["loc"])
    line = document.line_of(loc)
    message = str(problem["msg"]).removeprefix("Value error, ")
    if problem["type"] == "extra_forbidden":
        message = "unknown key"
    elif problem["type"] == "missing":
        message = "required key is missing"
    where = ".".join(str(part) for part in loc[2:]) if loc[:1] == ("entries",) else ""
    what = ".".join(str(part) for part in loc)
    if len(loc) >= 2 and loc[0] == "entries" and isinstance(loc[1], int):
        data = document.data.get("entries")
        item = data[loc[1]] if isinstance(data, list) and len(data) > loc[1] else None
        ident = item.get("id") if isinstance(item, dict) else None
        label = f"entry {ident!r}" if ident else f"entries[{loc[1]}]"
        what = f"{label}: {where}" if where else label
    more = len(error.errors()) - 1
    suffix = f" (and {more} more problems)" if more > 0 else ""
    return PlaybookError(source, str(line or ""), f"{what}: {message}{suffix}")
