"""Every model value round-trips through JSON, fields added later need no codec change,
times stay timezone-aware UTC, and bad data is refused with where it is wrong."""

from __future__ import annotations

import dataclasses
import inspect
import json
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from enum import Enum, StrEnum
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import pytest

from bot.core import model
from bot.core.codec import (
    CodecError,
    decode_time,
    dumps,
    encode_time,
    from_jsonable,
    loads,
    to_jsonable,
)
from bot.core.model import (
    ActionOffer,
    Diagnosis,
    Evidence,
    Finding,
    Incident,
    Notification,
    NotificationKind,
    ObjectRef,
    Proposal,
    ProposalState,
    RankedFinding,
    Report,
    ReportAction,
    Role,
    Severity,
    SourceKind,
    Transition,
)
from bot.core.taxonomy import Category

T0 = datetime(2025, 11, 3, 10, 13, 50, 123456, tzinfo=UTC)

# -- samples built from the type hints, so new model fields and classes are covered -------


def sample(tp: Any, name: str) -> Any:
    """A value of type `tp` that differs from any field default."""
    origin = get_origin(tp)
    if tp is Any:
        return {"nested": [1, "two", None, True, 2.5], "empty": {}}
    if origin is Union or origin is types.UnionType:
        return sample(next(a for a in get_args(tp) if a is not type(None)), name)
    if origin is tuple:
        item = get_args(tp)[0]
        return (sample(item, f"{name}0"), sample(item, f"{name}1"))
    if isinstance(origin, type) and issubclass(origin, Mapping):
        key_type, value_type = get_args(tp)
        key = sample(key_type, f"{name}-key")
        return types.MappingProxyType({key: sample(value_type, f"{name}-value")})
    if dataclasses.is_dataclass(tp):
        return sample_of(tp)
    if isinstance(tp, type) and issubclass(tp, Enum):
        return list(tp)[-1]
    return _SCALARS[tp](name)


_SCALARS: dict[Any, Any] = {
    str: lambda name: f"{name} <&> \u00e9",
    bool: lambda name: True,
    int: lambda name: 7,
    float: lambda name: 2.5,
    datetime: lambda name: T0,
}


def sample_of(cls: Any) -> Any:
    hints = get_type_hints(cls)
    return cls(**{f.name: sample(hints[f.name], f.name) for f in dataclasses.fields(cls) if f.init})


MODEL_CLASSES = sorted(
    (
        obj
        for obj in vars(model).values()
        if inspect.isclass(obj)
        and dataclasses.is_dataclass(obj)
        and obj.__module__ == model.__name__
    ),
    key=lambda cls: cls.__name__,
)


def test_every_model_value_type_is_covered() -> None:
    names = {cls.__name__ for cls in MODEL_CLASSES}
    assert names >= {
        "ActionOffer",
        "Diagnosis",
        "Evidence",
        "Finding",
        "Incident",
        "LedgerEntry",
        "Notification",
        "ObjectRef",
        "Proposal",
        "RankedFinding",
        "Report",
        "ReportAction",
        "Signal",
        "Silence",
        "Transition",
    }


@pytest.mark.parametrize("cls", MODEL_CLASSES, ids=lambda cls: cls.__name__)
def test_model_value_round_trips_with_every_field_set(cls: Any) -> None:
    value = sample_of(cls)
    text = dumps(value)
    assert json.loads(text) == to_jsonable(value)
    back = loads(cls, text)
    assert back == value
    assert type(back) is cls


