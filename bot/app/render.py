"""`pitcrew render`: the card of a diagnosis, seen without a Slack workspace.

Why this exists: the card is what an on-call engineer reads, and until now it
could only be seen by posting it. `pitcrew render examples/seed/` diagnoses the
inputs as `diagnose` does, makes the incident and the offers the daemon would,
and prints the card exactly as Slack would receive it (Block Kit JSON), or as the
console prints it; an incident id renders a card from the daemon's store.
`--open` writes a self-contained, inert HTML preview of the blocks
(`bot.adapters.slack.preview`) and prints its path.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path
from typing import Annotated, Any

import typer

from bot.adapters.files.inputs import open_input
from bot.adapters.files.playbooks import builtin_engine
from bot.adapters.slack import preview
from bot.adapters.slack.blocks import Message, card
from bot.app.cli_inputs import PlaybookDirs, expand_inputs, fail, typer_app
from bot.core.actions.approvals import reconcile
from bot.core.errors import PitcrewError
from bot.core.incidents.reports import build_report
from bot.core.inputs import InputPart
from bot.core.inputs.reader import read_stream
from bot.core.model import Incident, Proposal, Report
from bot.core.text import for_terminal


@dataclass(frozen=True, slots=True)
class Rendered:
    report: Report
    message: Message

    def block_kit(self) -> dict[str, Any]:
        """What chat.postMessage would be sent: the fallback text and the blocks."""
        return {"text": self.message.text, "blocks": self.message.blocks}


def of_files(names: Sequence[str], playbooks: Sequence[Path], now: datetime) -> Rendered:
    """The card of the inputs' diagnosis, with the offers a first assessment makes."""
    parts: list[InputPart] = []
    for name in names:
        stream, origin, _ = open_input(name)
        with stream:
            data = stream.read()
        parts.extend(read_stream(BytesIO(data), origin))
    diagnosis = builtin_engine(list(playbooks)).diagnose(parts)
    primary = diagnosis.primary
    workload = primary.workload or primary.obj if primary else None
    incident = Incident(
        id="inc-render",
        key=str(workload) if workload else "render",
        opened_at=now,
        updated_at=now,
        diagnosis=diagnosis,
        workload=workload,
        namespace=workload.namespace if workload else "",
        cluster=primary.fields.get("cluster", "") if primary else "",
    )
    return of_incident(incident, reconcile(incident, (), now))


def of_incident(incident: Incident, proposals: Sequence[Proposal]) -> Rendered:
    report = build_report(incident, proposals)
    return Rendered(report, card(report))


def of_store(store_path: Path, incident_id: str) -> Rendered:
    from bot.adapters.store.store import Store  # only for an incident id

    if not store_path.exists():
        raise PitcrewError(f"{store_path}: no pitcrew state here; give --store or --config")
    with Store(store_path) as store:
        incident = store.incident(incident_id)
        if incident is None:
            raise PitcrewError(f"{incident_id}: no such incident in {store_path}")
        return of_incident(incident, store.proposals_for_incident(incident_id))


def now() -> datetime:
    return datetime.now(UTC)


# -- the HTML preview --------------------------------------------------------------------


def html_preview(message: Message) -> str:
    """A self-contained, inert page showing the blocks roughly as Slack lays them out."""
    return preview.page(message.text, message.blocks)


def write_preview(message: Message, directory: Path) -> Path:
    path = directory / "pitcrew-card.html"
    path.write_text(html_preview(message), encoding="utf-8")
    return path


def print_json(rendered: Rendered) -> None:
    sys.stdout.write(json.dumps(rendered.block_kit(), ensure_ascii=False, indent=1) + "\n")


# -- the command ------------------------------------------------------------------------

# `pitcrew render`, for the command group (`bot.app.cli_app`) to take in.
cli = typer_app()


@cli.command("render")
def render_command(
    targets: Annotated[
        list[str], typer.Argument(metavar="TARGET", hidden=True)  # said in the docstring
    ],
    output: Annotated[
        str, typer.Option("--format", "-f", metavar="json|text", help="json (Block Kit) or text")
    ] = "json",
    open_preview: Annotated[
        bool,
        typer.Option(
            "--open", help="also write an HTML preview of the card and open it in a browser"
        ),
    ] = False,
    store: Annotated[
        Path,
        typer.Option(
            "--store", metavar="FILE", help="the daemon's SQLite file, for an incident id"
        ),
    ] = Path("pitcrew.db"),
    playbooks: PlaybookDirs = None,
) -> None:
    """The card of a diagnosis as Slack receives it (Block Kit JSON) or as the console
    prints it, without a workspace: `pitcrew render examples/seed/`.

    Each TARGET is a file or a directory to diagnose, or one incident id of the store.
    """
    if output not in ("text", "json"):
        raise fail(f"--format must be text or json, not {output!r}")
    try:
        if len(targets) == 1 and targets[0].startswith("inc-") and not Path(targets[0]).exists():
            rendered = of_store(store, targets[0])
        else:
            rendered = of_files(expand_inputs(targets), playbooks or [], now())
    except PitcrewError as error:
        raise fail(str(error)) from None
    if output == "json":
        print_json(rendered)
    else:
        print_text(rendered)
    if open_preview:
        import tempfile

        path = write_preview(rendered.message, Path(tempfile.mkdtemp(prefix="pitcrew-")))
        sys.stderr.write(f"preview: {path}{opened(path)}\n")


def print_text(rendered: Rendered) -> None:
    """The card as the console chat prints it: a panel on a terminal, whole lines in a
    pipe (no width is known there: nothing is wrapped at 80 columns)."""
    from rich.console import Console

    from bot.adapters.console.chat import card_lines, report_panel

    if sys.stdout.isatty():
        Console(highlight=False).print(report_panel(rendered.report))
    else:
        lines = card_lines(rendered.report)
        sys.stdout.write("".join(f"{for_terminal(line)}\n" for line in lines))


def opened(path: Path) -> str:
    """Open the preview in the user's browser; what happened, to say after its path."""
    import webbrowser

    try:
        shown = webbrowser.open(path.as_uri())
    except webbrowser.Error:
        shown = False
    return " (opened in your browser)" if shown else " (no browser to open it here: open the file)"
