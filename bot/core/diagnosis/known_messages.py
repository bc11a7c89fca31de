"""Which inventory message a failure-looking line is, by the message's invariant words.

Why this exists: a line no playbook matched is answered "pitcrew does not know this
failure"; when the line is one the emitting systems are known to print (the inventory,
`playbooks/inventory/`), the answer names that entry and its emitter, so the reader
knows what printed it and where to look, and a line the inventory calls benign at its
level (`none`) is not raised as a failure at all. A message is recognized by its
literal parts (the text between its `{name}` placeholders) found in order in the line;
a line cut by a terminal's wrap still counts when it holds a long enough run of them.
Candidates come from one word of each wording (its rarest), so a line costs a few
dictionary look-ups, and nothing is built until the first line is asked about. Pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from bot.core.diagnosis.unmatched import FailureLine

BENIGN = "none"
"""The inventory's verdict for a message benign at its level."""
UNCLASSIFIED = "unclassified"
"""The inventory's verdict for a failure no class explains."""
MIN_PARTIAL = 24
"""A line holding only some of a message's parts (cut by a wrap) must hold this many of
its literal characters, and half of them."""
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{3,}")
_PART = re.compile(r"(\{\{|\}\}|\{[a-z_][a-z0-9_]*\})")


@dataclass(frozen=True, slots=True)
class KnownMessage:
    """An inventory entry as the matcher needs it: what to name and its wordings' parts."""

    key: str
    """`<file's name without .jsonl>#<id>`."""
    emitter: str
    verdict: str
    wordings: tuple[tuple[str, ...], ...]
    """Each wording's literal parts, in order, whitespace collapsed."""


@dataclass(frozen=True, slots=True)
class Recognized:
    message: KnownMessage
    score: int
    """Literal characters of the message found in the line."""
    whole: bool
    """Every literal part was found (not only a run of them, as in a cut line)."""

    @property
    def label(self) -> str:
        """How the unknown answer names it."""
        return f"known as {self.message.key} ({self.message.emitter})"


Row = str
"""A `KnownMessage` as one JSON array `[key, emitter, verdict, wordings]`, read only when
the message is a line's candidate: 20,000 of these strings are read back from the user's
cache in a few thousandths of a second, where as many tuples of tuples took a hundredth
and as many objects a tenth."""


@dataclass
class KnownMessages:
    """The inventory's messages, indexed by one word of each wording on first use."""

    rows: tuple[Row, ...]
    _index: dict[str, tuple[int, ...]] | None = field(default=None, repr=False)
    """Each word's wordings as a flat run of (message, wording) numbers."""
    _read: dict[int, KnownMessage] = field(default_factory=dict, repr=False, compare=False)

    def message(self, number: int) -> KnownMessage:
        message = self._read.get(number)
        if message is None:
            key, emitter, verdict, wordings = json.loads(self.rows[number])
            message = KnownMessage(key, emitter, verdict, tuple(map(tuple, wordings)))
            self._read[number] = message
        return message

    def indexed(self) -> KnownMessages:
        """The same messages with their index built now (to be kept, e.g. in a cache)."""
        self._built()
        return self

    def _built(self) -> dict[str, tuple[int, ...]]:
        """Each wording under its rarest word across the inventory (the longest among
        equally rare ones), so that a line's words call up a few candidates each."""
        if self._index is None:
            words_of = [
                [_inner_words(parts) for parts in self.message(m).wordings]
                for m in range(len(self.rows))
            ]
            count: dict[str, int] = {}
            for wordings in words_of:
                for words in wordings:
                    for word in set(words):
                        count[word] = count.get(word, 0) + 1
            index: dict[str, list[int]] = {}
            for m, wordings in enumerate(words_of):
                for w, words in enumerate(wordings):
                    if words:
                        key = min(words, key=lambda word: (count[word], -len(word)))
                        index.setdefault(key, []).extend((m, w))
            self._index = {word: tuple(numbers) for word, numbers in index.items()}
            self._read.clear()  # read again when asked: a cache keeps the rows alone
        return self._index

    def recognize(self, line: str) -> Recognized | None:
        """The message `line` is, the one with the most literal text found; None if none."""
        index = self._built()
        text = " ".join(line.split())
        best: Recognized | None = None
        seen: set[tuple[int, int]] = set()
        for word in set(_WORD.findall(text)):
            numbers = index.get(word, ())
            for candidate in zip(numbers[::2], numbers[1::2], strict=True):
                if candidate in seen:
                    continue
                seen.add(candidate)
                message = self.message(candidate[0])
                parts = message.wordings[candidate[1]]
                score = found(parts, text)
                if score and (best is None or score > best.score):
                    whole = score == sum(len(p) for p in parts)
                    best = Recognized(message, score, whole)
        return best