@pytest.mark.parametrize("cls", MODEL_CLASSES, ids=lambda cls: cls.__name__)
def test_model_value_round_trips_with_defaults(cls: Any) -> None:
    hints = get_type_hints(cls)
    required = {
        f.name: sample(hints[f.name], f.name)
        for f in dataclasses.fields(cls)
        if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    value = cls(**required)
    assert loads(cls, dumps(value)) == value


@pytest.mark.parametrize("cls", MODEL_CLASSES, ids=lambda cls: cls.__name__)
def test_decoded_mappings_are_read_only(cls: Any) -> None:
    back = loads(cls, dumps(sample_of(cls)))
    hints = get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if get_origin(hints[f.name]) is Mapping:
            assert isinstance(getattr(back, f.name), types.MappingProxyType), f.name


# -- realistic values with exact JSON ------------------------------------------------------

OOM = Finding(
    playbook="pod-oom-killed",
    category=Category.POD_OOM_KILLED,
    severity=Severity.CRITICAL,
    title="Worker pod OOMKilled",
    signature="oomkilled",
    source=SourceKind.POD_STATUS,
    captures=types.MappingProxyType({"container": "ray-worker", "limit": "16Gi"}),
    evidence=(
        Evidence("Last State: Terminated, Reason: OOMKilled", SourceKind.POD_STATUS, "pod", 3),
    ),
    count=2,
    obj=ObjectRef("Pod", "verl-worker-0", "ml"),
    workload=ObjectRef("RayJob", "verl", "ml"),
    time=T0,
)
CLASH = dataclasses.replace(
    OOM,
    playbook="named-actor-conflict",
    category=Category.NAMED_ACTOR_CONFLICT,
    severity=Severity.ERROR,
    source=SourceKind.DRIVER_LOG,
    captures=types.MappingProxyType({"name": "qwAKMv_register_center", "ns": "None"}),
    evidence=(),
    count=1,
    weak=True,
    time=None,
)
INCIDENT = Incident(
    id="inc-1",
    key="ml/rayjob/verl",
    opened_at=T0,
    updated_at=T0 + timedelta(minutes=2),
    diagnosis=Diagnosis(
        findings=(RankedFinding(OOM, Role.PRIMARY), RankedFinding(CLASH, Role.SECONDARY)),
        actions=(
            ActionOffer(
                "k8s.bump_memory",
                types.MappingProxyType(
                    {"factor": 1.5, "limits": {"memory": "24Gi"}, "groups": ["w"]}
                ),
                offered=True,
                reason="OOMKilled evidence",
                playbook="pod-oom-killed",
                preview="16Gi -> 24Gi",
            ),
        ),
        text="The worker pod was OOMKilled.",
    ),
    workload=ObjectRef("RayJob", "verl", "ml"),
    cluster="prod",
    namespace="ml",
    counts=types.MappingProxyType({"pod-oom-killed": 2}),
)


def test_incident_round_trips_and_keeps_its_primary() -> None:
    back = loads(Incident, dumps(INCIDENT))
    assert back == INCIDENT
    assert back.diagnosis.primary == OOM
    assert back.diagnosis.actions[0].params["limits"] == {"memory": "24Gi"}
    assert back.diagnosis.findings[0].finding.category is Category.POD_OOM_KILLED


def test_finding_json_is_exact() -> None:
    assert to_jsonable(OOM) == {
        "playbook": "pod-oom-killed",
        "category": "pod_oom_killed",
        "severity": "critical",
        "title": "Worker pod OOMKilled",
        "signature": "oomkilled",
        "source": "pod_status",
        "captures": {"container": "ray-worker", "limit": "16Gi"},
        "evidence": [
            {
                "text": "Last State: Terminated, Reason: OOMKilled",
                "source": "pod_status",
                "origin": "pod",
                "line": 3,
            }
        ],
        "count": 2,
        "weak": False,
        "obj": {"kind": "Pod", "name": "verl-worker-0", "namespace": "ml"},
        "workload": {"kind": "RayJob", "name": "verl", "namespace": "ml"},
        "fields": {},
        "time": "2025-11-03T10:13:50.123456+00:00",
        "reason": "",
        "explained_by": [],
    }


def test_notification_with_report_round_trips() -> None:
    note = Notification(
        incident_id="inc-1",
        kind=NotificationKind.POST,
        channel="#ml-alerts",
        report=Report(
            title="RayJob ml/verl failed",
            severity=Severity.CRITICAL,
            status="open",
            where=types.MappingProxyType({"namespace": "ml", "rayjob": "verl"}),
            primary="pod_oom_killed",
            secondary=("named_actor_conflict",),
            evidence=("OOMKilled",),
            diagnosis="The worker pod was OOMKilled.",
            actions=(
                ReportAction("p-1", "k8s.bump_memory", "16Gi -> 24Gi", ProposalState.OFFERED),
            ),
        ),
        created_at=T0,
    )
    assert loads(Notification, dumps(note)) == note


def test_proposal_history_round_trips_in_order() -> None:
    proposal = Proposal(
        id="p-1",
        incident_id="inc-1",
        action="k8s.bump_memory",
        params=types.MappingProxyType({"factor": 1.5}),
        preview="16Gi -> 24Gi",
        state=ProposalState.APPROVED,
        created_at=T0,
        expires_at=T0 + timedelta(hours=1),
        target=ObjectRef("RayCluster", "verl-raycluster", "ml"),
        preconditions=("pod still OOMKilled",),
        history=(
            Transition(ProposalState.OFFERED, T0),
            Transition(ProposalState.APPROVED, T0 + timedelta(minutes=1), "U123", "looks right"),
        ),
    )
    back = loads(Proposal, dumps(proposal))
    assert back == proposal
    assert [t.to_state for t in back.history] == [ProposalState.OFFERED, ProposalState.APPROVED]


# -- times ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC), "2025-01-02T03:04:05.000000+00:00"),
        (datetime(2025, 1, 2, 3, 4, 5, 7, tzinfo=UTC), "2025-01-02T03:04:05.000007+00:00"),
        (
            datetime(2025, 1, 2, 5, 4, 5, tzinfo=timezone(timedelta(hours=2))),
            "2025-01-02T03:04:05.000000+00:00",
        ),
        (
            datetime(2025, 1, 1, 22, 0, tzinfo=timezone(timedelta(hours=-5))),
            "2025-01-02T03:00:00.000000+00:00",
        ),
    ],
)
def test_times_are_encoded_in_utc(value: datetime, encoded: str) -> None:
    assert encode_time(value) == encoded
    back = decode_time(encoded)
    assert back == value
    assert back.tzinfo is UTC


