"""Incident cards and replies as Slack Block Kit, always inside Slack's limits.

Why this exists: a card is built from text pitcrew does not control (log lines,
pod and job names, error messages), and Slack rejects a whole message when one
field is too long or the message is too big, or renders `<!channel>` and
`<http://evil|click>` if they get through. So every untrusted string is made
safe here (controls and direction marks removed, `&<>` escaped, backticks
neutralised so no code fence can be closed from inside), cut to its field's
limit, and the finished message goes through `fit`, a validator that trims
whatever still exceeds a limit (field by field, then whole blocks by priority,
never the buttons) so the result is valid Block Kit whatever the input.

The layout of a card lives in the Jinja2 template `templates/card.json.j2`
(rendered by the project's sandboxed environment); this module prepares the
values it shows and decodes and fits what it produces. Pure JSON building: no
Slack SDK, no I/O.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from jinja2 import Template

from bot.adapters.slack.limits import (
    BUTTON_TEXT,
    BUTTON_VALUE,
    CONFIRM_TEXT,
    CONFIRM_TITLE,
    CONTEXT_TEXT,
    FALLBACK_TEXT,
    HEADER_TEXT,
    SECTION_TEXT,
    TEXT_BUDGET,
    Block,
    cut,
    fit,
)
from bot.core.model import ProposalState, Report, ReportAction, ReportOutcome, Severity
from bot.core.playbooks.templating import compile_template
from bot.core.text import ELLIPSIS, escape_mrkdwn, strip_controls

# -- what a card shows at most ---------------------------------------------------------

MAX_ACTIONS = 10
MAX_SECONDARY = 10
MAX_EVIDENCE_LINES = 12
EVIDENCE_LINE = 300
CARD_EVIDENCE_LINE = 160  # a decisive line on the card; the thread has it whole
MAX_HISTORY_LINES = 10
MAX_ALERTS = 8
MAX_URL = 2000
HISTORY_LINE = 200
PREVIEW_TEXT = 1200

APPROVE_ACTION = "pitcrew.approve"
REJECT_ACTION = "pitcrew.reject"
SILENCE_ACTION = "pitcrew.silence"
# The Silence button mutes the card's workload (a `workload` silence matcher, as
# bot.core.incidents.notify labels it: namespace/kind/name); the value is checked again on click.
SILENCE_VALUE = re.compile(r"workload:[a-z0-9][-a-z0-9.]*/[a-z]+/[a-z0-9][-a-z0-9.]*")

_EMOJI = {
    Severity.CRITICAL: ":rotating_light:",
    Severity.ERROR: ":red_circle:",
    Severity.WARNING: ":large_orange_circle:",
    Severity.INFO: ":large_blue_circle:",
}
_STATE = {
    ProposalState.OFFERED: ":hourglass_flowing_sand: waiting for approval",
    ProposalState.APPROVED: ":white_check_mark: approved",
    ProposalState.RUNNING: ":gear: running",
    ProposalState.SUCCEEDED: ":white_check_mark: applied and verified",
    ProposalState.FAILED: ":x: failed",
    ProposalState.REJECTED: ":no_entry_sign: rejected",
    ProposalState.EXPIRED: ":clock3: expired",
}
_WHERE = {
    "cluster": "Cluster",
    "namespace": "Namespace",
    "workload": "Workload",
    "ray_job_id": "Ray job id",
}
_FENCE = "```"
_TICK = "\ue000"  # a kept backtick while the rest is made safe (private use: never shown)


# -- safe text -------------------------------------------------------------------------


def clean(text: str) -> str:
    """Untrusted text without controls, direction marks, lone surrogates or backticks
    (each backtick becomes a look-alike, so untrusted text can neither open nor close
    a code span or fence)."""
    return strip_controls(text).replace("`", "\u02cb")


def prose(text: str, limit: int = SECTION_TEXT) -> str:
    """Text a playbook wrote (its explanation, remediation steps) as safe mrkdwn: its
    inline `code` spans stay code where a line's backticks pair up; a fence never
    survives, and an unpaired backtick becomes a look-alike."""
    lines = []
    for line in text.replace(_TICK, "").split("\n"):
        if _FENCE in line or line.count("`") % 2:
            line = line.replace("`", "\u02cb")
        lines.append(line.replace("`", _TICK))
    return md("\n".join(lines), limit).replace(_TICK, "`")


def md(text: str, limit: int = SECTION_TEXT) -> str:
    """Untrusted text as safe mrkdwn of at most `limit` characters."""
    longest = 4 * limit + 16  # more raw text than this can never show (a 100 KB log line)
    raw = text[:longest]
    safe = escape_mrkdwn(clean(raw), limit=5 * len(raw) + 1)
    if len(text) > longest:
        safe += ELLIPSIS
    return cut(safe, limit)


def plain(text: str, limit: int) -> str:
    """Untrusted text for a plain_text object: single line, escaped, at most `limit`."""
    return md(" ".join(text.split()), limit) or "-"


def code(lines: Iterable[str], limit: int, line_limit: int = EVIDENCE_LINE) -> str:
    """Untrusted lines in a code block of at most `limit` characters, fence included."""
    room = limit - 2 * len(_FENCE) - 2 - 24  # 24: room for the "… N more" line
    pending = list(lines)
    kept: list[str] = []
    used = 0
    for index, line in enumerate(pending):
        safe = md(line, min(line_limit, room)) or " "
        if used + len(safe) + 1 > room:
            kept.append(f"… {len(pending) - index} more")
            break
        kept.append(safe)
        used += len(safe) + 1
    if not kept:
        return ""
    return f"{_FENCE}\n" + "\n".join(kept) + f"\n{_FENCE}"


# -- the card --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Message:
    """What chat.postMessage / chat.update get: mrkdwn fallback text and blocks."""

    text: str
    blocks: list[Block]


@dataclass(frozen=True, slots=True)
class CardOptions:
    """How the card's Silence button is worded (the duration comes from config), and the
    cluster whose pitcrew posts it (on its header and in every button's value)."""

    silence_for: str = "4 h"
    show_silence: bool = True
    cluster: str = ""


def addressed(value: str, cluster: str) -> str:
    """A button's value naming the cluster whose pitcrew answers it: `VALUE@CLUSTER`."""
    return f"{value}@{cluster}" if cluster else value


def address_of(value: str) -> tuple[str, str]:
    """(the value, the cluster it names) of a button; "" for a button of a card posted
    before clusters were named, which is this pitcrew's. Neither a proposal id nor a
    Silence value holds an `@`; a cluster's name may."""
    head, _, cluster = value.partition("@")
    return head, cluster


def cluster_prefix(cluster: str) -> str:
    """What names the cluster in front of a card's title or an answer ("" with none)."""
    return f"[{cluster}] " if cluster else ""


def silence_value(where: Mapping[str, str]) -> str | None:
    """The Silence button's value for a card: its workload, or None without one."""
    kind, _, name = where.get("workload", "").partition(" ")
    namespace = where.get("namespace", "")
    value = f"workload:{namespace}/{kind.lower()}/{name}"
    return value if namespace and name and SILENCE_VALUE.fullmatch(value) else None


def resolved(report: Report) -> bool:
    return report.status.startswith("resolved")


def revision(report: Report) -> str:
    """A short digest of the report: block ids change whenever the card does."""
    return hashlib.sha1(repr(report).encode()).hexdigest()[:8]


def fallback_text(report: Report, cluster: str = "") -> str:
    """The top-level text: notifications, screen readers, and clients without blocks."""
    where = cluster_prefix(cluster)
    severity = report.severity.value.upper()
    return md(f"[{severity}] {where}{report.title} ({report.status})", FALLBACK_TEXT)


def _confirm_text(action: ReportAction) -> str:
    """What the approver agrees to: the action's preview and impact, or a plan's first
    step and the steps that follow it (whose point is the first step's impact)."""
    what = action.preview or action.action
    if action.steps:
        then = "; ".join(step.split(":", 1)[0] for step in action.steps[1:])
        tail = plain(f"Then {then}, in order; a step that fails stops the plan.", 200)
        return f"{plain(what + '.', CONFIRM_TEXT - len(tail) - 1)} {tail}"
    impact = f" {action.impact}" if action.impact else ""
    return plain(f"{what}.{impact}", CONFIRM_TEXT)


def _confirm_titles(action: ReportAction) -> tuple[str, str]:
    if action.steps:
        return f"Approve the plan of {len(action.steps)} steps?", "Reject the plan?"
    name = plain(action.action, 60)
    return f"Approve {name}?", f"Reject {name}?"


def _named(action: ReportAction) -> str:
    """An action by name; a plan by its steps' actions in order."""
    if not action.steps:
        return action.action
    return "plan: " + " → ".join(step.split(":", 1)[0] for step in action.steps)


def _action_view(index: int, action: ReportAction, primary: bool, cluster: str) -> dict[str, Any]:
    """An offer's section and buttons. Offers are not numbered: only a plan's steps
    are, so one list of numbers is on the card."""
    state = _STATE.get(action.state, str(action.state))
    lines = [f"*{md(action.action, 200)}* · {state}"]
    if action.steps:  # a plan: its steps, run in order with one Approve
        lines[0] = f"*plan of {len(action.steps)} steps, one Approve* · {state}"
        lines += [f"{n}. {md(step, 300)}" for n, step in enumerate(action.steps, 1)]
    if action.impact:
        lines.append(f"_{md(action.impact, 500)}_")
    if action.remains:
        lines.append(f"_Alone: {md(action.remains, 600)}_")
    if action.preview:
        lines.append(code(action.preview.splitlines() or [action.preview], PREVIEW_TEXT, 400))
    approve_title, reject_title = _confirm_titles(action)
    return {
        "index": index,
        "summary": cut("\n".join(lines), SECTION_TEXT),
        "offered": action.state is ProposalState.OFFERED,
        "primary": primary,
        "value": addressed(action.proposal_id, cluster)[:BUTTON_VALUE] or "-",
        "approve_label": plain(f"Approve {_named(action)}", BUTTON_TEXT),
        "approve_title": plain(approve_title, CONFIRM_TITLE),
        "approve_text": _confirm_text(action),
        "reject_title": plain(reject_title, CONFIRM_TITLE),
        "reject_text": plain(
            f"{'None of its steps' if action.steps else action.action} will run for this "
            "incident; it cannot be approved later.",
            CONFIRM_TEXT,
        ),
    }


def _bullets(items: Sequence[str], limit: int, line_limit: int) -> str:
    shown = [f"• {md(item, line_limit)}" for item in items[:limit]]
    if len(items) > limit:
        shown.append(f"… {len(items) - limit} more")
    return "\n".join(shown)


def _latest(outcome: ReportOutcome) -> list[str]:
    """What happened last: the decision, each step's end (numbered in plan order), and
    what to do now."""
    lines = [f"*Last:* {md(outcome.action, 200)} · {md(outcome.said, 600)}"]
    if len(outcome.steps) > 1:
        lines += [
            f"{n}. *{md(step.action, 100)}* · {md(step.state, 60)}"
            + (f": {md(step.detail, 300)}" if step.detail else "")
            for n, step in enumerate(outcome.steps, 1)
        ]
    elif outcome.steps and outcome.steps[0].detail:
        lines.append(md(outcome.steps[0].detail, 400))
    if outcome.next:
        lines.append(f"_Next:_ {md(outcome.next, 600)}")
    return lines


def _decision(report: Report, first: ReportAction | None) -> str:
    """The card's first section: what happened last, what broke, what to do, how sure."""
    lines = _latest(report.latest) if report.latest is not None else []
    lines.append(
        f"*What broke:* {prose(report.cause or report.primary or 'no failure found', 700)}"
    )
    if first is not None:
        preview = first.preview.splitlines()[0] if first.preview else ""
        what = f"approve *{md(first.action, 100)}*" + (f": {md(preview, 400)}" if preview else "")
        if first.steps:  # a plan: its steps in order, one Approve
            what = "approve the plan, one step after the other:" + "".join(
                f"\n{n}. *{md(action, 100)}*:{md(rest, 300)}"
                for n, (action, _, rest) in enumerate((s.partition(":") for s in first.steps), 1)
            )
        lines.append(f"*Do:* {what}")
        if first.impact:
            lines.append(f"_{md(first.impact, 300)}_")
        if first.remains:
            lines.append(f"_Alone: {md(first.remains, 600)}_")
    elif report.configure:
        lines.append(
            "*To act:* nothing on this card can be approved here; configure "
            + "; ".join(md(setting, 300) for setting in report.configure)
        )
    if first is None and not report.configure and report.steps and report.latest is None:
        lines.append("*Do* (no action pitcrew can run fits):")
        lines.extend(f"{n}. {prose(step, 400)}" for n, step in enumerate(report.steps, 1))
    if report.runbook and first is None:
        lines.append(f"*Runbook:* {link(report.runbook[0])}")
    if report.sureness:
        lines.append(f"*How sure:* {md(report.sureness, 400)}")
    return cut("\n".join(lines), SECTION_TEXT)


def link(url: str, label: str = "") -> str:
    """A URL (a playbook's runbook, an alert's rule) as a Slack link, with `label` (safe
    mrkdwn) as its text; as text when it is not plainly http(s): printable ASCII but
    `<`, `>` and `|` (no control, escape sequence or direction override in a link)."""
    if re.fullmatch(r"https?://[!-;=?-{}~]+", url) and len(url) < MAX_URL:
        return f"<{url.replace('&', '&amp;')}{'|' + label if label else ''}>"
    return md(url, 500)


def _alerts(report: Report) -> str:
    """The alerts among the evidence, each with its rule, its place in Alertmanager and
    a prefilled silence there; then how to silence it in both worlds."""
    if not report.alerts:
        return ""
    lines = ["*Alerts:*"]
    for alert in report.alerts[:MAX_ALERTS]:
        links = [
            link(url, label)
            for url, label in (
                (alert.source, "rule"),
                (alert.alertmanager, "Alertmanager"),
                (alert.silence, "silence it in Alertmanager"),
            )
            if url
        ]
        lines.append(f"• {md(alert.text, 300)}" + "".join(f" · {x}" for x in links))
    if any(a.silence for a in report.alerts):
        lines.append(
            "_pitcrew's Silence mutes this workload's cards; a silence in Alertmanager "
            "mutes the alert itself, wherever Alertmanager sends it._"
        )
    return cut("\n".join(lines), SECTION_TEXT)


def _where_line(report: Report, cluster: str) -> str:
    """Where the incident is; its cluster only when the header does not name it already."""
    shown = [
        f"{_WHERE.get(key, md(key, 40))} {md(value, 300)}"
        for key, value in report.where.items()
        if value and key != "workload" and not (key == "cluster" and value == cluster)
    ]
    workload = report.where.get("workload", "")
    return " · ".join(([md(workload, 300)] if workload else []) + shown)


def card_view(report: Report, options: CardOptions = CardOptions()) -> dict[str, Any]:
    """The values the card template shows, every one of them safe and within limits."""
    emoji = _EMOJI.get(report.severity, ":red_circle:")
    offered = [a for a in report.actions if a.state is ProposalState.OFFERED]
    lead = offered[0] if offered else None
    actions = [
        _action_view(i + 1, action, action is lead, options.cluster)
        for i, action in enumerate(offered[:MAX_ACTIONS])
    ]
    lead_view = next((a for a in actions if a["primary"]), None)
    symptoms = ""
    if report.secondary:
        symptoms = "*Also seen:*\n" + _bullets(report.secondary, MAX_SECONDARY, 160)
    if report.memory:
        symptoms += ("\n" if symptoms else "") + f"*Memory:* {md(report.memory, 500)}"
    evidence = ""
    if report.evidence:
        more = len(report.details) - len(report.evidence)
        note = f" ({len(report.details)} lines in the thread)" if more > 0 else ""
        evidence = f"*Evidence*{note}\n" + code(
            report.evidence[:MAX_EVIDENCE_LINES], SECTION_TEXT - 80, CARD_EVIDENCE_LINE
        )
    withheld = ""
    if report.withheld:
        withheld = "*Not offered:*\n" + _bullets(report.withheld, 8, 200)
    history = ""
    if report.history:
        recent = report.history[-MAX_HISTORY_LINES:]
        history = "\n".join(md(line, HISTORY_LINE) for line in recent)
    status = f"*Status:* {md(report.status, 500)}"
    if where := _where_line(report, options.cluster):
        status += f" · {where}"
    return {
        "rev": revision(report),
        "header": _header(emoji, report, options.cluster),
        "status": cut(status, CONTEXT_TEXT),
        "decision": _decision(report, lead),
        "lead": lead_view,
        "symptoms": cut(symptoms, SECTION_TEXT),
        "alerts": _alerts(report),
        "evidence": cut(evidence, SECTION_TEXT),
        "actions": [a for a in actions if a is not lead_view],
        "withheld": cut(withheld, CONTEXT_TEXT),
        "history": cut(history, CONTEXT_TEXT),
        "silence": _silence_view(report, options),
        "approve_id": APPROVE_ACTION,
        "reject_id": REJECT_ACTION,
        "silence_id": SILENCE_ACTION,
    }


def _header(emoji: str, report: Report, cluster: str) -> str:
    """The card's header: severity, the cluster whose pitcrew posted it, the title."""
    where = plain(cluster_prefix(cluster), 60) + " " if cluster else ""
    return f"{emoji} {where}{plain(report.title, HEADER_TEXT - len(emoji) - len(where) - 1)}"


def _silence_view(report: Report, options: CardOptions) -> dict[str, str] | None:
    """The card's Silence button, or None where the card offers none."""
    muted = silence_value(report.where)
    if not options.show_silence or muted is None or resolved(report):
        return None
    workload = muted.removeprefix("workload:")
    return {
        "label": plain(f"Silence {options.silence_for}", BUTTON_TEXT),
        "value": addressed(muted, options.cluster),
        "title": plain("Silence this workload?", CONFIRM_TITLE),
        "text": plain(
            f"No new cards or reminders about {workload} for {options.silence_for}. "
            "This card stays and its approvals still work; /pitcrew unsilence undoes it.",
            CONFIRM_TEXT,
        ),
    }


@lru_cache(maxsize=8)
def _template(name: str) -> Template:
    source = resources.files("bot.adapters.slack").joinpath("templates", name).read_text("utf-8")
    return compile_template(source)


def decode_stream(text: str) -> list[Block]:
    """The JSON objects of a template's output, one after the other."""
    decoder = json.JSONDecoder()
    blocks: list[Block] = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position >= len(text):
            return blocks
        value, position = decoder.raw_decode(text, position)
        if not isinstance(value, dict):
            raise ValueError(f"a block must be a JSON object, not {type(value).__name__}")
        blocks.append(value)


def card(report: Report, options: CardOptions = CardOptions()) -> Message:
    """The incident card for `report`: fallback text and blocks within every limit."""
    rendered = _template("card.json.j2").render(**card_view(report, options))
    return Message(fallback_text(report, options.cluster), fit(decode_stream(rendered)))


def minimal_card(report: Report, cluster: str = "") -> Message:
    """A bare card (header and status), for when Slack refused the full one."""
    emoji = _EMOJI.get(report.severity, ":red_circle:")
    blocks: list[Block] = [
        {"type": "header", "text": {"type": "plain_text", "text": _header(emoji, report, cluster)}},
        {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": f"*Status:* {md(report.status, 500)}\n"
                "_The full card could not be shown; see the thread or `/pitcrew incidents`._",
                "verbatim": True,
            },
        },
    ]
    return Message(fallback_text(report, cluster), fit(blocks))


