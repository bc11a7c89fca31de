"""Every sample a named cluster's pitcrew exposes carries `cluster`, so one Prometheus
tells several clusters' pitcrews apart; an unnamed one exposes them as they are."""

from __future__ import annotations

from bot.daemon.metrics import Metrics


def samples(metrics: Metrics) -> list[str]:
    text = metrics.exposition().decode()
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_every_sample_of_a_named_cluster_carries_its_name() -> None:
    metrics = Metrics(cluster="eu-a")
    metrics.actions.labels(action="k8s.bump_memory", result="succeeded").inc()
    metrics.open_incidents.set(2)
    shown = samples(metrics)
    assert (
        'pitcrew_actions_total{action="k8s.bump_memory",cluster="eu-a",result="succeeded"} 1.0'
        in shown
    )
    assert 'pitcrew_incidents_open{cluster="eu-a"} 2.0' in shown
    assert all('cluster="eu-a"' in line for line in shown)


def test_an_unnamed_pitcrew_adds_no_label() -> None:
    metrics = Metrics()
    metrics.open_incidents.set(2)
    assert "pitcrew_incidents_open 2.0" in samples(metrics)
