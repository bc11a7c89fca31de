"""The pure parts of the Kubernetes source: state keys, the bounded tracker, owner caching,
back-off, watch-line framing and target parsing (no API server needed)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from bot.adapters.kubernetes.api import StreamBrokenError, WatchStream
from bot.adapters.kubernetes.errors import UnavailableError
from bot.adapters.kubernetes.on_demand import Target, parse_target
from bot.adapters.kubernetes.owner_resolver import OwnerResolver
from bot.adapters.kubernetes.state import Converter, Tracker, bounded, health_of, identity
from bot.adapters.kubernetes.watch import WatchBackoff
from bot.core.errors import PitcrewError
from bot.core.model import ObjectRef


def pod(restarts: int, finished: str, message: str = "") -> dict[str, Any]:
    waiting = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "main",
                    "restartCount": restarts,
                    "state": waiting,
                    "lastState": {
                        "terminated": {
                            "reason": "OOMKilled",
                            "exitCode": 137,
                            "finishedAt": finished,
                        }
                    },
                }
            ],
        },
    }


def reasons(parts: list[Any]) -> list[str]:
    return [p.reason for p in parts]


def test_only_new_observed_states_are_reported() -> None:
    converter = Converter(OwnerResolver())
    tracker = Tracker()
    first = tracker.update(
        "u1", converter.keyed("Pod", pod(1, "2025-11-03T10:00:00Z", "back-off 10s"))
    )
    assert sorted(reasons(first)) == ["CrashLoopBackOff", "OOMKilled"]
    # the back-off grows and the restart count with it: the same states, nothing new
    again = tracker.update(
        "u1", converter.keyed("Pod", pod(1, "2025-11-03T10:00:00Z", "back-off 20s"))
    )
    assert again == []
    # a second OOM kill is a new observation
    second = tracker.update(
        "u1", converter.keyed("Pod", pod(2, "2025-11-03T10:07:00Z", "back-off 40s"))
    )
    assert reasons(second) == ["OOMKilled"]


def test_a_state_that_goes_away_and_comes_back_is_reported_again() -> None:
    converter = Converter(OwnerResolver())
    tracker = Tracker()
    crashing = pod(1, "2025-11-03T10:00:00Z")
    healthy = pod(1, "2025-11-03T10:00:00Z")
    healthy["status"]["containerStatuses"][0]["state"] = {"running": {}}
    tracker.update("u1", converter.keyed("Pod", crashing))
    assert tracker.update("u1", converter.keyed("Pod", healthy)) == []
    assert reasons(tracker.update("u1", converter.keyed("Pod", crashing))) == ["CrashLoopBackOff"]


def test_the_tracker_is_bounded() -> None:
    converter = Converter(OwnerResolver())
    tracker = Tracker(max_objects=100)
    for i in range(1000):
        tracker.update(f"u{i}", converter.keyed("Pod", pod(1, "2025-11-03T10:00:00Z")))
    assert len(tracker) == 100
    assert tracker.evicted == 900
    assert "u999" in tracker
    assert "u0" not in tracker


def test_identity_survives_missing_fields() -> None:
    assert identity("Pod", {"metadata": {"uid": "x"}}) == "x"
    assert identity("Pod", {"metadata": {"name": "a", "namespace": "b"}}) == "Pod/b/a"
    assert identity("Pod", {"status": 1}) == identity("Pod", {"status": 1})
    assert identity("Pod", {"status": 1}).startswith("Pod/?/")


def test_bounded_cuts_long_strings_only() -> None:
    value = {"a": "x" * 100, "b": [1, "y" * 5], "c": None}
    cut = bounded(value, limit=10)
    assert cut["a"].startswith("x" * 10)
    assert cut["a"].endswith("[90 more characters cut by pitcrew]")
    assert cut["b"] == [1, "yyyyy"]
    assert cut["c"] is None


def test_backoff_grows_to_its_cap_with_jitter() -> None:
    rolls = iter([0.0, 1.0, 0.5] * 10)
    backoff = WatchBackoff(1.0, 8.0, rng=lambda: next(rolls))
    delays = [backoff.next() for _ in range(6)]
    assert delays == [0.5, 2.0, 3.0, 4.0, 8.0, 6.0]
    backoff.reset()
    assert backoff.next() == 0.5


def test_owner_lookups_are_cached_and_failures_retried() -> None:
    calls: list[tuple[str, str, str]] = []
    replica_set = {
        "metadata": {
            "name": "web-5d8f7",
            "namespace": "ns",
            "ownerReferences": [{"kind": "Deployment", "name": "web", "controller": True}],
        }
    }
    failing = {"on": True}

    def fetch(kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        calls.append((kind, namespace, name))
        if failing["on"]:
            raise UnavailableError("MaxRetryError: connection refused")
        return replica_set

    now = {"t": 0.0}
    resolver = OwnerResolver(fetch, ttl=60, clock=lambda: now["t"])
    metadata = {
        "name": "web-5d8f7-abcde",
        "namespace": "ns",
        "labels": {"pod-template-hash": "5d8f7"},
        "ownerReferences": [{"kind": "ReplicaSet", "name": "web-5d8f7", "controller": True}],
    }
    # the lookup fails: the pod-template-hash guess stands in, and nothing is cached
    assert resolver.workload("Pod", metadata) == ObjectRef("Deployment", "web", "ns")
    failing["on"] = False
    for _ in range(5):
        assert resolver.workload("Pod", metadata) == ObjectRef("Deployment", "web", "ns")
    assert len(calls) == 2  # one failed, one cached for the next four
    now["t"] = 61.0
    resolver.workload("Pod", metadata)
    assert len(calls) == 3  # expired: looked up again
    assert resolver.failures == 1


def test_the_owner_cache_is_bounded() -> None:
    resolver = OwnerResolver(lambda kind, ns, name: {"metadata": {"name": name}}, max_entries=10)
    for i in range(50):
        resolver.meta("ReplicaSet", "ns", f"rs-{i}")
    assert len(resolver) == 10


class Response:
    """Bytes in chunks, as urllib3 streams a watch response."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = chunks
        self.released = False

    def stream(self, amt: Any = None, decode_content: bool = False) -> Iterator[bytes]:
        yield from self.chunks

    def release_conn(self) -> None:
        self.released = True

    def shutdown(self) -> None:
        pass


