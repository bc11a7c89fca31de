"""Reading an input safely: refuse binary data with a clear error, read text that is
not valid UTF-8 (a log cut mid-character by `--limit-bytes`, a Latin-1 line) with
each undecodable byte as U+FFFD and say so once, and stream large files instead of
loading them."""

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
Notice = Callable[[str], None]


def check_text(sample: bytes, origin: str) -> None:
    """Raise InputError when `sample` (the start of an input) is binary data."""
    if b"\x00" in sample:
        raise InputError(f"{origin}: binary data, not text (NUL byte at offset {sample.index(0)})")


def undecodable(data: bytes, origin: str, *, partial: bool = False) -> str:
    """What to say once about `data` when it is not valid UTF-8, else "". `partial`:
    `data` is a head that may end mid-character."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        if partial and error.start >= len(data) - 3 and error.reason == "unexpected end of data":
            return ""
        return (
            f"{origin}: not UTF-8 text (invalid byte 0x{data[error.start]:02x} at offset "
            f"{error.start}); undecodable bytes are read as U+FFFD"
        )
    return ""


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
    stream: BinaryIO, origin: str, progress: Progress | None = None, notice: Notice | None = None
) -> Iterator[InputPart]:
    """The parts of one input. Small inputs are split by shape; large ones stream as logs.
    Text that is not valid UTF-8 is read with U+FFFD for each bad byte, and `notice` is
    told so once."""
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
        if notice and (said := undecodable(data, origin)):
            notice(said)
        yield from split_text(data.decode("utf-8", "replace"), origin)
        return
    if notice and (said := undecodable(head, origin, partial=True)):
        notice(said)
    yield LogText(_drain(buffered, stream, progress), origin=origin)
