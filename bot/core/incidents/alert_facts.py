"""The Alertmanager alerts an incident has seen, and what their state means for it.

Why this exists: an alert is evidence like any other (a finding of the playbook that
knows it), but it also has a life of its own that the card must show: it fires,
is repeated, and resolves. The correlator keeps one `AlertFact` per alert (its
fingerprint and start) on the incident; a resolved alert never opens an incident,
it is a fact on the one it joins, and an incident whose evidence is only alerts
resolves when the last of them does (`resolves`). Pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import datetime

from bot.core.inputs.alerts import FIRING, LABELS, RESOLVED
from bot.core.inputs.values import parse_time
from bot.core.model import AlertFact, Finding, SourceKind, frozen_map

MAX_ALERTS = 20  # alerts kept per incident, the newest


def fact_of(finding: Finding) -> AlertFact | None:
    """The alert a finding of an `alert` signal is, else None."""
    if finding.source is not SourceKind.ALERT:
        return None
    fields = finding.fields
    return AlertFact(
        name=fields.get("alertname", finding.reason),
        fingerprint=fields.get("fingerprint", ""),
        status=fields.get("alert_status", FIRING),
        starts_at=_time(fields.get("starts_at")),
        ends_at=_time(fields.get("ends_at")),
        summary=fields.get("annotations.summary", ""),
        generator_url=fields.get("generator_url", ""),
        external_url=fields.get("external_url", ""),
        labels=frozen_map(
            {k.removeprefix(LABELS): v for k, v in fields.items() if k.startswith(LABELS)}
        ),
    )


def is_resolution(finding: Finding) -> bool:
    """A finding of an alert that resolved: a fact on an incident, never a new one."""
    return finding.source is SourceKind.ALERT and finding.fields.get("alert_status") == RESOLVED


def noted(facts: tuple[AlertFact, ...], finding: Finding) -> tuple[AlertFact, ...]:
    """`facts` with the finding's alert in (its latest state), or `facts` itself when the
    finding is no alert's or says nothing new."""
    fact = fact_of(finding)
    return facts if fact is None else added(facts, fact)


def added(facts: tuple[AlertFact, ...], fact: AlertFact) -> tuple[AlertFact, ...]:
    """`facts` with `fact` in: a new alert appended (the oldest dropped past
    `MAX_ALERTS`), a known one (same fingerprint and start) moved to its new state."""
    same = [i for i, known in enumerate(facts) if _same(known, fact)]
    if not same:
        return (*facts, fact)[-MAX_ALERTS:]
    known = facts[same[0]]
    if known.status == RESOLVED and fact.status == FIRING:
        return facts  # a late copy of a firing alert does not undo its resolution
    updated = dataclasses.replace(
        known,
        status=fact.status,
        ends_at=fact.ends_at or known.ends_at,
        external_url=known.external_url or fact.external_url,
    )
    if updated == known:
        return facts
    return (*facts[: same[0]], updated, *facts[same[0] + 1 :])


def resolves(facts: tuple[AlertFact, ...], findings: Iterable[Finding]) -> bool:
    """Every alert resolved, and the incident's evidence is only alerts."""
    if not facts or any(f.status != RESOLVED for f in facts):
        return False
    return all(
        f.source is SourceKind.ALERT and all(e.source is SourceKind.ALERT for e in f.evidence)
        for f in findings
    )


def names(facts: Iterable[AlertFact]) -> str:
    """`KubePodCrashLooping and DCGMXidError`: the alerts' names, each once."""
    unique = list(dict.fromkeys(f.name for f in facts))
    return unique[0] if len(unique) == 1 else ", ".join(unique[:-1]) + " and " + unique[-1]


def _same(known: AlertFact, fact: AlertFact) -> bool:
    return known.fingerprint == fact.fingerprint and known.starts_at == fact.starts_at


def _time(text: str | None) -> datetime | None:
    return parse_time(text) if text else None


# -- links: where a person sees the alert and silences it --------------------------------

_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def matchers(fact: AlertFact) -> str:
    """`{alertname="X", namespace="ml-train", …}`: the alert's labels as Alertmanager's
    UI writes a filter (ui/app/src/Utils/Filter.elm, stringifyFilter, v0.25.0), its name
    first; a label whose value holds a quote is left out (the UI cannot read it)."""
    labels = {"alertname": fact.name, **dict(sorted(fact.labels.items()))}
    pairs = (f'{k}="{v}"' for k, v in labels.items() if '"' not in v and "\\" not in v)
    return "{" + ", ".join(pairs) + "}"


def alert_link(fact: AlertFact) -> str:
    """The alert in Alertmanager's UI, or "" without Alertmanager's address."""
    base = fact.external_url.rstrip("/")
    if not base:
        return ""
    query = f"silenced=false&inhibited=false&active=true&filter={_quote(matchers(fact))}"
    return f"{base}/#/alerts?{query}"


def silence_link(fact: AlertFact) -> str:
    """Alertmanager's new-silence form prefilled with the alert's labels
    (ui/app/src/Views/SilenceForm/Parsing.elm, v0.25.0), or "" without its address."""
    base = fact.external_url.rstrip("/")
    return f"{base}/#/silences/new?filter={_quote(matchers(fact))}" if base else ""


def _quote(text: str) -> str:
    """Percent-encoding of everything but RFC 3986's unreserved characters."""
    return "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in text.encode())
