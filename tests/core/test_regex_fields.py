"""Every regex a playbook can hold runs on RE2: refused at load when RE2 cannot take it,
and linear in its input when it can (a nested quantifier cannot stall the daemon).

The table below has one row per regex field of the playbook schema
(`playbooks/schema.json`) and of the noise list; a field added to either
without a row here fails `test_every_regex_field_of_the_schema_has_a_row`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.adapters.files.playbooks import builtin_dir, load_library
from bot.core.diagnosis.engine import Engine
from bot.core.errors import PlaybookError
from bot.core.inputs import LogText
from bot.core.inputs.alerts import Alert, alert_signal
from bot.core.model import Signal, SourceKind, frozen_map
from bot.core.playbooks.schema import NoiseList
from bot.core.validation import json_schema
from tests.support.playbooks import playbook

# Exponential on a backtracking engine: 26 `a`s and a `!` take Python's `re` seconds.
NESTED = r"^(a+)+$"
STALL = "a" * 26 + "!"
LOOKAROUND = r"(?=a)a"
BUDGET = 0.5  # seconds; RE2 answers in microseconds

Build = Callable[[str], tuple[list[dict[str, Any]], list[dict[str, str]]]]


def _signature(**fields: Any) -> list[dict[str, Any]]:
    return [playbook("field", "application_error", [{"name": "s", **fields}])]


def _guarded(**guard: str) -> list[dict[str, Any]]:
    rule = {
        "action": "ray.kill_actor",
        "params": {"name": "{{ captures.name }}", "namespace": "{{ captures.ns }}"},
        "guards": [{"capture": "name", "reason": "guarded", **guard}],
    }
    clash = {
        "name": "taken",
        "regex": r"The name (?P<name>\S+) \(namespace=(?P<ns>[^)]*)\) is already taken",
    }
    return [playbook("field", "named_actor_conflict", [clash], actions=[rule])]


def _log(text: str) -> tuple[Any, ...]:
    return (LogText((text.encode(),), SourceKind.DRIVER_LOG, "<test>"),)


def _event(reason: str, message: str = "") -> tuple[Any, ...]:
    fields = frozen_map({"message": message} if message else {})
    return (Signal(SourceKind.K8S_EVENT, message or reason, reason=reason, fields=fields),)


def _alert(name: str, reason: str = "", summary: str = "") -> tuple[Any, ...]:
    labels = frozen_map({"alertname": name, **({"reason": reason} if reason else {})})
    notes = frozen_map({"summary": summary} if summary else {})
    return (alert_signal(Alert(status="firing", labels=labels, annotations=notes)),)


# field (its path in the schema) -> (playbooks and noise using `pattern`, what to classify)
FIELDS: dict[str, tuple[Build, tuple[Any, ...]]] = {
    "Signature.regex": (lambda p: (_signature(regex=p), []), _log(STALL)),
    "Signature.reason": (lambda p: (_signature(reason=p), []), _event(STALL)),
    "Signature.not_reason": (
        lambda p: (_signature(reason=r"a.*", not_reason=p), []),
        _event(STALL),
    ),
    "Signature.fields": (
        lambda p: (_signature(fields={"message": p}), []),
        _event("Failed", STALL),
    ),
    "Signature.unless": (lambda p: (_signature(regex="!", unless=[p]), []), _log(STALL)),
    "Playbook.unless": (
        lambda p: ([{**_signature(regex="!")[0], "unless": [p]}], []),
        _log(STALL),
    ),
    "CaptureGuard.matches": (
        lambda p: (_guarded(matches=p), []),
        _log(f"The name {STALL} (namespace=rl) is already taken"),
    ),
    "CaptureGuard.not_matches": (
        lambda p: (_guarded(not_matches=p), []),
        _log(f"The name {STALL} (namespace=rl) is already taken"),
    ),
    "AlertMatch.alertname": (lambda p: (_signature(alert={"alertname": p}), []), _alert(STALL)),
    "AlertMatch.labels": (
        lambda p: (_signature(alert={"labels": [f'reason=~"{p}"']}), []),
        _alert("X", reason=STALL),
    ),
    "AlertMatch.annotations": (
        lambda p: (_signature(alert={"annotations": {"summary": p}}), []),
        _alert("X", summary=STALL),
    ),
    "NoiseRule.regex": (
        lambda p: (_signature(regex="!"), [{"regex": p, "why": "benign"}]),
        _log(STALL),
    ),
}


def _regex_fields(schema: dict[str, Any]) -> set[str]:
    """`Definition.property` for every property a schema describes as a regex."""
    found: set[str] = set()
    definitions = {schema["title"]: schema, **schema.get("$defs", {})}
    for name, definition in definitions.items():
        for prop, spec in definition.get("properties", {}).items():
            if "regex" in spec.get("description", "").lower():
                found.add(f"{name}.{prop}")
    return found


def _write(directory: Path, docs: list[dict[str, Any]], noise: list[dict[str, str]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for doc in docs:
        (directory / f"{doc['id']}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    if noise:
        (directory / "noise.yaml").write_text(yaml.safe_dump({"noise": noise}))
    return directory


def test_every_regex_field_of_the_schema_has_a_row() -> None:
    published = json.loads((builtin_dir() / "schema.json").read_text())
    fields = _regex_fields(published) | _regex_fields(json_schema(NoiseList))
    assert fields == set(FIELDS)


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_a_regex_re2_cannot_run_is_refused_at_load_with_its_file_and_line(
    tmp_path: Path, field: str
) -> None:
    build, _ = FIELDS[field]
    directory = _write(tmp_path / "library", *build(LOOKAROUND))
    with pytest.raises(PlaybookError) as refused:
        load_library([directory])
    message = str(refused.value)
    assert f"{directory}/" in message
    assert "RE2 cannot run it" in message
    assert "lookarounds and backreferences need a backtracking engine" in message


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_a_nested_quantifier_loads_and_runs_in_linear_time(tmp_path: Path, field: str) -> None:
    build, parts = FIELDS[field]
    engine = Engine(load_library([_write(tmp_path / "library", *build(NESTED))]))
    started = time.perf_counter()
    engine.diagnose(parts)
    assert time.perf_counter() - started < BUDGET
