"""Reading an input safely: refuse binary and non-UTF-8 text with a clear error,
and stream large files instead of loading them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import BinaryIO

from bot.core.errors import InputError
from bot.core.inputs import InputPart, LogText
from bot.core.inputs.segment import split_text

SNIFF_BYTES = 64 << 10
CHUNK_BYTES = 1 << 20
# Inputs up to this size are examined whole, so mixed pastes are split into
# their parts; larger ones are logs and are streamed.
WHOLE_LIMIT = 16 << 20

Progress = Callable[[int], None]


def check_text(sample: bytes, origin: str) -> None:
    """Raise InputError when `sample` (the start of an input) is not UTF-8 text."""
    if b"\x00" in sample:
        raise InputError(f"{origin}: binary data, not text (NUL byte at offset {sample.index(0)})")
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.start >= len(sample) - 3 and error.reason == "unexpected end of data":
            return
        raise InputError(
            f"{origin}: not UTF-8 text (invalid byte 0x{sample[error.start]:02x} "
            f"at offset {error.start})"
        ) from None


def _drain(buffered: list[bytes], stream: BinaryIO, progress: Progress | None) -> Iterator[bytes]:
    """The buffered chunks (released as they go), then the rest of the stream."""
    buffered.reverse()
    while buffered:
        chunk = buffered.pop()
        if progress:
            progress(len(chunk))
        yield chunk
    while chunk := stream.read(CHUNK_BYTES):
        if progress:
            progress(len(chunk))
        yield chunk


def read_stream(
    stream: BinaryIO, origin: str, progress: Progress | None = None
) -> Iterator[InputPart]:
    """The parts of one input. Small inputs are split by shape; large ones stream as logs."""
    head = stream.read(SNIFF_BYTES)
    if not head:
        return
    check_text(head, origin)
    buffered, size = [head], len(head)
    while size < WHOLE_LIMIT and (chunk := stream.read(CHUNK_BYTES)):
        buffered.append(chunk)
        size += len(chunk)
    if size < WHOLE_LIMIT:
        data = b"".join(buffered)
        if progress:
            progress(len(data))
        yield from split_text(data.decode("utf-8", "replace"), origin)
        return
    yield LogText(_drain(buffered, stream, progress), origin=origin)
