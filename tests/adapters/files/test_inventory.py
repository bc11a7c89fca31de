"""The message inventory on disk as the matcher needs it (bot.adapters.files.inventory):
kept in the user's cache under a hash of the files' bytes and of pitcrew's code, read back
with the same answers, read afresh after an edit, and empty when a file cannot be read."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from bot.adapters.files.inventory import inventory_known_messages
from bot.core.diagnosis.known_messages import KnownMessages, known_messages

HEADER = '{"project": "vllm", "read": "the test\'s own lines"}\n'
EMPTY_PROMPT = (
    '{"id": "prompt-empty", "emitter": "vllm", "level": "raise", "kind": "log", '
    '"wordings": [{"template": "The prompt cannot be empty"}], "verdict": "unclassified"}\n'
)
TOO_LONG = (
    '{"id": "prompt-too-long", "emitter": "vllm", "level": "raise", "kind": "log", '
    '"wordings": [{"template": "The decoder prompt (length {length}) is longer than the '
    'maximum model length of {max}."}], "verdict": "unclassified"}\n'
)
LINES = [
    "ValueError: The prompt cannot be empty",
    "ValueError: The decoder prompt (length 9000) is longer than the maximum model length of 8192.",
    "ValueError: something else",
]


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("PITCREW_CACHE_DIR", str(directory))
    return directory


def _inventory(tmp_path: Path, *entries: str) -> Path:
    directory = tmp_path / "inventory"
    directory.mkdir(exist_ok=True)
    (directory / "vllm.jsonl").write_text(HEADER + "".join(entries), encoding="utf-8")
    return directory


def _names(known: KnownMessages) -> list[str | None]:
    return [hit.label if (hit := known.recognize(line)) else None for line in LINES]


def test_the_inventory_read_back_from_the_cache_names_lines_as_the_files_do(
    tmp_path: Path, cache_dir: Path
) -> None:
    directory = _inventory(tmp_path, EMPTY_PROMPT, TOO_LONG)
    built = inventory_known_messages([directory])
    (entry,) = cache_dir.glob("known-*.pickle")
    again = inventory_known_messages([directory])
    assert again.rows == built.rows
    assert _names(again) == _names(built)
    assert _names(built) == [
        "known as vllm#prompt-empty (vllm)",
        "known as vllm#prompt-too-long (vllm)",
        None,
    ]
    planted = known_messages(())
    entry.write_bytes(pickle.dumps(planted))  # the entry under the files' hash is used as is
    assert inventory_known_messages([directory]).rows == ()


def test_an_edited_inventory_is_read_afresh(tmp_path: Path, cache_dir: Path) -> None:
    directory = _inventory(tmp_path, EMPTY_PROMPT)
    assert _names(inventory_known_messages([directory]))[1] is None
    _inventory(tmp_path, EMPTY_PROMPT, TOO_LONG)
    assert _names(inventory_known_messages([directory]))[1] == (
        "known as vllm#prompt-too-long (vllm)"
    )
    assert len(list(cache_dir.glob("known-*.pickle"))) == 2


def test_an_inventory_that_is_not_utf8_names_nothing_and_is_not_kept(
    tmp_path: Path, cache_dir: Path
) -> None:
    directory = _inventory(tmp_path)
    (directory / "vllm.jsonl").write_bytes(HEADER.encode() + b'{"id": "\xff"}\n')
    assert inventory_known_messages([directory]).rows == ()
    assert not list(cache_dir.glob("known-*.pickle"))
