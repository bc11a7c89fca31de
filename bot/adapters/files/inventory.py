"""Inventory files on disk: `playbooks/inventory/*.jsonl`, read into checked entries (for
`pitcrew playbooks check` and coverage) or into the matcher's compact form (for the
unknown answer of a diagnosis).

Why this exists: the core parses an inventory file's text (`bot.core.quality.inventory`,
`bot.core.diagnosis.known_messages`) and never touches a file. The inventory is large
(some 17,000 messages, JSON Lines so that reading it costs a fraction of a second); the
diagnosis asks for the compact form only when it has a failure-looking line no playbook
matched, so a `pitcrew diagnose` that finds something, or nothing at all, never reads it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from bot.adapters.files import cache
from bot.adapters.files.playbooks import builtin_dir
from bot.core.diagnosis.known_messages import KnownMessages, known_messages, read_known
from bot.core.errors import PlaybookError

if TYPE_CHECKING:  # the parser needs pydantic: imported only when files are parsed
    from bot.core.quality.inventory import InventoryEntry

INVENTORY_DIR = "inventory"


def builtin_inventory_dir() -> Path:
    return builtin_dir() / INVENTORY_DIR


def inventory_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        raise PlaybookError(str(directory), "", "not a directory")
    return sorted(p for p in directory.iterdir() if p.suffix == ".jsonl")


def _read(path: Path) -> str:
    return _text(path, _bytes(path))


def _bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise PlaybookError(str(path), "", f"cannot read: {error}") from None


def _text(path: Path, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PlaybookError(str(path), "", f"cannot read: {error}") from None


def load_inventory(directories: Iterable[Path]) -> tuple[InventoryEntry, ...]:
    """Every entry of every inventory file, checked, in file order; the first bad line
    stops the load with its file, line and the entry's id."""
    from bot.core.quality.inventory import check_unique, parse_inventory

    entries: list[InventoryEntry] = []
    for directory in directories:
        for path in inventory_files(directory):
            entries.extend(parse_inventory(_read(path), str(path)))
    check_unique(entries)
    return tuple(entries)


def builtin_known_messages() -> KnownMessages:
    """The built-in inventory as the matcher needs it."""
    return inventory_known_messages([builtin_inventory_dir()])


def inventory_known_messages(directories: list[Path]) -> KnownMessages:
    """The inventory of `directories` as the matcher needs it, indexed; empty when it cannot
    be read (the unknown answer then names no entry, as before the inventory). Kept in the
    user's cache under a hash of the files' bytes and the code: reading and indexing 20,000
    messages costs a third of a second, hashing the files and reading the entry back a
    hundredth of that (the files are decoded only to build it)."""
    try:
        paths = [path for directory in directories for path in inventory_files(directory)]
        data = [(path, _bytes(path)) for path in paths]
    except PlaybookError:
        return known_messages(())
    entry = cache.entry("known", _key(data), ".pickle")
    found = cache.read_value(entry, KnownMessages)
    if found is None:
        try:
            texts = [(path, _text(path, raw)) for path, raw in data]
        except PlaybookError:
            return known_messages(())
        found = known_messages(m for path, text in texts for m in read_known(text, str(path)))
        found.indexed()
        cache.write_value(entry, found)
    return found


def _key(data: list[tuple[Path, bytes]]) -> str:
    digest = hashlib.sha256(cache.code_fingerprint())
    for path, raw in data:
        digest.update(f"{path}\x00{len(raw)}\x00".encode())
        digest.update(raw)
    return digest.hexdigest()[:32]
