"""Alertmanager's alerts become `alert` signals, read as a specification: the webhook's
body (version 4) as Alertmanager 0.25 posts it (tests/data/alertmanager/ holds bodies
Debian's prometheus-alertmanager sent to a receiver), every way a body is not one
refused naming the problem, and alerts pasted into `pitcrew diagnose`."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.core.errors import InputError
from bot.core.inputs.alerts import alert_signal, read_webhook, rule_expression
from bot.core.inputs.segment import split_text
from bot.core.model import ObjectRef, Signal, SourceKind

DATA = Path(__file__).resolve().parents[2] / "data" / "alertmanager"
POD = "verl-ppo-raycluster-x7k2p-gpu-group-worker-9zq4f"


def body(name: str) -> bytes:
    return (DATA / name).read_bytes()


def edited(name: str, **changes: Any) -> bytes:
    data = json.loads(body(name))
    data.update(changes)
    return json.dumps(data).encode()


def test_a_kube_prometheus_alert_is_a_signal_about_its_pod() -> None:
    webhook = read_webhook(body("kube-pod-crashlooping.json"))
    (alert,) = webhook.alerts
    assert (webhook.receiver, webhook.status, webhook.external_url, webhook.truncated) == (
        "pitcrew",
        "firing",
        "http://alertmanager.example:9093",
        0,
    )
    assert alert.starts_at == datetime(2026, 12, 6, 6, 0, 3, 725592, tzinfo=UTC)
    assert alert.ends_at is None  # Go's zero time: no end yet
    assert alert.identity == "a5c4f5dd964db575/2026-12-06T06:00:03.725592+00:00/firing"
    signal = alert_signal(alert, webhook.external_url)
    assert (signal.source, signal.reason, signal.obj, signal.workload, signal.time) == (
        SourceKind.ALERT,
        "KubePodCrashLooping",
        ObjectRef("Pod", POD, "ml-train"),
        None,
        alert.starts_at,
    )
    assert signal.text == (
        f"KubePodCrashLooping firing: Pod is crash looping. Pod ml-train/{POD} (ray-worker) "
        'is in waiting state (reason: "CrashLoopBackOff") on cluster .'
    )
    fields = dict(signal.fields)
    assert {k: v for k, v in fields.items() if "." not in k} == {
        "namespace": "ml-train",
        "pod": POD,
        "container": "ray-worker",
        "alertname": "KubePodCrashLooping",
        "alert_status": "firing",
        "fingerprint": "a5c4f5dd964db575",
        "starts_at": "2026-12-06T06:00:03.725592+00:00",
        "generator_url": (
            "http://prometheus.example:9090/graph?g0.expr=max_over_time%28kube_pod_container"
            "_status_waiting_reason%7Bjob%3D%22kube-state-metrics%22%2Creason%3D%22CrashLoop"
            "BackOff%22%7D%5B5m%5D%29+%3E%3D+1&g0.tab=1"
        ),
        "external_url": "http://alertmanager.example:9093",
        "expr": 'max_over_time(kube_pod_container_status_waiting_reason{job="kube-state-metrics",'
        'reason="CrashLoopBackOff"}[5m]) >= 1',
        "severity": "warning",
    }
    assert fields["labels.job"] == "kube-state-metrics"  # Prometheus' scrape job: no K8s Job
    assert fields["annotations.runbook_url"] == (
        "https://runbooks.prometheus-operator.dev/runbooks/kubernetes/kubepodcrashlooping"
    )
    assert "job" not in fields


def test_a_dcgm_xid_alert_is_about_its_node_and_gpu_not_the_exporters_pod() -> None:
    webhook = read_webhook(body("dcgm-xid.json"))
    signal = alert_signal(webhook.alerts[0], webhook.external_url)
    assert (signal.obj, signal.workload) == (ObjectRef("Node", "gpu-node-7"), None)
    assert signal.text == (
        "GPUXidError firing: GPU 3 on gpu-node-7 reported Xid 79. "
        "(Xid 79: GPU has fallen off the bus)"
    )
    fields = signal.fields
    assert [fields.get(k) for k in ("node", "gpu", "gpu_uuid", "gpu_model", "xid", "pod")] == [
        "gpu-node-7",
        "3",
        "GPU-5b7c9e2a-41f3-8d6e-2c0a-9f1e3d5b7a90",
        "NVIDIA A100-SXM4-80GB",
        "79",
        None,
    ]


def test_a_resolved_alert_says_when_it_ended() -> None:
    (alert,) = read_webhook(body("kube-pod-crashlooping-resolved.json")).alerts
    signal = alert_signal(alert)
    assert (signal.fields["alert_status"], signal.fields["ends_at"]) == (
        "resolved",
        "2026-12-06T06:00:05+00:00",
    )
    assert alert.identity.endswith("/resolved")


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"alertname=KubePodCrashLooping", "the body is not JSON: Expecting value: line 1 column 1 (char 0)"),
        (b'[{"status": "firing"}]', "the body is a JSON array, not Alertmanager's notification"),
        (edited("dcgm-xid.json", version=None), "the body has no version: Alertmanager's webhook sends version 4"),
        (edited("dcgm-xid.json", version="3"), "version '3': this receiver reads Alertmanager's webhook version 4"),
        (edited("dcgm-xid.json", alerts=[]), "alerts: expected a list of at least one alert"),
        (edited("dcgm-xid.json", alerts={"status": "firing"}), "alerts: expected a list of at least one alert"),
        (edited("dcgm-xid.json", alerts=["firing"]), "alerts[0]: expected an alert object, not a JSON string"),
        (
            edited("dcgm-xid.json", alerts=[{"status": "firing", "labels": {"severity": "critical"}}]),
            "alerts[0].labels: no alertname",
        ),
        (
            edited("dcgm-xid.json", alerts=[{"status": "pending", "labels": {"alertname": "X"}}]),
            "alerts[0].status: expected firing or resolved, not 'pending'",
        ),
        (
            edited("dcgm-xid.json", alerts=[{"status": "firing", "labels": ["alertname"]}]),
            "alerts[0].labels: expected an object of names and texts, not a JSON array",
        ),
        (
            edited("dcgm-xid.json", alerts=[{"status": "firing", "labels": {"alertname": "X"}, "startsAt": "yesterday"}]),
            "alerts[0].startsAt: expected an RFC 3339 time, not 'yesterday'",
        ),
    ],
)  # fmt: skip
def test_a_body_that_is_not_a_notification_is_refused_naming_the_problem(
    raw: bytes, problem: str
) -> None:
    with pytest.raises(InputError) as refused:
        read_webhook(raw)
    assert str(refused.value) == problem


@pytest.mark.parametrize(
    ("url", "expr"),
    [
        ("http://p:9090/graph?g0.expr=DCGM_FI_DEV_XID_ERRORS+%3E+0&g0.tab=1", "DCGM_FI_DEV_XID_ERRORS > 0"),
        ("http://p:9090/graph?g0.tab=1&g0.expr=up%7Bjob%3D%22a%22%7D+%3D%3D+0", 'up{job="a"} == 0'),
        ("http://p:9090/graph?g0.expr=rate%28x%5B5m%5D%29%ZZ", "rate(x[5m])%ZZ"),
        ("http://p:9090/graph", ""),
        ("", ""),
    ],
)  # fmt: skip
def test_the_rules_expression_is_read_from_its_generator_url(url: str, expr: str) -> None:
    assert rule_expression(url) == expr


def test_a_pasted_notification_is_read_like_the_receivers() -> None:
    (signal,) = split_text(body("dcgm-xid.json").decode(), "paste")
    assert isinstance(signal, Signal)
    assert (signal.reason, signal.obj, signal.origin) == (
        "GPUXidError",
        ObjectRef("Node", "gpu-node-7"),
        "paste",
    )
    assert signal.fields["external_url"] == "http://alertmanager.example:9093"


def test_alerts_pasted_from_amtool_are_firing_alerts() -> None:
    """`amtool alert query -o json` prints the v2 API's alerts: `status` is an object."""
    pasted = json.dumps(
        [
            {
                "annotations": {"summary": "Node is not ready."},
                "endsAt": "2026-12-06T06:10:03.000Z",
                "fingerprint": "0f1e2d3c4b5a6978",
                "receivers": [{"name": "pitcrew"}],
                "startsAt": "2026-12-06T06:00:03.000Z",
                "status": {"inhibitedBy": [], "silencedBy": [], "state": "active"},
                "updatedAt": "2026-12-06T06:00:03.000Z",
                "generatorURL": "",
                "labels": {"alertname": "KubeNodeNotReady", "node": "gpu-node-7"},
            },
            {"labels": {"alertname": "Broken"}, "startsAt": "not a time", "status": {}},
        ]
    )
    first, second = split_text(pasted, "amtool.json")
    assert isinstance(first, Signal)
    assert isinstance(second, Signal)
    assert (first.reason, first.fields["alert_status"], first.obj) == (
        "KubeNodeNotReady",
        "firing",
        ObjectRef("Node", "gpu-node-7"),
    )
    assert (second.reason, "starts_at" in second.fields) == ("Broken", False)
