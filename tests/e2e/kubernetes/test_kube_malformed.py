"""Malformed objects and events (wrong types, missing fields, unknown kinds, a huge message,
undecodable watch events) are read as far as they go, never stop a watch, and are each
reported once, through a relist too."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import kmock
import pytest

from bot.adapters.kubernetes.api import EVENTS, NODES, PODS, RAY_JOBS
from bot.adapters.kubernetes.source import KubernetesSource, KubeSourceConfig
from bot.adapters.kubernetes.state import MAX_TEXT
from bot.core.diagnosis.engine import Engine
from bot.core.inputs import InputPart
from bot.core.model import Signal, SourceKind
from tests.e2e.kubernetes.conftest import Emulator, validate_kuberay, wait_for
from tests.support import kube_objects as o
from tests.support.daemon_process import wait_until

pytestmark = pytest.mark.kube

HUGE = (
    "0/64 nodes are available: 64 Insufficient nvidia.com/gpu. "
    + "preemption: 0/64 nodes are available: 64 No preemption victims found for incoming pod. "
    * 4000
)


def create_raw(emulator: Emulator, plural: str, namespace: str | None, body: Any) -> None:
    """POST a body as is: not every shape survives the typed client's models."""
    scope = f"/namespaces/{namespace}" if namespace else ""
    prefix = "/apis/ray.io/v1" if plural == "rayjobs" else "/api/v1"
    response = emulator.api_client.call_api(
        "POST",
        f"{emulator.url}{prefix}{scope}/{plural}",
        header_params={"Content-Type": "application/json"},
        body=body,
    )
    assert response.status == 200


def install(emulator: Emulator) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod"}
    create_raw(
        emulator,
        "pods",
        o.NS,
        {
            **pod,
            "metadata": {"name": "weird-1", "namespace": o.NS},
            "spec": ["x"],
            "status": {"containerStatuses": "oops"},
        },
    )
    create_raw(
        emulator,
        "pods",
        o.NS,
        {
            **pod,
            "metadata": {"name": "weird-2", "namespace": o.NS, "labels": ["not", "a", "map"]},
            "status": {
                "phase": 7,
                "conditions": {"type": "PodScheduled"},
                "containerStatuses": [
                    "x",
                    None,
                    {"name": None, "lastState": {"terminated": "OOMKilled"}},
                    {
                        "name": "main",
                        "restartCount": "two",
                        "lastState": {
                            "terminated": {
                                "reason": "OOMKilled",
                                "exitCode": "137",
                                "finishedAt": "not a time",
                            }
                        },
                    },
                ],
            },
        },
    )
    create_raw(
        emulator,
        "events",
        o.NS,
        o.event("huge.1", "Pod", "weird-1", "FailedScheduling", HUGE),
    )
    create_raw(
        emulator,
        "events",
        o.NS,
        {
            **o.event("frob.1", "FrobnicatorSet", "frob-a", "Frobbed", "frobnication failed"),
            "count": "lots",
            "lastTimestamp": "yesterday",
        },
    )
    create_raw(
        emulator,
        "events",
        o.NS,
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "orphan.1", "namespace": o.NS},
            "reason": "BackOff",
        },
    )
    create_raw(
        emulator,
        "nodes",
        None,
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "odd-node"},
            "spec": {"taints": "none"},
            "status": {"conditions": [{"status": "False"}, {"type": "Ready", "status": "Unknown"}]},
        },
    )
    rayjob = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "bare", "namespace": o.NS},
        "spec": {},
    }
    validate_kuberay(rayjob)  # odd but valid: KubeRay's schema requires nothing here
    emulator.create(rayjob)


def script_pod_watch(emulator: Emulator) -> None:
    """The first pod watch sends an unknown event type, an object that is not one and a
    pod without a name (an emulator cannot store one), then 410 Gone: the source relists
    everything it has already seen."""
    pods = kmock.resource("v1/pods")

    def script(k: Any) -> None:
        k[kmock.action.WATCH, pods] << iter(
            [
                {"type": "WEIRD", "object": {"metadata": {"name": "weird-1"}}},
                {"type": "ADDED", "object": "not an object"},
                {
                    "type": "ADDED",
                    "object": {"kind": "Pod", "metadata": {}, "status": {"reason": "Evicted"}},
                },
                {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "gone"}},
            ]
        )

    emulator.run(script)


