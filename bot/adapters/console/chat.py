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
from bot.core.model import ProposalState, Report, ReportAction, Severity
from bot.daemon.ports import Attempt

_BORDER = {
    Severity.CRITICAL: "bold red",
    Severity.ERROR: "red",
    Severity.WARNING: "yellow",
    Severity.INFO: "cyan",
}


# One line of a card: (label, text, style); the panel styles it, plain output prints
# `label text` whole.
Row = tuple[str, str, str]


def _rows(report: Report) -> list[Row]:
    """The card's lines above its offers, in order: where, what happened last, what
    broke, what to do, how sure, the findings and their evidence, the alerts."""
    rows: list[Row] = []
    where = "  ".join(f"{k}: {v}" for k, v in report.where.items() if v)
    if where:
        rows.append(("", where, "dim"))
    rows += _latest(report)
    rows.append(("What broke: ", report.cause or report.primary, ""))
    rows += _to_do(report)
    rows += [("Runbook: ", url, "dim") for url in report.runbook]
    if report.sureness:
        rows.append(("How sure: ", report.sureness, ""))
    rows.append(("Root cause: ", report.primary, "dim"))
    rows += [("Also seen: ", secondary, "dim") for secondary in report.secondary]
    rows += [("  ", evidence, "dim evidence") for evidence in report.evidence]
    for alert in report.alerts:
        rows.append(("Alert: ", alert.text, ""))
        links = [("rule", alert.source), ("in Alertmanager", alert.alertmanager)]
        links.append(("silence it in Alertmanager", alert.silence))
        rows += [(f"  {name}: ", url, "dim") for name, url in links if url]
    return rows


def _to_do(report: Report) -> list[Row]:
    offered = [a for a in report.actions if a.state is ProposalState.OFFERED]
    if offered:
        plan = " → ".join(s.partition(":")[0] for s in offered[0].steps)
        rows = [("Do: ", f"approve {plan or offered[0].action}", "")]
        return rows + ([("Alone: ", offered[0].remains, "")] if offered[0].remains else [])
    if report.configure:
        return [("To act: ", "configure " + "; ".join(report.configure), "")]
    if report.steps and report.latest is None:
        rows = [("Do (no action pitcrew can run fits):", "", "")]
        return rows + [(f"  {n}. ", step, "") for n, step in enumerate(report.steps, 1)]
    return []


def _tail(report: Report) -> list[Row]:
    """The card's lines below its offers: memory, what is not offered, the history."""
    rows: list[Row] = [("Memory: ", report.memory, "")] if report.memory else []
    rows += [("not offered: ", withheld, "dim") for withheld in report.withheld]
    return rows + [("· ", entry, "dim") for entry in report.history]


def _named(action: ReportAction) -> str:
    return " → ".join(s.partition(":")[0] for s in action.steps) or action.action


def _text(row: Row) -> Text:
    label, text, style = row
    if style == "dim evidence":
        return terminal_text(f"{label}{text}", style="dim", no_wrap=True, overflow="ellipsis")
    if not label.strip():
        return terminal_text(label + text, style=style)
    return terminal_text((label, "dim" if style == "dim" else "bold"), text)


def report_panel(report: Report, ref: str = "", cluster: str = "") -> Panel:
    """A Report as a rich panel: the console's card on a terminal, titled with the
    `cluster` whose pitcrew posted it when it has a name."""
    lines: list[Text | Table] = [_text(row) for row in _rows(report)]
    if report.diagnosis:
        lines += [terminal_text(""), terminal_text(report.diagnosis)]
    if report.actions:
        table = Table(show_header=True, header_style="bold", expand=True)
        for column in ("proposal", "action", "state"):
            table.add_column(column)
        table.add_column("preview", overflow="fold")
        for action in report.actions:
            row = (terminal_text(action.proposal_id), terminal_text(_named(action)))
            table.add_row(*row, terminal_text(str(action.state)), terminal_text(action.preview))
        lines.append(table)
    lines += [_text(row) for row in _tail(report)]
    # Text, never str: rich would read `[gpu-group]` in a title or preview as markup.
    title = terminal_text(f"{f'[{cluster}] ' if cluster else ''}{report.title} [{report.status}]")
    subtitle = terminal_text(f"card {ref}") if ref else None
    return Panel(
        Group(*lines), title=title, subtitle=subtitle, border_style=_BORDER[report.severity]
    )


def card_lines(report: Report, ref: str = "", cluster: str = "") -> list[str]:
    """A Report as whole lines of text, for a pipe or a log where no width is known:
    nothing is wrapped or cut."""
    named = f"[{cluster}] " if cluster else ""
    lines = [f"== {named}{report.title} [{report.status}]" + (f" (card {ref})" if ref else "")]
    lines += [f"{label}{' '.join(text.split())}" for label, text, _ in _rows(report)]
    if report.diagnosis:
        lines += ["", *report.diagnosis.splitlines()]
    for action in report.actions:
        lines.append(f"{action.state}: {action.proposal_id}  {_named(action)}")
        lines += [f"    {line}" for line in action.preview.splitlines()]
    lines += [f"{label}{' '.join(text.split())}" for label, text, _ in _tail(report)]
    return lines


def _latest(report: Report) -> list[Row]:
    """What happened last, first: the decision, each step's end, what to do now."""
    outcome = report.latest
    if outcome is None:
        return []
    rows: list[Row] = [("Last: ", f"{outcome.action} · {outcome.said}", "")]
    if len(outcome.steps) > 1:
        for n, step in enumerate(outcome.steps, 1):
            detail = f": {step.detail}" if step.detail else ""
            rows.append((f"  {n}. ", f"{step.action} · {step.state}{detail}", ""))
    if outcome.next:
        rows.append(("Next: ", outcome.next, ""))
    return rows


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
        other output (the demo's progress spinner); each names `cluster`, when named. With
        no `width` on no terminal (a pipe, a pod's log) a card is whole lines
        (`card_lines`), never wrapped at 80."""
        self.cluster = cluster
        self._console = console or Console(
            file=stream, width=width, highlight=False, soft_wrap=False
        )
        self._plain = console is None and width is None and not self._console.is_terminal
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def post(self, channel: str, report: Report) -> str:
        with self._lock:
            ref = f"{channel}/{next(self._ids)}"
            self._card(report, ref)
        return ref

    def update(self, ref: str, report: Report) -> None:
        with self._lock:
            self._card(report, f"{ref} (updated)")

    def _card(self, report: Report, ref: str) -> None:
        if not self._plain:
            self._console.print(report_panel(report, ref, self.cluster))
            return
        for line in card_lines(report, ref, self.cluster):
            self._console.print(terminal_text(line), highlight=False, soft_wrap=True)

    def reply(self, ref: str, text: str, attempt: Attempt | None = None) -> None:
        """A printed line cannot be lost on its way, so `attempt` changes nothing here."""
        with self._lock:
            self._line(f"  ↳ [{ref}] {text}")

    def attach(self, ref: str, path: str, text: str, attempt: Attempt | None = None) -> None:
        """The file's comment (a chart's with its sparkline) and where the file is."""
        with self._lock:
            self._line(f"  ↳ [{ref}] {text}\n    {_file_kind(path)}: {path}")

    def _line(self, text: str) -> None:
        if self._plain:
            self._console.print(terminal_text(text), highlight=False, soft_wrap=True)
        else:
            self._console.print(terminal_text(text, overflow="fold"))

    def healthy(self) -> bool:
        return True
