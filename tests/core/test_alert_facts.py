"""The alerts an incident has seen, and how its card shows them, read as a specification:
one fact per alert (fingerprint and start), moved to its latest state; a late copy of
a firing alert does not undo its resolution; the card's line says how it stands and
links to the rule, to the alert in Alertmanager and to Alertmanager's new-silence form
prefilled with the alert's labels, as Alertmanager's UI writes them."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from bot.core.incidents import alert_facts
from bot.core.incidents.reports import build_report
from bot.core.model import (
    AlertFact,
    Diagnosis,
    Finding,
    Incident,
    ReportAlert,
    Severity,
    SourceKind,
)
from bot.core.model import frozen_map as fm
from bot.core.taxonomy import Category

T0 = datetime(2026, 12, 6, 6, 0, 3, tzinfo=UTC)
T1 = datetime(2026, 12, 6, 6, 9, 5, tzinfo=UTC)
LABELS = {"alertname": "KubePodCrashLooping", "namespace": "ml-train", "pod": "w-9zq4f"}


def finding(status: str = "firing", **extra: str) -> Finding:
    fields = {
        "alertname": "KubePodCrashLooping",
        "alert_status": status,
        "fingerprint": "a5c4f5dd964db575",
        "starts_at": T0.isoformat(),
        "annotations.summary": "Pod is crash looping.",
        "generator_url": "http://prometheus:9090/graph?g0.expr=up",
        "external_url": "http://alertmanager:9093",
        **{f"labels.{k}": v for k, v in LABELS.items()},
        **extra,
    }
    return Finding(
        playbook="crash-loop-backoff",
        category=Category.CRASH_LOOP_BACKOFF,
        severity=Severity.WARNING,
        title="Container in CrashLoopBackOff",
        signature="kube-prometheus-crash-looping",
        source=SourceKind.ALERT,
        fields=fm(fields),
        reason="KubePodCrashLooping",
    )


FIRING = AlertFact(
    name="KubePodCrashLooping",
    fingerprint="a5c4f5dd964db575",
    status="firing",
    starts_at=T0,
    summary="Pod is crash looping.",
    generator_url="http://prometheus:9090/graph?g0.expr=up",
    external_url="http://alertmanager:9093",
    labels=fm(LABELS),
)


def test_an_alerts_finding_is_one_fact_moved_to_its_latest_state() -> None:
    facts = alert_facts.noted((), finding())
    assert facts == (FIRING,)
    assert alert_facts.noted(facts, finding()) is facts  # a repeat says nothing new
    resolved = alert_facts.noted(facts, finding("resolved", ends_at=T1.isoformat()))
    assert resolved == (dataclasses.replace(FIRING, status="resolved", ends_at=T1),)
    assert alert_facts.noted(resolved, finding()) is resolved  # a late firing copy
    again = alert_facts.noted(resolved, finding(starts_at=T1.isoformat()))  # it fires anew
    assert [(f.status, f.starts_at) for f in again] == [("resolved", T0), ("firing", T1)]


def test_the_alert_in_alertmanager_and_its_silence_carry_its_labels_as_a_filter() -> None:
    assert alert_facts.matchers(FIRING) == (
        '{alertname="KubePodCrashLooping", namespace="ml-train", pod="w-9zq4f"}'
    )
    encoded = (
        "%7Balertname%3D%22KubePodCrashLooping%22%2C%20namespace%3D%22ml-train%22%2C%20"
        "pod%3D%22w-9zq4f%22%7D"
    )
    assert alert_facts.silence_link(FIRING) == (
        f"http://alertmanager:9093/#/silences/new?filter={encoded}"
    )
    assert alert_facts.alert_link(FIRING) == (
        "http://alertmanager:9093/#/alerts?silenced=false&inhibited=false&active=true"
        f"&filter={encoded}"
    )
    unknown = dataclasses.replace(FIRING, external_url="")
    assert (alert_facts.alert_link(unknown), alert_facts.silence_link(unknown)) == ("", "")
    quoted = dataclasses.replace(FIRING, labels=fm({**LABELS, "message": 'say "hi"'}))
    assert "message" not in alert_facts.matchers(quoted)


def test_the_card_shows_each_alert_with_its_links() -> None:
    resolved = dataclasses.replace(FIRING, fingerprint="0c7d", status="resolved", ends_at=T1)
    incident = Incident(
        id="inc-1",
        key="/ml-train/Pod/w-9zq4f",
        opened_at=T0,
        updated_at=T1,
        diagnosis=Diagnosis((), (), ""),
        alerts=(FIRING, resolved),
    )
    firing_line, resolved_line = build_report(incident).alerts
    assert firing_line == ReportAlert(
        text="KubePodCrashLooping firing since 2026-12-06 06:00:03: Pod is crash looping.",
        source="http://prometheus:9090/graph?g0.expr=up",
        alertmanager=alert_facts.alert_link(FIRING),
        silence=alert_facts.silence_link(FIRING),
    )
    assert resolved_line.text == (
        "KubePodCrashLooping resolved at 2026-12-06 06:09:05 (firing since 2026-12-06 06:00:03): "
        "Pod is crash looping."
    )
    assert resolved_line.silence == ""  # nothing left to silence