def text_message(text: str, *, title: str = "") -> Message:
    """A reply (thread, ephemeral) from untrusted multi-line text, escaped."""
    return mrkdwn_message(prose(text, TEXT_BUDGET - 500), title=md(title, 200))


def mrkdwn_message(safe: str, *, title: str = "") -> Message:
    """A reply from text that is already safe mrkdwn (every untrusted part escaped, as
    `bot.adapters.slack.commands` builds it): sections of at most 3,000 characters each,
    the whole within the budget."""
    safe = cut(safe, TEXT_BUDGET - 500) or "-"
    blocks: list[Block] = []
    if title:
        blocks.append(_section(f"*{cut(title, 200)}*"))
    chunk: list[str] = []
    size = 0
    for line in safe.split("\n"):
        line = cut(line, SECTION_TEXT - 10)
        if chunk and size + len(line) + 1 > SECTION_TEXT - 10:
            blocks.append(_section("\n".join(chunk)))
            chunk, size = [], 0
        chunk.append(line or " ")
        size += len(line) + 1
    if chunk:
        blocks.append(_section("\n".join(chunk)))
    summary = cut((f"{cut(title, 200)}: " if title else "") + safe, FALLBACK_TEXT)
    return Message(summary, fit(blocks))


def _section(text: str) -> Block:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text, "verbatim": True}}
