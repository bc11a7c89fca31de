"""What the CLI's commands share about their input and output: the playbook-directory,
Prometheus and chart options, the inputs a command is handed (a directory is its
files), and the consoles and messages it answers on.

Why this exists: `pitcrew render` and `pitcrew diagnose` take the same inputs and say
their errors the same way; kept here, the commands' modules import these helpers and
the CLI imports the commands, with no way back.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bot.core.errors import PitcrewError
from bot.core.text import for_terminal

if TYPE_CHECKING:
    from rich.console import Console


@functools.cache
def _console(stderr: bool) -> Console:
    """A rich Console made on first use: `pitcrew diagnose` in a pipe (or `--format json`)
    never imports rich, a good part of its start-up."""
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def out() -> Console:
    return _console(False)


def err() -> Console:
    return _console(True)


def typer_app(**settings: Any) -> typer.Typer:
    """A group of commands as every one of pitcrew's looks: plain help and errors (each
    option with the word to type), no shell-completion options, help when given nothing."""
    defaults: dict[str, Any] = {
        "rich_markup_mode": None,
        "add_completion": False,
        "no_args_is_help": True,
        "pretty_exceptions_enable": False,
    }
    return typer.Typer(**(defaults | settings))


PlaybookDirs = Annotated[
    list[Path] | None,
    typer.Option("--playbooks", "-p", metavar="DIR", help="extra playbook directory (repeatable)"),
]

PrometheusUrl = Annotated[
    str | None,
    typer.Option(
        "--prometheus", metavar="URL", help="with --kube: read the killed pod's memory here"
    ),
]
ChartFile = Annotated[
    Path | None,
    typer.Option(
        "--chart", metavar="FILE", help="with --prometheus: save the memory chart (PNG) here"
    ),
]


def say(text: str) -> None:
    """A line (or lines) of the answer on standard output, safe for a terminal: what the
    commands print quotes logs, titles and names (`bot.core.text.for_terminal`)."""
    typer.echo(for_terminal(text))


def fail(message: str) -> typer.Exit:
    sys.stderr.write(f"pitcrew: {for_terminal(message)}\n")
    return typer.Exit(2)


def notice(text: str) -> None:
    """Said once on standard error, the diagnosis goes on (undecodable bytes, a cut log)."""
    sys.stderr.write(f"pitcrew: {for_terminal(text)}\n")


def expand_inputs(names: list[str]) -> list[str]:
    expanded: list[str] = []
    for name in names:
        path = Path(name)
        if name != "-" and path.is_dir():
            files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
            if not files:
                raise PitcrewError(f"{name}: directory has no files")
            expanded.extend(str(p) for p in files)
        else:
            expanded.append(name)
    return expanded
