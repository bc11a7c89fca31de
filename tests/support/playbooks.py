"""Small builders shared by the engine tests: playbooks written to a temporary directory,
and the text of one small playbook."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bot.adapters.files.playbooks import load_library
from bot.core.diagnosis.engine import Engine

# One playbook of one signature, as a user writes it: the loader's and the cache's tests
# edit it line by line, and the line numbers of their expected errors count from here.
PLAYBOOK_TEXT = """\
id: my-playbook
title: My playbook
category: cuda_oom
severity: error
match:
  - name: one
    regex: 'CUDA out of memory'
diagnosis: 'GPU memory ran out.'
examples:
  - name: positive
    input: "torch.OutOfMemoryError: CUDA out of memory.\\n"
    expect: {match: true}
"""


def playbook(
    pid: str, category: str, signatures: list[dict[str, Any]], **extra: Any
) -> dict[str, Any]:
    """A minimal valid playbook document."""
    doc: dict[str, Any] = {
        "id": pid,
        "title": f"Playbook {pid}",
        "category": category,
        "severity": "error",
        "match": signatures,
        "diagnosis": f"{pid} matched.",
        "examples": [{"name": "placeholder", "input": "x", "expect": {"match": False}}],
    }
    doc.update(extra)
    return doc


def write_library(directory: Path, *docs: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for doc in docs:
        (directory / f"{doc['id']}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return directory


def engine_for(directory: Path, *docs: dict[str, Any]) -> Engine:
    return Engine(load_library([write_library(directory, *docs)]))
