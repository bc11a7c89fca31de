"""Splitting a pasted text into its parts (placeholder: all text is a log)."""

from __future__ import annotations

from collections.abc import Iterator

from bot.inputs import InputPart, LogText


def split_text(text: str, origin: str) -> Iterator[InputPart]:
    yield LogText([text.encode("utf-8")], origin=origin)
