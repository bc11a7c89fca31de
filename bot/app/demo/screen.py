"""What the demo shows: pitcrew's cards (the console chat), progress, questions, a summary.

Everything goes through one rich Console, so the cards the daemon's outbox thread
posts, the spinner of the step in progress and the approval questions do not write
over each other. On a terminal progress is a spinner; otherwise (CI, a pipe, the
README's excerpt) it is one plain line per step.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.prompt import Confirm
from rich.table import Table

from bot.adapters.console.chat import ConsoleChat, report_panel
from bot.adapters.console.render import terminal_text
from bot.core.model import Report
from bot.daemon.ports import Attempt


@dataclass(frozen=True)
class Card:
    """A card as the chat last showed it: its reference, report and when it was posted."""

    ref: str
    report: Report
    posted_at: float  # time.time()
    updates: int = 0


class DemoChat(ConsoleChat):
    """The console chat, remembering each card so the demo can wait for one and measure
    how soon it came. A card is printed in full when posted; an update prints its new
    status and history lines (the demo shows the full card again where it matters)."""

    def __init__(self, console: Console) -> None:
        super().__init__(console=console)
        self.console = console
        self._cards: dict[str, Card] = {}
        self._seen: dict[str, set[str]] = {}
        self._changed = threading.Condition()
        self._files: list[tuple[str, str, str]] = []  # (card ref, path, text) in threads

    def post(self, channel: str, report: Report) -> str:
        ref = super().post(channel, report)
        with self._changed:
            self._cards[ref] = Card(ref, report, time.time())
            self._seen[ref] = set(report.history)
            self._changed.notify_all()
        return ref

    def update(self, ref: str, report: Report) -> None:
        with self._changed:
            old = self._cards.get(ref)
            seen = self._seen.setdefault(ref, set())
            fresh = [line for line in report.history if line not in seen]
            seen.update(fresh)
            posted = old.posted_at if old else time.time()
            self._cards[ref] = Card(ref, report, posted, (old.updates + 1) if old else 1)
            self._changed.notify_all()
        if old is None or old.report.status != report.status or fresh:
            lines = [terminal_text(f"  ↻ card {ref}: {report.status}", style="bold")]
            lines.extend(terminal_text(f"      · {line}", style="dim") for line in fresh)
            for line in lines:
                self.console.print(line, overflow="fold")

    def attach(self, ref: str, path: str, text: str, attempt: Attempt | None = None) -> None:
        super().attach(ref, path, text, attempt)
        with self._changed:
            self._files.append((ref, path, text))
            self._changed.notify_all()

    def wait_for_file(self, ref: str, starts: str, timeout: float) -> tuple[str, str]:
        """(path, text) of the first file in card `ref`'s thread whose text starts with
        `starts`; TimeoutError after `timeout`."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for at, path, text in self._files:
                    if at == ref and text.startswith(starts):
                        return path, text
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"timed out after {timeout:g}s waiting for {starts!r}")
                self._changed.wait(min(left, 0.5))

    def card(self, ref: str) -> Card | None:
        with self._changed:
            return self._cards.get(ref)

    def cards(self) -> list[Card]:
        with self._changed:
            return list(self._cards.values())

    def wait_for(self, match: Callable[[Card], bool], timeout: float, what: str) -> Card:
        """The first card `match` accepts; TimeoutError naming `what` after `timeout`."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = next((c for c in self._cards.values() if match(c)), None)
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
                self._changed.wait(min(left, 0.5))

    def show(self, ref: str) -> None:
        """Print the card at `ref` in full, as it stands now."""
        with self._changed:
            card = self._cards.get(ref)
        if card is not None:
            self.console.print(report_panel(card.report, f"{ref} (now)"))


class Screen:
    """Headings, progress, plain lines and yes/no questions on the demo's console."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live = console.is_terminal

    def heading(self, text: str, note: str = "") -> None:
        self.console.print()
        self.console.rule(terminal_text(text, style="bold"))
        if note:
            self.console.print(terminal_text(note, style="italic"))

    @contextlib.contextmanager
    def step(self, text: str) -> Iterator[None]:
        """A spinner while the block runs (a plain `… text` line off a terminal)."""
        if self.live:
            with self.console.status(terminal_text(text), spinner="dots"):
                yield
        else:
            self.say(f"… {text}")
            yield

    def say(self, text: str, style: str = "") -> None:
        self.console.print(terminal_text(text, style=style), overflow="fold")

    def done(self, text: str) -> None:
        self.say(f"✓ {text}", "green")

    def problem(self, text: str) -> None:
        self.say(f"✗ {text}", "bold red")

    def ask(self, question: str) -> bool:
        return Confirm.ask(
            terminal_text(question, style="bold"), console=self.console, default=True
        )


@dataclass
class ScenarioRow:
    """One scenario's row of the summary."""

    scenario: str
    cause: str = "-"
    action: str = "-"
    result: str = "not run"
    to_card: float | None = None
    ok: bool = False
    declined: bool = False  # the person at the prompt said no: no failure


def summary(console: Console, outcomes: Sequence[ScenarioRow], timings: Sequence[str]) -> None:
    table = Table(title="pitcrew demo: summary", show_lines=True)
    # Fixed widths that fit 100 columns, wrapped at words (a cause is never cut short).
    table.add_column("scenario", width=19, overflow="fold")
    table.add_column("detected cause", width=22, overflow="fold")
    table.add_column("action", width=16, overflow="fold")
    table.add_column("result", width=19, overflow="fold")
    table.add_column("failure → card", width=8, justify="right", overflow="fold")
    for outcome in outcomes:
        mark = (
            terminal_text("✓ ", style="green")
            if outcome.ok
            else terminal_text("✗ ", style="bold red")
        )
        if outcome.declined:
            mark = terminal_text("– ", style="yellow")
        table.add_row(
            terminal_text(outcome.scenario),
            terminal_text(outcome.cause),
            terminal_text(outcome.action),
            mark + terminal_text(outcome.result),
            f"{outcome.to_card:.1f} s" if outcome.to_card is not None else "-",
        )
    console.print()
    console.print(table)
    for line in timings:
        console.print(terminal_text(line, style="dim"))
