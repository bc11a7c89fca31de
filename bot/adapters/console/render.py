"""Rendering a Diagnosis for people: a panel on a terminal (rich), and plain whole lines
in a pipe or a pod's log, where no width is known (no cut mid-word, no id broken
across lines)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.core.actions.order import grouped
from bot.core.model import ActionOffer, Diagnosis, RankedFinding, Role, Severity

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

_STYLE = {
    Severity.CRITICAL: "bold red",
    Severity.ERROR: "red",
    Severity.WARNING: "yellow",
    Severity.INFO: "cyan",
}


def print_diagnosis(diagnosis: Diagnosis, console: Console, title: str = "") -> None:
    from rich.console import Group
    from rich.panel import Panel
    from rich.text import Text

    if not console.is_terminal:
        for line in plain_lines(diagnosis):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        return
    primary = diagnosis.primary
    if primary is None:
        verdict, *lines = diagnosis.text.split("\n") if diagnosis.unknown else [diagnosis.text]
        body = Group(
            Text(verdict),
            *(Text(f"  {line}", no_wrap=True, overflow="ellipsis") for line in lines),
        )
        border = "yellow" if diagnosis.unknown else "green"
        console.print(Panel(body, title=title or "pitcrew", border_style=border))
        return
    parts: list[Text | Table] = []
    for ranked in diagnosis.findings:
        finding = ranked.finding
        head = Text.assemble(
            (f"{_label(ranked)}: ", "bold" if ranked.role is Role.PRIMARY else "dim"),
            (str(finding.category), _STYLE[finding.severity]),
            f"  {finding.title}",
            (f"  x{finding.count}" if finding.count > 1 else "", "dim"),
        )
        parts.append(head)
        if ranked.why:
            parts.append(Text(f"    why: {ranked.why}", style="italic"))
        for evidence in finding.evidence:
            where = f"{evidence.origin}:{evidence.line}" if evidence.line else evidence.origin
            parts.append(
                Text(
                    f"    {where}  {evidence.text}", style="dim", no_wrap=True, overflow="ellipsis"
                )
            )
    parts.append(Text(""))
    parts.append(Text(diagnosis.text))
    parts.extend(
        Text(line, style="bold" if line.endswith(":") else "") for line in _what_to_do(diagnosis)
    )
    if diagnosis.actions:
        parts.append(Text(""))
        parts.append(_offers_table(diagnosis))
    border = _STYLE[primary.severity]
    console.print(Panel(Group(*parts), title=title or "pitcrew diagnosis", border_style=border))


def _offers_table(diagnosis: Diagnosis) -> Table:
    """The offers, a plan on one row (its steps in order), then the withheld actions."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(show_header=True, header_style="bold", expand=True, show_lines=False)
    table.add_column("action")
    table.add_column("")
    table.add_column("why / preview", overflow="fold")
    for group in grouped(diagnosis.actions):
        offer = group[0]
        status = "[green]offered[/]" if offer.offered else "[dim]withheld[/]"
        if len(group) > 1:
            status = "[green]offered as one plan[/]"
        details = []
        for step in group:
            detail = escape(step.preview or step.reason)
            if step.offered and step.preview:
                detail = f"{escape(step.reason)}\n{detail}"
            details.append(detail)
        table.add_row("\nthen ".join(o.action for o in group), status, "\n".join(details))
    return table


def plain_lines(diagnosis: Diagnosis) -> list[str]:
    """The diagnosis as whole lines of text, for a pipe or a log."""
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