def test_malformed_objects_are_read_reported_once_and_never_stop_the_watch(
    kuberay: Emulator, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    install(kuberay)
    script_pod_watch(kuberay)
    items: list[InputPart] = []
    source = KubernetesSource(
        kuberay.api,
        KubeSourceConfig(namespaces=(o.NS,), backoff_initial=0.01, backoff_max=0.05),
    )
    with caplog.at_level(logging.WARNING, logger="bot.adapters.kubernetes.source"):
        source.start(items.append)
        try:
            assert wait_until(source.synced, 5)
            wait_for(lambda: source.status()["watches"]["Pod@ml-train"]["gone"] == 1, what="410")
            wait_for(lambda: source.status()["watches"]["Pod@ml-train"]["state"] == "watching")
            # something valid still flows afterwards
            kuberay.api.patch(PODS, o.NS, "weird-1", {"status": {"reason": "Evicted"}})
            wait_for(
                lambda: any(
                    isinstance(i, Signal)
                    and i.obj
                    and i.obj.name == "weird-1"
                    and i.reason == "Evicted"
                    for i in items
                ),
                what="the valid update after the malformed ones",
            )
            assert source.healthy()
            status = source.status()
        finally:
            source.stop()

    malformed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("malformed")]
    assert len(malformed) == len(set(malformed))  # each once, through the relist too
    named = " | ".join(malformed)
    assert "Pod uid-" not in named
    for expected in (
        "Pod Pod/ml-train/weird-1: spec is a list",
        "status.containerStatuses is a str",
        "Pod Pod/ml-train/weird-2: status.conditions is a dict",
        "no metadata.name",
        "Event Event/ml-train/orphan.1: no involvedObject",
        "Node Node//odd-node: spec.taints is a str",
        "watch event WEIRD: unknown type",
        "no metadata; reading what it has",
    ):
        assert expected in named, expected
    assert status["malformed"] == len(malformed) == 7
    assert all(
        not w["last_error"] or "410" in w["last_error"] or "Gone" in w["last_error"]
        for w in status["watches"].values()
    )

    signals = [i for i in items if isinstance(i, Signal)]
    counted = Counter((s.source, str(s.obj), s.reason, s.text[:80]) for s in signals)
    assert max(counted.values()) == 1  # nothing reported twice

    oom = [s for s in signals if s.reason == "OOMKilled"]
    assert [s.obj.name if s.obj else "" for s in oom] == ["weird-2"]
    assert oom[0].fields["exit_code"] == "137"
    assert oom[0].time is None  # "not a time" is no time

    huge = next(s for s in signals if s.reason == "FailedScheduling")
    assert len(huge.text) < MAX_TEXT + 100
    assert huge.text.endswith("more characters cut by pitcrew]")
    diagnosis = engine.diagnose([huge])
    assert diagnosis.primary is not None
    assert diagnosis.primary.category == "failed_scheduling_insufficient"

    frob = next(s for s in signals if s.reason == "Frobbed")
    assert frob.obj is not None
    assert frob.obj.kind == "FrobnicatorSet"
    assert frob.workload is None
    assert frob.fields["count"] == "lots"
    assert frob.time is not None  # "yesterday" is no time: the firstTimestamp is used
    assert frob.time.isoformat() == "2025-11-03T10:20:02+00:00"
    orphan = next(s for s in signals if s.reason == "BackOff")
    assert orphan.obj is None
    node = [s for s in signals if s.source is SourceKind.NODE_STATUS]
    assert [s.reason for s in node] == ["NotReady"]
    rayjob = next(s for s in signals if s.source is SourceKind.RAY_JOB)
    assert rayjob.obj is not None
    assert rayjob.obj.name == "bare"

    # the objects are all still there, untouched by pitcrew
    assert kuberay.api.get(RAY_JOBS, o.NS, "bare") is not None
    assert kuberay.api.get(NODES, None, "odd-node") is not None
    assert len(list(kuberay.api.list_all(EVENTS, o.NS))) == 3
