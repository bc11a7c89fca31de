"""Inventory files on disk: `playbooks/inventory/*.yaml`, read into entries, and the
compact form the diagnosis names unknown lines with, kept in the user's cache.

Why this exists: the core parses and checks an inventory file's text
(`bot.core.quality.inventory`) and never touches a file. The inventory is large (some
17,000 messages); parsing and validating it takes seconds, so both forms are kept in
the user's cache (`bot.adapters.files.cache`) under a hash of the files and the code,
and the diagnosis asks for the compact form only when it has a failure-looking line no
playbook matched: a `pitcrew diagnose` that finds something, or nothing at all, never
reads it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from bot.adapters.files import cache
from bot.adapters.files.playbooks import builtin_dir
from bot.core.diagnosis.known_messages import KnownMessage, KnownMessages, known_messages
from bot.core.errors import PlaybookError

if TYPE_CHECKING:  # the parser needs pydantic: imported only when files are parsed
    from bot.core.quality.inventory import InventoryEntry

INVENTORY_DIR = "inventory"


def builtin_inventory_dir() -> Path:
    return builtin_dir() / INVENTORY_DIR


def inventory_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        raise PlaybookError(str(directory), "", "not a directory")
    return sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml"))


def load_inventory(directories: Iterable[Path]) -> tuple[InventoryEntry, ...]:
    """Every entry of every inventory file (`InventoryEntry`), in file order; the first bad
    file stops the load with its name, line and the entry's id."""
    from bot.core.quality.inventory import InventoryEntry, check_unique, parse_inventory

    directories = list(directories)
    key = _key(directories, "entries")
    entry = cache.entry("inventory", key, ".pickle") if key else None
    found = cache.read_value(entry, tuple)
    if found is not None and all(isinstance(e, InventoryEntry) for e in found):
        return tuple(e for e in found if isinstance(e, InventoryEntry))
    entries: list[InventoryEntry] = []
    for directory in directories:
        for path in inventory_files(directory):
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as error:
                raise PlaybookError(str(path), "", f"cannot read: {error}") from None
            entries.extend(parse_inventory(text, str(path)))
    check_unique(entries)
    cache.write_value(entry, tuple(entries))
    return tuple(entries)


def builtin_known_messages() -> KnownMessages:
    """The built-in inventory as the matcher needs it."""
    return inventory_known_messages([builtin_inventory_dir()])


def inventory_known_messages(directories: list[Path]) -> KnownMessages:
    """The inventory of `directories` as the matcher needs it; empty when it cannot be
    read (the unknown answer then names no entry, as before the inventory)."""
    key = _key(directories, "known")
    entry = cache.entry("known", key, ".pickle") if key else None
    found = cache.read_value(entry, tuple)
    if found is None:
        try:
            found = tuple(_compact(load_inventory(directories)))
        except PlaybookError:
            return known_messages(())
        cache.write_value(entry, found)
    return known_messages(m for m in found if isinstance(m, KnownMessage))


def _compact(entries: Iterable[InventoryEntry]) -> Iterable[KnownMessage]:
    from bot.core.quality.inventory import literal_parts

    for e in entries:
        parts = tuple(literal_parts(w.template) for w in e.wordings)
        yield KnownMessage(e.key, e.emitter, e.verdict, parts)


def _key(directories: list[Path], kind: str) -> str | None:
    digest = hashlib.sha256(cache.code_fingerprint() + kind.encode())
    try:
        for directory in directories:
            for path in inventory_files(directory):
                data = path.read_bytes()
                digest.update(str(path).encode() + b"\x00%d:" % len(data) + data)
    except (OSError, PlaybookError):
        return None
    return digest.hexdigest()[:32]
