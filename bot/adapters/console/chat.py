"""The console chat: cards printed to a terminal (or a file), for laptops and the demo.

Approvals come from `pitcrew approve ID` in another shell, which writes to the
same store; this chat only shows. Every text is made safe for the terminal by
`bot.adapters.console.render.terminal_text`.
"""

from __future__ import annotations

import itertools
import threading
from typing import TextIO

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from bot.adapters.console.render import terminal_text
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
        lines.append(terminal_text(where, style="dim"))
    lines.append(terminal_text(("What broke: ", "bold"), report.cause or report.primary))
    offered = [a for a in report.actions if str(a.state) == "offered"]
    if offered:
        plan = " → ".join(s.partition(":")[0] for s in offered[0].steps)
        lines.append(terminal_text(("Do: ", "bold"), f"approve {plan or offered[0].action}"))
    elif report.actions:  # decided: what became of the card's action, not "no action fits"
        first = report.actions[0]
        lines.append(terminal_text(("Action: ", "bold"), f"{first.action}: {first.state}"))
    elif report.steps:
        lines.append(terminal_text("Do (no action pitcrew can run fits):", style="bold"))
        lines.extend(terminal_text(f"  {n}. {step}") for n, step in enumerate(report.steps, 1))
    lines.extend(terminal_text(f"Runbook: {url}", style="dim") for url in report.runbook)
    if report.sureness:
        lines.append(terminal_text(("How sure: ", "bold"), report.sureness))
    lines.append(terminal_text(("Root cause: ", "dim"), report.primary))
    for secondary in report.secondary:
        lines.append(terminal_text(("Also seen: ", "dim"), secondary))
    for evidence in report.evidence:
        lines.append(terminal_text(f"  {evidence}", style="dim", no_wrap=True, overflow="ellipsis"))
    for alert in report.alerts:
        lines.append(terminal_text(("Alert: ", "bold"), alert.text))
        links = [("rule", alert.source), ("in Alertmanager", alert.alertmanager)]
        links.append(("silence it in Alertmanager", alert.silence))
        lines.extend(terminal_text(f"  {name}: {url}", style="dim") for name, url in links if url)
    if report.diagnosis:
        lines.append(terminal_text(""))
        lines.append(terminal_text(report.diagnosis))
    if report.actions:
        table = Table(show_header=True, header_style="bold", expand=True)
        table.add_column("proposal")
        table.add_column("action")
        table.add_column("state")
        table.add_column("preview", overflow="fold")
        for action in report.actions:
            table.add_row(
                terminal_text(action.proposal_id),
                terminal_text(action.action),
                terminal_text(str(action.state)),
                terminal_text(action.preview),
            )
        lines.append(table)
    if report.memory:
        lines.append(terminal_text(("Memory: ", "bold"), report.memory))
    for withheld in report.withheld:
        lines.append(terminal_text(f"not offered: {withheld}", style="dim"))
    for entry in report.history:
        lines.append(terminal_text(f"· {entry}", style="dim"))
    # Text, never str: rich would read `[gpu-group]` in a title or preview as markup.
    title = terminal_text(f"{f'[{cluster}] ' if cluster else ''}{report.title} [{report.status}]")
    subtitle = terminal_text(f"card {ref}") if ref else None
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
            self._console.print(terminal_text(f"  ↳ [{ref}] {text}", overflow="fold"))

    def attach(self, ref: str, path: str, text: str, attempt: Attempt | None = None) -> None:
        """The file's comment (a chart's with its sparkline) and where the file is."""
        with self._lock:
            what = _file_kind(path)
            self._console.print(
                terminal_text(f"  ↳ [{ref}] {text}\n    {what}: {path}", overflow="fold")
            )

    def healthy(self) -> bool:
        return True
