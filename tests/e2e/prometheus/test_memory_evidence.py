"""Memory evidence read from a real Prometheus: the killed pod's working set before the
kill, its limit, the other pods of its worker group, in one line for the card; and what
an unreachable or silent Prometheus costs (one timeout, with the reason)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import pytest

from bot.adapters.prometheus.client import (
    Deadline,
    PrometheusClient,
    PrometheusConfig,
    PrometheusError,
)
from bot.adapters.prometheus.local import LocalPrometheus
from bot.adapters.prometheus.working_set import fetch_memory
from bot.core.actions.memory_evidence import GI, MemoryTarget, Shape, verdict
from tests.support.memory_series import SEED_CLUSTER, SEED_KILLED_AT, SEED_NS, SEED_POD


def client(url: str, timeout: float = 5.0) -> PrometheusClient:
    return PrometheusClient(PrometheusConfig(url, timeout=timeout))


SEED_TARGET = MemoryTarget(
    SEED_NS, SEED_POD, SEED_KILLED_AT, "ray-worker", "gpu-group", SEED_CLUSTER, "16Gi"
)


@pytest.mark.parametrize(
    ("target", "shape", "line"),
    [
        (
            SEED_TARGET,
            Shape.LEAK,
            "peak 15.9Gi of 16Gi, rising 0.8Gi/min for 16 min before the kill (looks like a "
            "leak); the other 2 pods of gpu-group peaked at 11.2Gi",
        ),
        (
            MemoryTarget("ml-spike", "spiky-worker-0", SEED_KILLED_AT, group="gpu-group"),
            Shape.SPIKE,
            "flat at 9Gi, then +6.9Gi in 40 s to 15.9Gi of 16Gi (a spike: model or batch load)",
        ),
        (
            MemoryTarget("ml-empty", "gone-worker-0", SEED_KILLED_AT, spec_limit="16Gi"),
            Shape.NO_DATA,
            "no memory samples of pod gone-worker-0 before the kill",
        ),
    ],
    ids=["leak", "spike", "no-data"],
)
def test_the_memory_line_names_the_shape_before_the_kill(
    prometheus: LocalPrometheus, target: MemoryTarget, shape: Shape, line: str
) -> None:
    evidence = fetch_memory(client(prometheus.url), target)
    found = verdict(evidence)
    assert (found.shape, found.line) == (shape, line)
    assert found.limit == 16 * GI


def test_the_group_is_the_pods_labelled_with_the_same_ray_group(
    prometheus: LocalPrometheus,
) -> None:
    evidence = fetch_memory(client(prometheus.url), SEED_TARGET)
    assert evidence.killed.pod == SEED_POD
    assert evidence.killed.limit == 16 * GI  # from kube_pod_container_resource_limits
    assert [p.pod for p in evidence.group] == [
        f"{SEED_CLUSTER}-gpu-group-worker-2bq7d",
        f"{SEED_CLUSTER}-gpu-group-worker-k4m9x",
    ]  # not the cpu-group pod at 30Gi
    assert [round(p.peak / GI, 1) for p in evidence.group] == [11.2, 8.0]
    assert max(s.at for s in evidence.killed.samples) <= SEED_KILLED_AT


def test_without_a_limit_metric_the_spec_limit_is_used(prometheus: LocalPrometheus) -> None:
    evidence = fetch_memory(
        client(prometheus.url),
        MemoryTarget("ml-empty", "gone-worker-0", SEED_KILLED_AT, spec_limit="24Gi"),
    )
    assert evidence.killed.limit == 24 * GI
    assert evidence.killed.samples == ()


@pytest.fixture
def silent() -> Iterator[socket.socket]:
    """A loopback socket that takes connections into its backlog and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener


def connections_made(listener: socket.socket) -> int:
    """How many connections the fetch opened to the silent socket."""
    listener.setblocking(False)
    made = 0
    with contextlib.suppress(BlockingIOError):
        while True:
            listener.accept()[0].close()
            made += 1
    return made


def test_a_silent_prometheus_costs_one_timeout_for_all_queries(silent: socket.socket) -> None:
    port = int(silent.getsockname()[1])
    with pytest.raises(PrometheusError) as raised:
        fetch_memory(client(f"http://127.0.0.1:{port}", timeout=0.5), SEED_TARGET)
    assert str(raised.value) == f"http://127.0.0.1:{port} did not answer within 0.5 s"
    assert connections_made(silent) == 1  # one timeout, not one per query


def test_an_unreachable_prometheus_says_so_at_once() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(PrometheusError, match=rf"^cannot reach http://127\.0\.0\.1:{port}: "):
        fetch_memory(client(f"http://127.0.0.1:{port}", timeout=2.0), SEED_TARGET)


def test_a_query_prometheus_refuses_is_reported_with_its_error(
    prometheus: LocalPrometheus,
) -> None:
    with pytest.raises(PrometheusError, match=r"answered HTTP 400: .*parse error"):
        client(prometheus.url).instant("sum(", SEED_KILLED_AT, Deadline(5.0))
