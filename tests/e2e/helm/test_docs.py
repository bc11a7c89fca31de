"""docs/configuration.md and the chart's schema of `config` are generated from the settings
model (`python -m bot.app.docgen`), and the committed files are what it generates now."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

from bot.app import docgen
from bot.app.settings.sections import Settings
from tests.e2e.helm.conftest import ROOT


def test_the_committed_files_are_generated_from_the_settings_model():
    stale = [str(p.relative_to(ROOT)) for p in docgen.stale(ROOT)]
    assert stale == [], f"{stale} out of date: run `python -m bot.app.docgen`"


def test_check_mode_reports_a_stale_file(tmp_path: Path):
    for relative in (docgen.REFERENCE, docgen.CHART_SCHEMA, docgen.FAILURE_CLASSES):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_bytes((ROOT / relative).read_bytes())
    assert docgen.main(["--check", "--root", str(tmp_path)]) == 0
    reference = tmp_path / docgen.REFERENCE
    reference.write_text(reference.read_text(encoding="utf-8") + "edited by hand\n")
    assert docgen.main(["--check", "--root", str(tmp_path)]) == 1
    assert docgen.main(["--root", str(tmp_path)]) == 0
    assert docgen.stale(tmp_path) == []


def _leaves(model: type[BaseModel], prefix: str = "") -> list[str]:
    keys = []
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        dotted = f"{prefix}{name}"
        nested = _model(field.annotation)
        keys.extend(
            _leaves(nested, dotted + ("[]." if _is_list(field.annotation) else "."))
            if nested
            else [dotted]
        )
    return keys


def _is_list(annotation: Any) -> bool:
    return get_origin(annotation) in (tuple, list)


def _model(annotation: Any) -> type[BaseModel] | None:
    candidates = [annotation, *get_args(annotation)]
    if get_origin(annotation) in (Union, types.UnionType):
        candidates = list(get_args(annotation))
    for candidate in candidates:
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def test_the_reference_lists_every_key():
    text = (ROOT / docgen.REFERENCE).read_text(encoding="utf-8")
    keys = _leaves(Settings)
    assert len(keys) > 50
    missing = [key for key in keys if f"| `{key}` |" not in text]
    assert missing == []


def test_the_chart_schema_leaves_out_exactly_the_keys_the_chart_sets():
    schema = json.loads((ROOT / docgen.CHART_SCHEMA).read_text(encoding="utf-8"))
    definitions = schema["definitions"]
    for model, keys in docgen.CHART_OWNED.items():
        properties = definitions[f"{docgen.PREFIX}{model}"]["properties"]
        assert not set(keys) & set(properties), model
    full = docgen.settings_schema()
    for model, keys in docgen.CHART_OWNED.items():
        source = full if model == "Settings" else full["$defs"][model]
        assert set(keys) <= set(source["properties"]), f"{model} has no {keys}: update CHART_OWNED"
