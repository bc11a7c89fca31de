"""Rendering a Diagnosis for people: a panel on a terminal (rich), and plain whole lines
in a pipe or a pod's log, where no width is known (no cut mid-word, no id broken
across lines). Every text goes through `bot.core.text.for_terminal` (`terminal_text`), and
rich is handed text, never markup: a log's `[bold]` or escape sequence stays inert."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.core.model import ActionOffer, Diagnosis, RankedFinding, Role, Severity
from bot.core.text import for_terminal

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

_STYLE = {
    Severity.CRITICAL: "bold red",
    Severity.ERROR: "red",
    Severity.WARNING: "yellow",
    Severity.INFO: "cyan",
}


def terminal_text(*parts: str | tuple[str, str], style: str = "", **options: Any) -> Text:
    """Rich text for a terminal: each part (or `(part, style)`) through `for_terminal`,
    never read as markup."""
    from rich.text import Text

    safe = [(for_terminal(p[0]), p[1]) if isinstance(p, tuple) else for_terminal(p) for p in parts]
    return Text.assemble(*safe, style=style, **options)


def print_diagnosis(diagnosis: Diagnosis, console: Console, title: str = "") -> None:
    from rich.console import Group
    from rich.panel import Panel

    if not console.is_terminal:
        for line in plain_lines(diagnosis):
            console.print(terminal_text(line), highlight=False, soft_wrap=True)
        return
    primary = diagnosis.primary
    heading = terminal_text(title or ("pitcrew diagnosis" if primary else "pitcrew"))
    if primary is None:
        verdict, *lines = diagnosis.text.split("\n") if diagnosis.unknown else [diagnosis.text]
        body = Group(
            terminal_text(verdict),
            *(terminal_text(f"  {line}", no_wrap=True, overflow="ellipsis") for line in lines),
        )
        border = "yellow" if diagnosis.unknown else "green"
        console.print(Panel(body, title=heading, border_style=border))
        return
    parts: list[Text | Table] = []
    for ranked in diagnosis.findings:
        finding = ranked.finding
        head = terminal_text(
            (f"{_label(ranked)}: ", "bold" if ranked.role is Role.PRIMARY else "dim"),
            (str(finding.category), _STYLE[finding.severity]),
            f"  {finding.title}",
            (f"  x{finding.count}" if finding.count > 1 else "", "dim"),
        )
        parts.append(head)
        if ranked.why:
            parts.append(terminal_text(f"    why: {ranked.why}", style="italic"))
        for evidence in finding.evidence:
            where = f"{evidence.origin}:{evidence.line}" if evidence.line else evidence.origin
            parts.append(
                terminal_text(
                    f"    {where}  {evidence.text}", style="dim", no_wrap=True, overflow="ellipsis"
                )
            )
    parts.append(terminal_text(""))
    parts.append(terminal_text(diagnosis.text))
    parts.extend(
        terminal_text(line, style="bold" if line.endswith(":") else "")
        for line in _what_to_do(diagnosis)
    )
    if diagnosis.actions:
        parts.append(terminal_text(""))
        parts.append(_offers_table(diagnosis))
    border = _STYLE[primary.severity]
    console.print(Panel(Group(*parts), title=heading, border_style=border))


def _offers_table(diagnosis: Diagnosis) -> Table:
    """The offers, a plan on one row (its steps in order), then the withheld actions."""
    from rich.table import Table

    from bot.core.actions.order import grouped

    table = Table(show_header=True, header_style="bold", expand=True, show_lines=False)
    table.add_column("action")
    table.add_column("")
    table.add_column("why / preview", overflow="fold")
    for group in grouped(diagnosis.actions):
        offer = group[0]
        status = (
            terminal_text("offered", style="green")
            if offer.offered
            else terminal_text("withheld", style="dim")
        )
        if len(group) > 1:
            status = terminal_text("offered as one plan", style="green")
        details = []
        for step in group:
            detail = step.preview or step.reason
            if step.offered and step.preview:
                detail = f"{step.reason}\n{detail}"
            details.append(detail)
        table.add_row(
            terminal_text("\nthen ".join(o.action for o in group)),
            status,
            terminal_text("\n".join(details)),
        )
    return table


def plain_lines(diagnosis: Diagnosis) -> list[str]:
    """The diagnosis as whole lines of text, for a pipe or a log (each line through
    `for_terminal`: a pipe often ends on a terminal)."""
    return [for_terminal(line) for line in _plain_lines(diagnosis)]


def _plain_lines(diagnosis: Diagnosis) -> list[str]:
    lines: list[str] = []
    for ranked in diagnosis.findings:
        finding = ranked.finding
        count = f"  x{finding.count}" if finding.count > 1 else ""
        lines.append(f"{_label(ranked)}: {finding.category}  {finding.title}{count}")
        if ranked.why:
            lines.append(f"    why: {ranked.why}")
        for evidence in finding.evidence:
            where = f"{evidence.origin}:{evidence.line}" if evidence.line else evidence.origin
            lines.append(f"    {where}  {' '.join(evidence.text.split())}")
    if lines:
        lines.append("")
    lines.append(diagnosis.text)
    lines.extend(_what_to_do(diagnosis))
    if diagnosis.actions:
        from bot.core.actions.order import grouped  # the actions' modules: only for offers

        lines.append("")
        for group in grouped(diagnosis.actions):
            lines.extend(_offer_lines(group))
    return lines


def _offer_lines(group: tuple[ActionOffer, ...]) -> list[str]:
    """An offer, or a plan's steps in order (one Approve runs them all), as lines."""
    if len(group) == 1:
        (offer,) = group
        state = "offered" if offer.offered else "withheld"
        lines = [f"{state}: {offer.action}: {offer.reason}"]
        if offer.offered and offer.preview:
            lines.extend(f"    {line}" for line in offer.preview.splitlines())
        return lines
    lines = ["offered as one plan, its steps run in order with one Approve:"]
    for n, step in enumerate(group, 1):
        lines.append(f"  {n}. {step.action}: {step.reason}")
        lines.extend(f"       {line}" for line in step.preview.splitlines())
    return lines


def _what_to_do(diagnosis: Diagnosis) -> list[str]:
    """The root cause's playbook's remediation steps and runbook links."""
    if not diagnosis.remediation and not diagnosis.runbook:
        return []
    shown = ["", "What to do:"]
    shown += [f"  {n}. {step}" for n, step in enumerate(diagnosis.remediation, 1)]
    shown += [f"  runbook: {url}" for url in diagnosis.runbook]
    return shown


def _label(ranked: RankedFinding) -> str:
    """ROOT CAUSE, LIKELY ROOT CAUSE (weak evidence only), symptom of X, or also seen."""
    if ranked.role is Role.PRIMARY:
        return "LIKELY ROOT CAUSE" if ranked.finding.weak else "ROOT CAUSE"
    if ranked.symptom_of is not None:
        return f"symptom of {ranked.symptom_of}"
    return "also seen"
