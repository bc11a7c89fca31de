"""Input files named on the command line (or `-`, standard input), opened for the core's
reader (`bot.core.inputs.reader.read_stream`), which takes a stream and never a path."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import BinaryIO

from bot.core.errors import InputError


def open_input(name: str) -> tuple[BinaryIO, str, int | None]:
    """(stream, origin label, size if known) for a path or `-` (standard input)."""
    if name == "-":
        return sys.stdin.buffer, "<stdin>", None
    path = Path(name)
    if not path.exists():
        raise InputError(f"{name}: no such file")
    if path.is_dir():
        raise InputError(f"{name}: is a directory")
    try:
        return path.open("rb"), name, path.stat().st_size
    except OSError as error:
        raise InputError(f"{name}: cannot read: {error.strerror}") from None