def _inner_words(parts: Sequence[str]) -> list[str]:
    """A wording's words but those that may run into a placeholder's value (the first of
    a part after one, the last of a part before one): a line holds each of these whole.
    All of its words when that leaves none."""
    inner: list[str] = []
    every: list[str] = []
    for i, part in enumerate(parts):
        words = _WORD.findall(part)
        every.extend(words)
        if i > 0 and words and part.startswith(words[0]):
            words = words[1:]
        if i < len(parts) - 1 and words and part.endswith(words[-1]):
            words = words[:-1]
        inner.extend(words)
    return inner or every


def found(parts: Sequence[str], text: str) -> int:
    """The literal characters of `parts` found in `text`: all of them in order, or the
    longest run of consecutive parts in order when that is long enough (a cut line);
    0 when neither."""
    total = sum(len(p) for p in parts)
    best = 0
    for start in range(len(parts)):
        position = 0
        run = 0
        for part in parts[start:]:
            index = text.find(part, position)
            if index < 0:
                break
            position = index + len(part)
            run += len(part)
        if run == total:
            return total
        best = max(best, run)
    return best if best >= MIN_PARTIAL and 2 * best >= total else 0


MIN_RAISE = 20
"""An exception line is an emitting system's own raise when the inventory's unclassified
message holds this many of its characters, and half of the text after `Name: `."""


def system_raise(known: KnownMessages, line: str) -> Recognized | None:
    """The unclassified inventory message an exception line (`Name: text`) is whole, when
    the message is most of the line's text: a vLLM or Ray raise no class explains, which
    the catch-all leaves to the unknown answer (TAXONOMY "Known but unclassified")."""
    hit = known.recognize(line)
    if hit is None or not hit.whole or hit.message.verdict != UNCLASSIFIED:
        return None
    said = line.split(": ", 1)[-1].strip()
    return hit if hit.score >= MIN_RAISE and 2 * hit.score >= len(said) else None


def known_messages(messages: Iterable[KnownMessage]) -> KnownMessages:
    return KnownMessages(
        tuple(
            json.dumps([m.key, m.emitter, m.verdict, m.wordings], ensure_ascii=False)
            for m in messages
        )
    )


def name_lines(known: KnownMessages, lines: Sequence[FailureLine]) -> list[FailureLine]:
    """Each failure-looking line the inventory knows, with its entry and emitter named; a
    line whole of a message the inventory calls benign at its level (`none`) left out."""
    named: list[FailureLine] = []
    for line in lines:
        hit = known.recognize(line.text)
        if hit is None:
            named.append(line)
        elif not (hit.whole and hit.message.verdict == BENIGN):
            named.append(replace(line, text=f"{line.text}  ({hit.label})"))
    return named


def inventory_key(file: str, entry_id: str) -> str:
    """How an answer names an inventory entry: `<file's name without .jsonl>#<id>`."""
    name = file.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".jsonl")
    return f"{name}#{entry_id}"


def literal_parts(template: str) -> tuple[str, ...]:
    """The literal text between a template's placeholders, whitespace collapsed (the
    invariant parts a line is held to)."""
    parts: list[str] = []
    current = ""
    for token in _PART.split(template):
        if token in ("{{", "}}"):
            current += token[0]
        elif _PART.fullmatch(token):
            parts.append(current)
            current = ""
        else:
            current += token
    parts.append(current)
    return tuple(" ".join(p.split()) for p in parts if p.strip())


def read_known(text: str, file: str) -> Iterator[KnownMessage]:
    """An inventory file's messages as the matcher needs them, read without checking the
    file (`pitcrew playbooks check` and the tests check it: `bot.core.quality.inventory`):
    a line that is not such an entry is passed over."""
    for raw in text.split("\n")[1:]:
        try:
            item = json.loads(raw)
            wordings = tuple(literal_parts(w["template"]) for w in item["wordings"])
            yield KnownMessage(
                inventory_key(file, item["id"]), item["emitter"], item["verdict"], wordings
            )
        except (ValueError, KeyError, TypeError):
            continue
