"""The `pitcrew` command group: its top-level options, `version`, and the module each
command lives in, imported when that command runs.

Why this exists: most of a short `pitcrew diagnose` is importing, and each command needs
only its own modules (diagnose: the playbooks and the inputs; run: the daemon, the
adapters, the store). This module imports typer and nothing of pitcrew's commands;
`pitcrew --help`, or a command it does not know, imports them all to list them.
"""

from __future__ import annotations

import importlib
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup
from typer.main import get_group

from bot import __version__
from bot.app import collector
from bot.app.cli_inputs import out, typer_app

# Each command (or group of commands) and the module whose `cli` (a typer app) holds it.
COMMANDS: dict[str, str] = {
    "diagnose": "bot.app.diagnose_cli",
    "playbooks": "bot.app.playbooks_cli",
    "render": "bot.app.render",
    **dict.fromkeys(
        (
            "run",
            "demo",
            "config",
            "ingest",
            "approve",
            "reject",
            "incidents",
            "silence",
            "unsilence",
            "history",
            "status",
            "requeue",
            "unmatched",
            "bundle",
        ),
        "bot.app.commands",
    ),
}


class _LazyCommands(TyperGroup):
    """The top-level command group: a command's module is imported the first time the
    command, or the list of all, is asked for."""

    def _load(self, module: str) -> None:
        self.commands.update(get_group(importlib.import_module(module).cli).commands)
        collector.resume()  # the command's modules are in: collect again, without them

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        module = COMMANDS.get(cmd_name)
        if cmd_name not in self.commands and module is not None:
            self._load(module)
        if cmd_name not in self.commands:
            self.list_commands(ctx)  # to say which commands there are
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: Any) -> list[str]:
        for module in dict.fromkeys(COMMANDS.values()):
            if not all(name in self.commands for name, of in COMMANDS.items() if of == module):
                self._load(module)
        groups = {
            name for name, command in self.commands.items() if isinstance(command, TyperGroup)
        }
        # diagnose, the other commands, then the groups of commands
        order = sorted(self.commands, key=lambda name: (name in groups, name != "diagnose"))
        self.commands = {name: self.commands[name] for name in order}
        return super().list_commands(ctx)


app = typer_app(
    cls=_LazyCommands,
    help="pitcrew: diagnoses Ray-on-Kubernetes failures and offers approved remediations.",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"pitcrew {__version__}\n")
        raise typer.Exit()


@app.callback()
def _top(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="print pitcrew's version and exit",
            is_eager=True,
            callback=_print_version,
        ),
    ] = False,
) -> None:
    """pitcrew: diagnoses Ray-on-Kubernetes failures and offers approved remediations."""


@app.command("version")
def version() -> None:
    """Print pitcrew's version."""
    out().print(__version__)
