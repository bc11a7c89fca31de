"""Catalogue files on disk: `playbooks/catalogue/*.yaml`, read into entries.

Why this exists: the core parses and checks a catalogue file's text
(`bot.core.quality.catalogue`) and never touches a file. Here the directory beside the
built-in playbooks (or one the user names) is listed and each file read; the
first bad file stops the load with its name, line and entry id.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from bot.adapters.files.playbooks import builtin_dir
from bot.core.errors import PlaybookError
from bot.core.quality.catalogue import CatalogueEntry, check_unique, parse_catalogue

CATALOGUE_DIR = "catalogue"


def builtin_catalogue_dir() -> Path:
    return builtin_dir() / CATALOGUE_DIR


def load_catalogue(directories: Iterable[Path]) -> tuple[CatalogueEntry, ...]:
    """Every entry of every `*.yaml` file of `directories`, in file order."""
    entries: list[CatalogueEntry] = []
    for directory in directories:
        if not directory.is_dir():
            raise PlaybookError(str(directory), "", "not a directory")
        for path in sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml")):
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as error:
                raise PlaybookError(str(path), "", f"cannot read: {error}") from None
            entries.extend(parse_catalogue(text, str(path)))
    check_unique(entries)
    return tuple(entries)
