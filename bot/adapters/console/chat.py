"""The console chat: cards printed to a terminal (or a file), for laptops and the demo.

Approvals come from `pitcrew approve ID` in another shell, which writes to the
same store; this chat only shows.
"""

from __future__ import annotations

import itertools
import threading
from typing import TextIO

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from bot.core.model import Report, Severity
from bot.daemon.ports import Attempt

_BORDER = {
    Severity.CRITICAL: "bold red",
    Severity.ERROR: "red",
    Severity.WARNING: "yellow",
    Severity.INFO: "cyan",
}


def report_panel(report: Report, ref: str = "", cluster: str = "") -> Panel:
    """A Report as a rich panel: the console's card, titled with the `cluster` whose
    pitcrew posted it when it has a name."""
    lines: list[Text | Table] = []
    where = "  ".join(f"{k}: {v}" for k, v in report.where.items() if v)
    if where:
        lines.append(Text(where, style="dim"))
    lines.append(Text.assemble(("What broke: ", "bold"), report.cause or report.primary))
    offered = [a for a in report.actions if str(a.state) == "offered"]
    if offered:
        plan = " → ".join(s.partition(":")[0] for s in offered[0].steps)
        lines.append(Text.assemble(("Do: ", "bold"), f"approve {plan or offered[0].action}"))
    elif report.actions:  # decided: what became of the card's action, not "no action fits"
        first = report.actions[0]
        lines.append(Text.assemble(("Action: ", "bold"), f"{first.action}: {first.state}"))
    elif report.steps:
        lines.append(Text("Do (no action pitcrew can run fits):", style="bold"))
        lines.extend(Text(f"  {n}. {step}") for n, step in enumerate(report.steps, 1))
    lines.extend(Text(f"Runbook: {url}", style="dim") for url in report.runbook)
    if report.sureness:
        lines.append(Text.assemble(("How sure: ", "bold"), report.sureness))
    lines.append(Text.assemble(("Root cause: ", "dim"), report.primary))
    for secondary in report.secondary:
        lines.append(Text.assemble(("Also seen: ", "dim"), secondary))
    for evidence in report.evidence:
        lines.append(Text(f"  {evidence}", style="dim", no_wrap=True, overflow="ellipsis"))
    for alert in report.alerts:
        lines.append(Text.assemble(("Alert: ", "bold"), alert.text))
        links = [("rule", alert.source), ("in Alertmanager", alert.alertmanager)]
        links.append(("silence it in Alertmanager", alert.silence))
        lines.extend(Text(f"  {name}: {url}", style="dim") for name, url in links if url)
    if report.diagnosis:
        lines.append(Text(""))
        lines.append(Text(report.diagnosis))
    if report.actions:
        table = Table(show_header=True, header_style="bold", expand=True)
        table.add_column("proposal")
        table.add_column("action")
        table.add_column("state")
        table.add_column("preview", overflow="fold")
        for action in report.actions:
            table.add_row(
                Text(action.proposal_id),
                Text(action.action),
                str(action.state),
                Text(action.preview),
            )
        lines.append(table)
    if report.memory:
        lines.append(Text.assemble(("Memory: ", "bold"), report.memory))
    for withheld in report.withheld:
        lines.append(Text(f"not offered: {withheld}", style="dim"))
    for entry in report.history:
        lines.append(Text(f"· {entry}", style="dim"))
    # Text, not str: rich would read `[gpu-group]` in a title or preview as markup.
    title = Text(f"{f'[{cluster}] ' if cluster else ''}{report.title} [{report.status}]")
    subtitle = Text(f"card {ref}") if ref else None
    return Panel(
        Group(*lines), title=title, subtitle=subtitle, border_style=_BORDER[report.severity]
    )


def _file_kind(path: str) -> str:
    """What an attached file is, by its name: the evidence bundle or the memory chart."""
    if path.endswith(".tar.gz"):
        return "bundle"
    return "chart" if path.endswith(".png") else "file"


class ConsoleChat:
    name = "console"

    def __init__(
        self,
        stream: TextIO | None = None,
        width: int | None = None,
        *,
        console: Console | None = None,
        cluster: str = "",
    ) -> None:
        """Cards go to `stream` (default: standard output), or to a `console` shared with
        other output (the demo's progress spinner); each names `cluster`, when named."""
        self.cluster = cluster
        self._console = console or Console(
            file=stream, width=width, highlight=False, soft_wrap=False
        )
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def post(self, channel: str, report: Report) -> str:
        with self._lock:
            ref = f"{channel}/{next(self._ids)}"
            self._console.print(report_panel(report, ref, self.cluster))
        return ref

    def update(self, ref: str, report: Report) -> None:
        with self._lock:
            self._console.print(report_panel(report, f"{ref} (updated)", self.cluster))

    def reply(self, ref: str, text: str, attempt: Attempt | None = None) -> None:
        """A printed line cannot be lost on its way, so `attempt` changes nothing here."""
        with self._lock:
            self._console.print(Text(f"  ↳ [{ref}] {text}", overflow="fold"))

    def attach(self, ref: str, path: str, text: str, attempt: Attempt | None = None) -> None:
        """The file's comment (a chart's with its sparkline) and where the file is."""
        with self._lock:
            what = _file_kind(path)
            self._console.print(Text(f"  ↳ [{ref}] {text}\n    {what}: {path}", overflow="fold"))

    def healthy(self) -> bool:
        return True
