"""A signature's `alert` match, read as a specification: an Alertmanager alert by its
name, its labels as Alertmanager's own matchers write them (`=`, `!=`, `=~`, `!~`,
anchored, a missing label being ""), and regexes searched in its annotations; every
regex RE2 or refused at load with file, line and reason, like every playbook regex."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.adapters.files.playbooks import load_builtin, load_library
from bot.core.errors import PlaybookError
from bot.core.inputs.alerts import Alert, alert_signal
from bot.core.model import frozen_map
from bot.core.taxonomy import Category
from tests.support.playbooks import engine_for, playbook

RE2 = (
    "RE2 cannot run it (invalid escape sequence: \\1): lookarounds and backreferences need a "
    "backtracking engine, which a log line can stall; rewrite it, for example with `unless` "
    "for what must not match"
)
PLAYBOOK = """\
id: team-gpu
title: Team GPU alert
category: gpu_fault
severity: critical
match:
  - name: gpu
    alert:
      alertname: 'GPU.*'
diagnosis: 'GPU alert.'
examples:
  - name: none
    input: "x\\n"
    expect: {match: false}
"""


def load_error(tmp_path: Path, old: str, new: str) -> str:
    (tmp_path / "p.yaml").write_text(PLAYBOOK.replace(old, new))
    with pytest.raises(PlaybookError) as raised:
        load_library([tmp_path])
    return str(raised.value).replace(str(tmp_path) + "/", "")


@pytest.mark.parametrize(
    ("old", "new", "error"),
    [
        ("      alertname: 'GPU.*'", "      labels: ['severity=critical']",
         "p.yaml:8: match[0].alert.labels[0]: label matcher 'severity=critical': expected "
         'name="value", name!="value", name=~"regex" or name!~"regex"'),
        ("      alertname: 'GPU.*'", "      labels: ['err_code=~\"(4|7\"']",
         "p.yaml:8: match[0].alert.labels[0]: label matcher 'err_code=~\"(4|7\"': regex does "
         "not compile: missing ), unterminated subpattern at position 0"),
        ("      alertname: 'GPU.*'", "      labels: ['gpu=~\"(a)\\\\1\"']",
         "p.yaml:8: match[0].alert.labels[0]: label matcher 'gpu=~\"(a)\\\\\\\\1\"': regex '(a)\\\\1': "
         + RE2),
        ("      alertname: 'GPU.*'", "      annotations: {summary: '(x+)+\\1'}",
         "p.yaml:8: match[0].alert.annotations.summary: regex '(x+)+\\\\1': " + RE2),
        ("      alertname: 'GPU.*'", "      colour: red",
         "p.yaml:8: match[0].alert.colour: unknown key"),
        ("      alertname: 'GPU.*'", "      {}",
         "p.yaml:7: match[0].alert: an alert match needs at least one of alertname, labels, annotations"),
        ("    alert:", "    reason: X\n    alert:",
         "p.yaml:6: match[0]: an alert's name is `alert.alertname`, not `reason`"),
        ("    alert:", "    sources: [pod_status]\n    alert:",
         "p.yaml:6: match[0]: a signature with `alert` matches alerts only: sources: [alert]"),
    ],
)  # fmt: skip
def test_a_bad_alert_match_is_refused_at_load(
    tmp_path: Path, old: str, new: str, error: str
) -> None:
    assert load_error(tmp_path, old, new) == error


def alert(**labels: str) -> Alert:
    return Alert(
        status="firing",
        labels=frozen_map({"alertname": "GPUXidError", **labels}),
        annotations=frozen_map({"summary": "GPU 3 reported Xid 79: fallen off the bus"}),
    )


MATCH = {
    "alertname": "GPUXid.*",
    "labels": ['err_code=~"48|79"', 'severity!="info"', 'namespace!~"kube-.*"', 'gpu=~".*"'],
    "annotations": {"summary": "fallen off"},
}


@pytest.mark.parametrize(
    ("labels", "matches"),
    [
        ({"err_code": "79", "severity": "critical"}, True),
        ({"err_code": "79"}, True),  # severity missing is "", which is not "info"
        ({"err_code": "179", "severity": "critical"}, False),  # anchored: 179 is not 79
        ({"err_code": "79", "severity": "info"}, False),
        ({"err_code": "79", "namespace": "kube-system"}, False),
        ({"severity": "critical"}, False),  # err_code missing is "", which =~ 48|79 is not
    ],
)
def test_labels_match_as_alertmanagers_matchers_do(
    tmp_path: Path, labels: dict[str, str], matches: bool
) -> None:
    engine = engine_for(
        tmp_path, playbook("team-gpu", "gpu_fault", [{"name": "xid", "alert": MATCH}])
    )
    hits = engine.hits([alert_signal(alert(**labels))])
    assert bool(hits) is matches


def test_an_alert_match_looks_at_alerts_only(tmp_path: Path) -> None:
    engine = engine_for(
        tmp_path, playbook("team-gpu", "gpu_fault", [{"name": "xid", "alert": {"alertname": ".*"}}])
    )
    diagnosis = engine.diagnose_text("GPUXidError firing: fallen off the bus\n")
    assert diagnosis.findings == ()
    other = engine.hits([alert_signal(alert(err_code="79"))])
    assert [h.sig.signature.name for h in other] == ["xid"]


def test_the_alert_catch_all_gives_way_to_every_other_class() -> None:
    """alert-firing is set aside whenever another class matches the same alert: its
    `suppressed_by` is every category but its own (a category added must be added there)."""
    (signature,) = next(
        p.playbook for p in load_builtin().playbooks if p.playbook.id == "alert-firing"
    ).match
    assert set(signature.suppressed_by) == set(Category) - {Category.ALERT_FIRING}