def test_naive_time_is_refused_with_its_place() -> None:
    value = dataclasses.replace(OOM, time=datetime(2025, 1, 1))
    with pytest.raises(CodecError) as caught:
        dumps(value)
    assert str(caught.value) == (
        "Finding.time: naive datetime 2025-01-01T00:00:00; pass a timezone-aware time"
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("2025-01-01T00:00:00", "t: time '2025-01-01T00:00:00' has no timezone"),
        ("yesterday", "t: expected an ISO 8601 time, got 'yesterday'"),
        (12, "t: expected an ISO 8601 time, got 12"),
    ],
)
def test_bad_times_are_refused(data: object, message: str) -> None:
    with pytest.raises(CodecError) as caught:
        decode_time(data, "t")
    assert str(caught.value) == message


# -- fields added later --------------------------------------------------------------------


class Colour(StrEnum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True, slots=True)
class Before:
    id: str
    at: datetime


@dataclass(frozen=True, slots=True)
class After:
    """`Before` after a release added fields of every supported kind."""

    id: str
    at: datetime
    seen_at: datetime | None = None
    colour: Colour = Colour.RED
    tags: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=lambda: types.MappingProxyType({}))
    by_colour: Mapping[Colour, int] = field(default_factory=lambda: types.MappingProxyType({}))
    by_number: dict[int, str] = field(default_factory=dict)
    refs: tuple[ObjectRef, ...] = ()
    pair: tuple[str, int] = ("", 0)
    wait: timedelta = timedelta(0)
    mode: Literal["fast", "slow"] = "fast"
    either: int | str = 0
    unique: frozenset[str] = frozenset()
    extra: Any = None


def test_json_written_before_a_field_existed_decodes_to_its_default() -> None:
    old = dumps(Before("x", T0))
    assert loads(After, old) == After("x", T0)


