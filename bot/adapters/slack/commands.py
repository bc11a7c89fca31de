"""`/pitcrew` in words: the slash command parsed into values, and the service's answers
explained back as text.

Why this exists: whatever a person types after `/pitcrew` is untrusted and
often wrong, and a wrong command must get a short usage message, never a
traceback or a half-done action. Parsing is strict (names, ids and durations
have to look like what they claim to be) and pure, so it is tested without
Slack. The explanations are Slack mrkdwn whose every interpolated value is
escaped with `blocks.md` (incident titles come from logs, reasons from people).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from bot.adapters.slack.blocks import md
from bot.core.diagnosis.unmatched import UnmatchedShape
from bot.core.durations import format_duration, parse_duration
from bot.core.incidents.reports import build_report
from bot.core.model import Incident, Proposal, ProposalState
from bot.daemon.ports import History, IncidentView, Status

COMMAND = "/pitcrew"
MAX_SILENCE = timedelta(days=30)
MAX_HISTORY = 50
DEFAULT_HISTORY = 10
MAX_LISTED = 25
MAX_REASON = 300

_K8S_NAME = r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?"
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_RAY_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_OBJECT = re.compile(
    rf"(?P<ns>{_NAMESPACE.pattern})/(?P<kind>pod|rayjob|raycluster)/(?P<name>{_K8S_NAME})"
)
_CLUSTER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")  # a configured Ray cluster
_CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,99}")  # a pitcrew's cluster
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")

_TARGETS = "[cluster/]ray-job-id | ns/pod/NAME | ns/rayjob/NAME | ns/raycluster/NAME"

USAGE = f"""Usage (add `--cluster NAME` where several clusters' pitcrews answer):
`{COMMAND} help` — this message
`{COMMAND} status` — open incidents, pending approvals, outbox
`{COMMAND} incidents [namespace]` — open incidents
`{COMMAND} diagnose &lt;{_TARGETS}&gt;`
`{COMMAND} silence &lt;playbook | incident-id&gt; &lt;duration, e.g. 2h&gt; [reason]`
`{COMMAND} unsilence &lt;silence-id&gt;`
`{COMMAND} history [n]` — recent incidents and actions
`{COMMAND} unmatched [n]` — failures no playbook knows, by shape
`{COMMAND} bundle &lt;incident-id&gt;` — upload an incident's evidence bundles (one tar.gz)"""


# -- commands ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Help:
    pass


@dataclass(frozen=True, slots=True)
class StatusCommand:
    pass


@dataclass(frozen=True, slots=True)
class Incidents:
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class DiagnoseTarget:
    """What `/pitcrew diagnose` names: a Ray job (its submission or job id, and the
    configured Ray cluster to look on, or "" for each of them), a pod, a RayJob or a
    RayCluster."""

    kind: Literal["ray_job", "pod", "rayjob", "raycluster"]
    name: str
    namespace: str = ""
    cluster: str = ""

    def __str__(self) -> str:
        if self.kind == "ray_job":
            return f"{self.cluster}/{self.name}" if self.cluster else self.name
        return f"{self.namespace}/{self.kind}/{self.name}"


@dataclass(frozen=True, slots=True)
class Diagnose:
    target: DiagnoseTarget


@dataclass(frozen=True, slots=True)
class SilenceCommand:
    """`target` is an incident id (`inc-…`) or a playbook id; `matchers` says which."""

    target: str
    duration: timedelta
    reason: str = ""

    @property
    def matchers(self) -> dict[str, str]:
        key = "incident" if self.target.startswith("inc-") else "playbook"
        return {key: self.target}


@dataclass(frozen=True, slots=True)
class Unsilence:
    silence_id: str


@dataclass(frozen=True, slots=True)
class HistoryCommand:
    n: int = DEFAULT_HISTORY


@dataclass(frozen=True, slots=True)
class UnmatchedCommand:
    n: int = DEFAULT_HISTORY


@dataclass(frozen=True, slots=True)
class BundleCommand:
    incident_id: str


@dataclass(frozen=True, slots=True)
class Usage:
    """Input that is not a command; `problem` says what was wrong."""

    problem: str

    @property
    def text(self) -> str:
        """Safe mrkdwn: the problem (which may quote the input, escaped) and the usage."""
        return f"{self.problem}\n{USAGE}" if self.problem else USAGE


Command = (
    Help
    | StatusCommand
    | Incidents
    | Diagnose
    | SilenceCommand
    | Unsilence
    | HistoryCommand
    | UnmatchedCommand
    | BundleCommand
    | Usage
)


def parse_target(text: str) -> DiagnoseTarget | None:
    found = _OBJECT.fullmatch(text)
    if found:
        kinds: dict[str, Literal["pod", "rayjob", "raycluster"]] = {
            "pod": "pod",
            "rayjob": "rayjob",
            "raycluster": "raycluster",
        }
        return DiagnoseTarget(kinds[found["kind"]], found["name"], found["ns"])
    cluster, slash, job = text.rpartition("/")
    if _RAY_JOB_ID.fullmatch(job) and (not slash or _CLUSTER.fullmatch(cluster)):
        return DiagnoseTarget("ray_job", job, cluster=cluster)
    return None


def _duration(text: str) -> timedelta | None:
    try:
        value = parse_duration(text)
    except ValueError:
        return None
    return value if timedelta(0) < value <= MAX_SILENCE else None


def _quote(word: str) -> str:
    """A piece of the user's input, escaped, short, in a code span."""
    return f"`{md(word, 40)}`"


def parse_addressed(text: str) -> tuple[str, Command]:
    """The cluster the command names with `--cluster NAME` ("" when it names none: the
    pitcrew that gets it answers) and the command itself."""
    words = text.split()
    for index, word in enumerate(words):
        name, equals, value = word.partition("=")
        if name != "--cluster":
            continue
        if not equals:
            value = words[index + 1] if index + 1 < len(words) else ""
        if not _CLUSTER_NAME.fullmatch(value):
            wrong = f", not {_quote(value)}" if value else ""
            return "", Usage(f"`--cluster` needs a cluster's name{wrong}.")
        rest = words[:index] + words[index + (1 if equals else 2) :]
        return value, parse(" ".join(rest))
    return "", parse(text)


def parse(text: str) -> Command:
    """The command in the text after `/pitcrew`, or `Usage` saying what is wrong."""
    words = text.split()
    if not words:
        return Usage("")
    name, args = words[0].lower(), words[1:]
    if name in ("help", "-h", "--help", "?"):
        return Help() if not args else Usage("`help` takes no arguments.")
    if name == "status":
        return StatusCommand() if not args else Usage("`status` takes no arguments.")
    if name == "incidents":
        if not args:
            return Incidents()
        if len(args) == 1 and _NAMESPACE.fullmatch(args[0]):
            return Incidents(args[0])
        return Usage("`incidents` takes at most one namespace name.")
    if name == "diagnose":
        target = parse_target(args[0]) if len(args) == 1 else None
        if target is None:
            return Usage(
                "`diagnose` takes one ray job id (or ray-cluster/ray-job-id), "
                "namespace/pod/NAME, namespace/rayjob/NAME or namespace/raycluster/NAME."
            )
        return Diagnose(target)
    if name == "silence":
        if len(args) < 2 or not _ID.fullmatch(args[0]):
            return Usage("`silence` needs a playbook or incident id and a duration.")
        duration = _duration(args[1])
        if duration is None:
            return Usage(f"{_quote(args[1])} is not a duration between 1s and 30d (e.g. 30m, 2h).")
        reason = " ".join(args[2:])
        if len(reason) > MAX_REASON:
            return Usage(f"The reason is longer than {MAX_REASON} characters.")
        return SilenceCommand(args[0], duration, reason)
    if name == "unsilence":
        if len(args) == 1 and _ID.fullmatch(args[0]):
            return Unsilence(args[0])
        return Usage("`unsilence` takes one silence id.")
    if name == "history":
        if not args:
            return HistoryCommand()
        if len(args) == 1 and args[0].isdigit() and 1 <= int(args[0]) <= MAX_HISTORY:
            return HistoryCommand(int(args[0]))
        return Usage(f"`history` takes a number from 1 to {MAX_HISTORY}.")
    if name == "unmatched":
        if not args:
            return UnmatchedCommand()
        if len(args) == 1 and args[0].isdigit() and 1 <= int(args[0]) <= MAX_HISTORY:
            return UnmatchedCommand(int(args[0]))
        return Usage(f"`unmatched` takes a number from 1 to {MAX_HISTORY}.")
    if name == "bundle":
        if len(args) == 1 and _ID.fullmatch(args[0]):
            return BundleCommand(args[0])
        return Usage("`bundle` takes one incident id.")
    return Usage(f"Unknown command {_quote(name)}.")


# -- explaining the service's values ---------------------------------------------------


TIME = "%Y-%m-%d %H:%M"


def incident_line(incident: Incident, proposals: Sequence[Proposal] = ()) -> str:
    report = build_report(incident, proposals)
    waiting = sum(p.state is ProposalState.OFFERED for p in proposals)
    pending = f", {waiting} awaiting approval" if waiting else ""
    return (
        f"• `{md(incident.id, 64)}` [{report.severity}] {md(report.title, 200)}"
        f" — {md(report.status, 200)}{pending}"
    )


def explain_incidents(views: Sequence[IncidentView], namespace: str | None) -> str:
    where = f" in {md(namespace, 64)}" if namespace else ""
    if not views:
        return f"No open incidents{where}."
    lines = [f"*{len(views)} open incident{'s' if len(views) != 1 else ''}{where}:*"]
    lines.extend(incident_line(v.incident, v.proposals) for v in views[:MAX_LISTED])
    if len(views) > MAX_LISTED:
        lines.append(f"… and {len(views) - MAX_LISTED} more")
    return "\n".join(lines)


def explain_bundles(incident_id: str, bundles: Sequence[tuple[str, int, datetime]]) -> str:
    """`/pitcrew bundle`: the incident's bundles, and how to write them out."""
    if not bundles:
        return f"No evidence bundle is kept for `{md(incident_id, 130)}`."
    lines = [f"*Evidence bundles of `{md(incident_id, 130)}`* (kept after the cluster is gone):"]
    for name, size, at in bundles:
        lines.append(
            f"• `{md(name, 120)}`: {size / 1024:.1f} KiB, captured {at:%Y-%m-%d %H:%M:%S} UTC"
        )
    lines.append(f"Write them out: `pitcrew bundle {md(incident_id, 130)}` (one tar.gz).")
    return "\n".join(lines)


def explain_unmatched(shapes: Sequence[UnmatchedShape]) -> str:
    """Failures no playbook matched, grouped by shape: the playbook to write next."""
    if not shapes:
        return "No unmatched failures: every failure seen matched a playbook."
    lines = ["*Failures no playbook knows (by shape):*"]
    for item in shapes[:MAX_LISTED]:
        seen = f"{item.first_seen:%Y-%m-%d %H:%M} to {item.last_seen:%Y-%m-%d %H:%M}"
        lines.append(f"• ×{item.count} ({seen}) `{md(item.shape, 200)}`")
    return "\n".join(lines)


def explain_history(history: History) -> str:
    lines = ["*Recent incidents:*"] if history.incidents else ["No incidents yet."]
    for incident in history.incidents[:MAX_LISTED]:
        report = build_report(incident)
        lines.append(
            f"• {incident.opened_at.strftime(TIME)} `{md(incident.id, 64)}` "
            f"({incident.state}) {md(report.title, 200)}"
        )
    if history.actions:
        lines.append("*Recent actions:*")
        for entry in history.actions[:MAX_LISTED]:
            detail = f": {md(entry.detail, 200)}" if entry.detail else ""
            lines.append(
                f"• {entry.started_at.strftime(TIME)} {md(entry.action, 64)} "
                f"(`{md(entry.proposal_id, 64)}`) approved by {md(entry.approver, 64)}"
                f" — {entry.result}{detail}"
            )
    if history.fetches:
        lines.append("*Evidence asked for:*")
        for fetch in history.fetches[:MAX_LISTED]:
            why = f": {md(fetch.detail, 200)}" if fetch.detail else ""
            lines.append(
                f"• {fetch.at.strftime(TIME)} `{md(fetch.incident_id, 64)}` by "
                f"{md(fetch.user, 64)} ({md(fetch.via, 64)}) — {fetch.outcome}{why}"
            )
    return "\n".join(lines)


def explain_status(status: Status) -> str:
    proposals = ", ".join(f"{n} {md(state, 32)}" for state, n in status.proposals.items() if n)
    executors = ", ".join(md(e, 64) for e in status.executors) or "none (diagnose and notify only)"
    return "\n".join(
        [
            f"*Open incidents:* {status.open_incidents}",
            f"*Proposals:* {proposals or 'none pending'}",
            f"*Undelivered notifications:* {status.pending_notifications}",
            f"*Active silences:* {status.active_silences}",
            f"*Actions that can run:* {executors}",
            *_stopped(status),
        ]
    )


def _stopped(status: Status) -> list[str]:
    """What a bug or a budget set aside, when anything was (`pitcrew status` lists it)."""
    lines = []
    if status.set_aside:
        lines.append(f"*Evidence set aside:* {len(status.set_aside)} (see `pitcrew status`)")
    if status.given_up:
        lines.append(f"*Notifications given up:* {status.given_up}")
    if status.held:
        waiting = "; ".join(md(m.held, 200) for m in status.held[:3])
        lines.append(f"*Notifications waiting for a person:* {len(status.held)} ({waiting})")
    if status.other_clusters:
        lines.append(f":warning: *Slack app shared:* {md(status.other_clusters, 1000)}")
    return lines


def explain_silence(
    silence_id: str, matchers: Mapping[str, str], ends: datetime, reason: str
) -> str:
    what = ", ".join(f"{md(k, 32)} `{md(v, 128)}`" for k, v in matchers.items())
    why = f" ({md(reason, MAX_REASON)})" if reason else ""
    return (
        f"Silenced {what} until {ends.strftime(TIME)} UTC{why}. "
        f"Undo with `{COMMAND} unsilence {md(silence_id, 64)}`."
    )


def explain_unsilence(silence_id: str, ended: bool) -> str:
    if ended:
        return f"Silence `{md(silence_id, 64)}` ended."
    return f"No active silence `{md(silence_id, 64)}`."


def describe_duration(value: timedelta) -> str:
    return format_duration(value)