def test_watch_lines_are_framed_across_chunks() -> None:
    response = Response(
        b'{"type": "ADDED", "object": {"metadata"',
        b': {"name": "a"}}}\n\n{"type": "BOOK',
        b'MARK", "object": {}}\n',
    )
    events = list(WatchStream(response))
    assert [e.type for e in events] == ["ADDED", "BOOKMARK"]
    assert events[0].object == {"metadata": {"name": "a"}}
    assert response.released


def test_a_cut_in_the_middle_of_an_event_is_broken_not_ended() -> None:
    stream = WatchStream(Response(b'{"type": "ADDED", "object": {}}\n{"type": "MOD'))
    with pytest.raises(StreamBrokenError, match="cut in the middle"):
        list(stream)


def test_an_oversized_or_undecodable_event_breaks_the_stream() -> None:
    with pytest.raises(StreamBrokenError, match="over 64 bytes"):
        list(WatchStream(Response(b"x" * 100), max_line=64))
    with pytest.raises(StreamBrokenError, match="undecodable"):
        list(WatchStream(Response(b"<html>502 Bad Gateway</html>\n")))


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("ml/pod/x", Target("ml", "Pod", "x")),
        ("ml/x", Target("ml", "Pod", "x")),
        ("ml/rayjob/verl", Target("ml", "RayJob", "verl")),
        ("ml/rayjobs.ray.io/verl", Target("ml", "RayJob", "verl")),
        ("ml/RayCluster/c", Target("ml", "RayCluster", "c")),
    ],
)
def test_targets_parse(text: str, target: Target) -> None:
    assert parse_target(text) == target


@pytest.mark.parametrize("text", ["", "x", "a/b/c/d", "ml//x", "ml/service/x"])
def test_bad_targets_say_what_is_expected(text: str) -> None:
    with pytest.raises(PitcrewError, match="--kube"):
        parse_target(text)


@pytest.mark.parametrize(
    ("status", "health"),
    [
        ({"jobDeploymentStatus": "Failed", "reason": "AppFailed"}, "failed"),
        ({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}, "healthy"),
        ({"jobDeploymentStatus": "Running", "jobStatus": "FAILED"}, "failed"),
        ({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}, "healthy"),
        # a failed attempt KubeRay retries under backoffLimit, then the retry running
        ({"jobDeploymentStatus": "Retrying", "reason": "AppFailed", "failed": 1}, "failed"),
        ({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "failed": 1}, "other"),
        ({"jobDeploymentStatus": "ValidationFailed", "reason": "ValidationFailed"}, "failed"),
        ({}, "other"),
    ],
)
def test_rayjob_health(status: dict[str, Any], health: str) -> None:
    spec = {"backoffLimit": 3}  # KubeRay retries a failed attempt three times
    rayjob = {"metadata": {"name": "j", "namespace": "ns"}, "spec": spec, "status": status}
    [group] = Converter(OwnerResolver()).keyed("RayJob", rayjob)
    found, workload = health_of(group.signal)
    assert found == health
    assert workload == (ObjectRef("RayJob", "j", "ns") if health == "healthy" else None)


def test_a_rayjobs_cluster_being_ready_is_not_the_rayjob_being_healthy() -> None:
    owned = {
        "metadata": {
            "name": "c",
            "namespace": "ns",
            "ownerReferences": [{"kind": "RayJob", "name": "j", "controller": True}],
        },
        "status": {"state": "ready"},
    }
    own = {"metadata": {"name": "c", "namespace": "ns"}, "status": {"state": "ready"}}
    converter = Converter(OwnerResolver())
    assert health_of(converter.keyed("RayCluster", owned)[0].signal) == ("other", None)
    assert health_of(converter.keyed("RayCluster", own)[0].signal) == (
        "healthy",
        ObjectRef("RayCluster", "c", "ns"),
    )
