"""A dead actor makes one `ray_actor` signal, whether the Ray source polled it from the
State API or someone pasted `ray list actors --detail --format json`.

The records are Ray 2.60's CLI output (tests/data/inputs/ray-list-actors-detail-json.txt);
the source reads the same `ActorState` records from `GET /api/v0/actors?detail=true`. The
actor's Ray namespace is a field: were it the object's namespace, the pasted actor would
key to an incident in a "Kubernetes namespace" named after a Ray namespace, the polled
one to the cluster's namespace.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from bot.adapters.ray.client import RayClusterConfig
from bot.adapters.ray.signals import context_fields, death_parts
from bot.core.incidents.workloads import workload_keys
from bot.core.inputs.ray_actors import ActorInfo
from bot.core.inputs.segment import split_text
from bot.core.model import Signal, SourceKind, frozen_map

PASTE = Path(__file__).parents[2] / "data" / "inputs" / "ray-list-actors-detail-json.txt"
CONFIG = RayClusterConfig("prod", "http://127.0.0.1:8265", k8s_namespace="ml")


def records() -> list[dict[str, object]]:
    _, _, body = PASTE.read_text(encoding="utf-8").partition("\n")  # after the `$ ray list` line
    found: list[dict[str, object]] = json.loads(body)
    return found


def polled(record: dict[str, object]) -> list[Signal]:
    context = context_fields({}, CONFIG, ())
    parts = death_parts([ActorInfo.parse(record)], CONFIG, context, "ray://prod/jobs/x", None)
    return [p for p in parts if isinstance(p, Signal)]


def pasted(record: dict[str, object]) -> list[Signal]:
    parts = split_text(json.dumps([record]), "paste")
    return [p for p in parts if isinstance(p, Signal) and p.source is SourceKind.RAY_ACTOR]


def in_context(signal: Signal, context: Mapping[str, str]) -> Signal:
    """The pasted signal with where it came from, as `/ingest` and `/pitcrew diagnose`
    complete its findings (`Context.apply`: what the evidence says itself wins)."""
    return dataclasses.replace(signal, fields=frozen_map({**context, **signal.fields}))


@pytest.mark.parametrize(
    ("actor_id", "key"),
    [
        ("0b7fa4c5ef1a2b3c4d5e6f7a02000000", "prod/ml/RayActor/qwAKMvWorkerDict_0:0"),
        ("1c8e5d6f7a8b9c0d1e2f3a4b02000000", "prod/ml/RayActor/1c8e5d6f7a8b9c0d1e2f3a4b02000000"),
        ("3e0a7f8b9c0d1e2f3a4b5c6d02000000", "prod/ml/RayActor/3e0a7f8b9c0d1e2f3a4b5c6d02000000"),
    ],
)
def test_a_polled_and_a_pasted_actor_are_one_signal_with_one_key(actor_id: str, key: str) -> None:
    [record] = [r for r in records() if r["actor_id"] == actor_id]
    [from_source] = polled(record)
    [from_paste] = pasted(record)
    assert from_source.obj == from_paste.obj
    assert (from_source.reason, from_source.text) == (from_paste.reason, from_paste.text)
    where = {"cluster", "namespace", "ray_cluster", "k8s_cluster"}
    assert {k: v for k, v in from_source.fields.items() if k not in where} == dict(
        from_paste.fields
    )
    assert from_paste.fields["ray_namespace"] == record["ray_namespace"]
    assert workload_keys(from_source)[0] == key
    assert workload_keys(in_context(from_paste, {"cluster": "prod", "namespace": "ml"}))[0] == key
