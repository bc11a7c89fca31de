"""Playbook files on disk: the built-in directory and the operator's, read into a Library.

Why this exists: the core parses and checks a playbook's text (`bot.core.playbooks.library`)
and never touches a file. Here directories are listed (`*.yaml`, `*.yml`, and the
benign-noise list `noise.yaml`), each file is read and handed to the core, and
the validated library is kept in the user's cache (`bot.adapters.files.cache`)
under a hash of every file's path and bytes and of pitcrew's code, so the next
`pitcrew diagnose` with the same files skips the parsing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from pathlib import Path

from bot.adapters.files import cache
from bot.core.diagnosis.engine import Engine
from bot.core.diagnosis.known_messages import KnownMessages
from bot.core.errors import PlaybookError
from bot.core.playbooks.library import (
    NOISE_FILE,
    Library,
    LoadedPlaybook,
    NoiseRule,
    assemble,
    with_template_code,
)


def builtin_dir() -> Path:
    """The playbooks shipped with pitcrew (in the wheel, or the source tree)."""
    package = Path(__file__).resolve().parents[2]  # bot/, unpacked from the wheel or not
    packaged = package / "builtin_playbooks"
    return packaged if packaged.is_dir() else package.parent / "playbooks"


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PlaybookError(str(path), "", f"cannot read: {error}") from None


def load_playbook(path: Path) -> LoadedPlaybook:
    from bot.core.playbooks.schema import parse_playbook  # pydantic: not for a cached library

    return parse_playbook(_text(path), str(path))


def load_noise(path: Path) -> tuple[NoiseRule, ...]:
    from bot.core.playbooks.schema import parse_noise

    return parse_noise(_text(path), str(path))


def playbook_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        raise PlaybookError(str(directory), "", "not a directory")
    return sorted(
        p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.name != NOISE_FILE
    )


def load_library(directories: Iterable[Path]) -> Library:
    """Every playbook of every directory, with unique ids; the first error stops the load.
    A library loaded before from the same files (and the same pitcrew) comes from the
    user's cache instead of being parsed and validated again. A directory named twice
    (the built-in one given as an extra, or through a symlink) is read once."""
    directories = list({d.resolve(): d for d in directories}.values())
    entry = cache.entry("library", key, ".pickle") if (key := _library_key(directories)) else None
    library = cache.read_value(entry, Library)
    if library is None:
        library = _load_library(directories)
        if entry is not None:
            library = with_template_code(library)
            cache.write_value(entry, library)
    return library


def load_builtin(extra: Iterable[Path] = ()) -> Library:
    return load_library([builtin_dir(), *extra])


def engine_of(library: Library, known: Callable[[], KnownMessages] | None = None) -> Engine:
    """The library compiled, its pattern databases kept in the user's cache; a failure no
    playbook knows is named from the built-in message inventory."""
    from bot.adapters.files.inventory import builtin_known_messages  # it imports this module

    return Engine(library, cache.PATTERNS, known or builtin_known_messages)


def builtin_engine(extra: Iterable[Path] = ()) -> Engine:
    """The built-in playbooks (and those of `extra`), compiled."""
    return engine_of(load_builtin(extra))


def _library_key(directories: list[Path]) -> str | None:
    """A hash of the files a load reads (paths and bytes) and of the code that reads them;
    None if one cannot be read (the load then reports it)."""
    digest = hashlib.sha256(cache.code_fingerprint())
    try:
        for directory in directories:
            for path in [*playbook_files(directory), directory / NOISE_FILE]:
                data = path.read_bytes() if path.name != NOISE_FILE or path.exists() else None
                name = str(path).encode()
                digest.update(b"%d:%s" % (len(name), name))
                digest.update(b"-" if data is None else b"%d:%s" % (len(data), data))
    except (OSError, PlaybookError):
        return None
    return digest.hexdigest()[:32]


def _load_library(directories: list[Path]) -> Library:
    playbooks: list[LoadedPlaybook] = []
    noise: list[NoiseRule] = []
    for directory in directories:
        playbooks.extend(load_playbook(path) for path in playbook_files(directory))
        noise_path = directory / NOISE_FILE
        if noise_path.exists():
            noise.extend(load_noise(noise_path))
    return assemble(playbooks, noise)