def test_added_fields_of_every_kind_round_trip() -> None:
    value = After(
        id="x",
        at=T0,
        seen_at=T0 + timedelta(seconds=1),
        colour=Colour.BLUE,
        tags=("a", "b"),
        labels=types.MappingProxyType({"team": "ml"}),
        by_colour=types.MappingProxyType({Colour.BLUE: 2}),
        by_number={3: "three"},
        refs=(ObjectRef("Pod", "p", "ns"),),
        pair=("n", 5),
        wait=timedelta(minutes=10, microseconds=500),
        mode="slow",
        either="text",
        unique=frozenset({"b", "a"}),
        extra={"k": [1, 2]},
    )
    data = to_jsonable(value)
    assert data["by_colour"] == {"blue": 2}
    assert data["by_number"] == {"3": "three"}
    assert data["unique"] == ["a", "b"]
    assert data["wait"] == 600.0005
    assert from_jsonable(After, json.loads(json.dumps(data))) == value


def test_fields_removed_later_are_ignored() -> None:
    newer = dumps(After("x", T0, colour=Colour.BLUE))
    assert loads(Before, newer) == Before("x", T0)


# -- refusals name the place ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "data", "message"),
    [
        (ObjectRef, {"kind": "Pod"}, "ObjectRef: missing required field 'name'"),
        (ObjectRef, {"kind": "Pod", "name": 3}, "ObjectRef.name: expected str, got 3"),
        (ObjectRef, ["Pod"], "ObjectRef: expected an object for ObjectRef, got ['Pod']"),
        (Evidence, {"text": "x", "source": "tty"}, "Evidence.source: 'tty' is not a SourceKind"),
        (
            Evidence,
            {"text": "x", "source": "pod_status", "line": True},
            "Evidence.line: expected int, got True",
        ),
        (
            Transition,
            {"to_state": "approved", "at": "2025-01-01T00:00:00+00:00", "from_state": "maybe"},
            "Transition.from_state: 'maybe' is not a ProposalState",
        ),
        (
            Diagnosis,
            {"findings": [{"role": "primary", "finding": {}}], "actions": [], "text": ""},
            "Diagnosis.findings[0].finding: missing required field 'playbook'",
        ),
        (
            RankedFinding,
            {"role": "primary", "finding": dict(to_jsonable(OOM), count="2")},
            "RankedFinding.finding.count: expected int, got '2'",
        ),
        (Report, {"where": {}}, "Report: missing required field 'title'"),
        (
            After,
            {"id": "x", "at": "2025-01-01T00:00:00+00:00", "pair": ["a"]},
            "After.pair: expected 2 items, got 1",
        ),
        (
            After,
            {"id": "x", "at": "2025-01-01T00:00:00+00:00", "mode": "medium"},
            "After.mode: expected one of ('fast', 'slow'), got 'medium'",
        ),
        (
            After,
            {"id": "x", "at": "2025-01-01T00:00:00+00:00", "either": 1.5},
            "After.either: 1.5 matches none of int | str",
        ),
        (
            After,
            {"id": "x", "at": "2025-01-01T00:00:00+00:00", "tags": "ab"},
            "After.tags: expected an array, got 'ab'",
        ),
        (
            After,
            {"id": "x", "at": "2025-01-01T00:00:00+00:00", "labels": []},
            "After.labels: expected an object, got []",
        ),
        (
            After,
            {"id": "x", "at": "2025-01-01T00:00:00+00:00", "by_number": {"x": "y"}},
            "After.by_number: mapping key 'x' is not an int",
        ),
    ],
)
def test_bad_data_is_refused_with_its_place(cls: Any, data: object, message: str) -> None:
    with pytest.raises(CodecError) as caught:
        from_jsonable(cls, data)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            dataclasses.replace(OOM, captures=types.MappingProxyType({"x": object()})),
            "Finding.captures['x']: cannot encode a object",
        ),
        (
            After("x", T0, labels=types.MappingProxyType({(1, 2): "pair"})),  # type: ignore[dict-item]
            "After.labels: mapping key (1, 2) is not a string",
        ),
    ],
)
def test_unencodable_values_are_refused_with_their_place(value: object, message: str) -> None:
    with pytest.raises(CodecError) as caught:
        to_jsonable(value)
    assert str(caught.value) == message


def test_not_json_is_refused() -> None:
    with pytest.raises(CodecError, match=r"^ObjectRef: not JSON: "):
        loads(ObjectRef, "{")
