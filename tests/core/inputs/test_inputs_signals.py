"""pitcrew's own Signal objects can be pasted, ingested and used in playbook examples."""

from __future__ import annotations

import pytest

from bot.core.inputs import LogText
from bot.core.inputs.segment import split_text
from bot.core.model import ObjectRef, Signal, SourceKind

STALE = """\
apiVersion: pitcrew.dev/v1
kind: Signal
source: ray_actor
reason: StaleActor
cluster: local
text: Detached actor lock is ALIVE but its owner job 02000000 finished
object: {kind: RayActor, name: lock}
fields:
  actor_name: lock
  ray_namespace: rl-train
  owner_job_id: '02000000'
"""


def test_a_yaml_signal_becomes_that_signal() -> None:
    (signal,) = split_text(STALE, "paste")
    assert signal == Signal(
        source=SourceKind.RAY_ACTOR,
        text="Detached actor lock is ALIVE but its owner job 02000000 finished",
        reason="StaleActor",
        fields={"actor_name": "lock", "ray_namespace": "rl-train", "owner_job_id": "02000000"},
        obj=ObjectRef("RayActor", "lock"),
        cluster="local",
        origin="paste",
    )


def test_a_json_signal_with_a_workload() -> None:
    text = (
        '{"apiVersion": "pitcrew.dev/v1", "kind": "Signal", "source": "pod_status",'
        ' "reason": "OOMKilled", "fields": {"exit_code": 137},'
        ' "workload": {"kind": "RayCluster", "name": "rc", "namespace": "ml"}}'
    )
    (signal,) = split_text(text, "x")
    assert isinstance(signal, Signal)
    assert (signal.source, signal.reason, dict(signal.fields)) == (
        SourceKind.POD_STATUS,
        "OOMKilled",
        {"exit_code": "137"},
    )
    assert signal.workload == ObjectRef("RayCluster", "rc", "ml")


@pytest.mark.parametrize(
    "text",
    [
        STALE.replace("source: ray_actor", "source: carrier_pigeon"),
        STALE.replace("apiVersion: pitcrew.dev/v1", "apiVersion: example.com/v1"),
    ],
)
def test_an_unknown_source_or_api_gives_no_signal(text: str) -> None:
    assert [p for p in split_text(text, "x") if not isinstance(p, LogText)] == []
