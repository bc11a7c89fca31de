"""What the console prints is safe for a terminal: a card, a diagnosis (as a panel and as
plain lines), a reply, and the daemon's log lines keep the words of a hostile log and
lose its escape sequences, control characters and direction overrides; rich markup in
it is shown as written, never applied."""

from __future__ import annotations

import io
import logging
from datetime import UTC, datetime

import pytest
from rich.console import Console

from bot.adapters.console.chat import ConsoleChat, report_panel
from bot.adapters.console.render import plain_lines, print_diagnosis
from bot.adapters.files.playbooks import builtin_engine
from bot.app.wiring import LOG_FORMAT, TerminalFormatter
from bot.core.inputs.reader import read_stream
from bot.core.model import Diagnosis
from tests.support.hostile import HOSTILE, TERMINAL_CONTROLS, hostile_report

FAMILIES = sorted(HOSTILE)


def terminal() -> tuple[Console, io.StringIO]:
    """A console that lays out like a terminal but writes no colour: every escape
    sequence in what it writes came from the text it was given."""
    out = io.StringIO()
    return Console(file=out, force_terminal=True, color_system=None, width=240), out


def controls_in(text: str) -> list[str]:
    return [c for c in TERMINAL_CONTROLS if c in text]


def hostile_diagnosis(text: str) -> Diagnosis:
    line = f"torch.OutOfMemoryError: CUDA out of memory. {text.replace(chr(0), '')}\n"
    return builtin_engine([]).diagnose(read_stream(io.BytesIO(line.encode()), f"log {text}"))


@pytest.mark.parametrize("family", FAMILIES)
def test_a_card_on_the_console(family: str) -> None:
    console, out = terminal()
    console.print(report_panel(hostile_report(HOSTILE[family]), ref=f"ml {HOSTILE[family]}"))
    printed = out.getvalue()
    assert controls_in(printed) == []
    assert "cause" in printed
    assert "preview" in printed


@pytest.mark.parametrize("family", FAMILIES)
def test_a_diagnosis_as_a_panel_and_as_lines(family: str) -> None:
    diagnosis = hostile_diagnosis(HOSTILE[family])
    assert diagnosis.primary is not None
    console, out = terminal()
    print_diagnosis(diagnosis, console, title=f"pitcrew diagnose {HOSTILE[family]}")
    assert controls_in(out.getvalue()) == []
    assert controls_in("\n".join(plain_lines(diagnosis))) == []


@pytest.mark.parametrize("family", FAMILIES)
def test_a_reply_and_an_attached_file(family: str) -> None:
    out = io.StringIO()
    chat = ConsoleChat(out, width=240)
    chat.reply("ml/1", f"Action failed: {HOSTILE[family]}")
    chat.attach("ml/1", f"/tmp/{HOSTILE[family]}.tar.gz", HOSTILE[family])
    assert controls_in(out.getvalue()) == []


def test_rich_markup_from_a_log_is_shown_as_written() -> None:
    console, out = terminal()
    console.print(report_panel(hostile_report(HOSTILE["rich markup"])))
    assert "cause [bold red]alarm[/bold red] [link=http://evil.example]x[/link]" in out.getvalue()
    diagnosis = hostile_diagnosis(HOSTILE["rich markup"])
    console, out = terminal()
    print_diagnosis(diagnosis, console)
    assert "[bold red]alarm[/bold red]" in out.getvalue()


@pytest.mark.parametrize("family", FAMILIES)
def test_a_log_line_of_the_daemon(family: str) -> None:
    record = logging.LogRecord(
        "pitcrew",
        logging.WARNING,
        __file__,
        1,
        "chat.postMessage failed: %s",
        (HOSTILE[family],),
        None,
    )
    record.created = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    line = TerminalFormatter(LOG_FORMAT).format(record)
    assert controls_in(line) == []
    assert "WARNING pitcrew: chat.postMessage failed: " in line
