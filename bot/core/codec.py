"""Model values <-> JSON-able data, derived from the dataclasses themselves.

The store keeps each model value (Incident, Proposal, Notification …) as JSON.
Writing one encoder per class would break every time a field is added, so this
module walks `dataclasses.fields` and the resolved type hints instead: a field
added to a model value (with a default) round-trips with no change here, and
JSON written before the field existed still decodes, to the field's default.

Conventions: times are ISO 8601 strings, always timezone-aware and in UTC (a
naive time is refused, not guessed); enums are their values; mappings are JSON
objects and decode to read-only mappings; tuples are arrays; durations are
seconds. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any, Literal, TypeVar, Union, cast, get_args, get_origin, get_type_hints

T = TypeVar("T")

JSON_SCALARS = (str, int, float, bool, type(None))


class CodecError(ValueError):
    """A value cannot be encoded, or data does not decode to the declared type.

    The message starts with where in the value the problem is, e.g.
    `Proposal.history[0].at: ...`."""


def encode_time(value: datetime, where: str = "time") -> str:
    """ISO 8601 in UTC with microseconds, so stored times also sort as text."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise CodecError(f"{where}: naive datetime {value.isoformat()}; pass a timezone-aware time")
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def decode_time(data: object, where: str = "time") -> datetime:
    if not isinstance(data, str):
        raise CodecError(f"{where}: expected an ISO 8601 time, got {data!r}")
    try:
        value = datetime.fromisoformat(data)
    except ValueError as exc:
        raise CodecError(f"{where}: expected an ISO 8601 time, got {data!r}") from exc
    if value.tzinfo is None:
        raise CodecError(f"{where}: time {data!r} has no timezone")
    return value.astimezone(UTC)


def to_jsonable(value: object, where: str = "") -> Any:
    """Plain dicts, lists, strings and numbers that `json.dumps` accepts."""
    where = where or type(value).__name__
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: to_jsonable(getattr(value, f.name), f"{where}.{f.name}")
            for f in _init_fields(type(value))
        }
    if isinstance(value, Enum):
        return to_jsonable(value.value, where)
    if isinstance(value, datetime):
        return encode_time(value, where)
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, JSON_SCALARS):
        return value
    if isinstance(value, Mapping):
        return {_encode_key(k, where): to_jsonable(v, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, frozenset | set):
        return sorted(to_jsonable(item, f"{where}[]") for item in value)
    raise CodecError(f"{where}: cannot encode a {type(value).__name__}")


def from_jsonable(cls: type[T], data: object, where: str = "") -> T:
    """Rebuild a value of `cls` (a dataclass or any supported type) from `to_jsonable` output."""
    return cast(T, _decode(cls, data, where or getattr(cls, "__name__", str(cls))))


def dumps(value: object) -> str:
    """Compact, key-sorted JSON text of a model value."""
    return json.dumps(to_jsonable(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def loads(cls: type[T], text: str) -> T:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CodecError(f"{cls.__name__}: not JSON: {exc}") from exc
    return from_jsonable(cls, data)


def _encode_key(key: object, where: str) -> str:
    if isinstance(key, Enum):
        key = key.value
    if isinstance(key, str):
        return key
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key)
    raise CodecError(f"{where}: mapping key {key!r} is not a string")


@functools.cache
def _init_fields(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    return tuple(f for f in dataclasses.fields(cls) if f.init)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _decode(tp: Any, data: object, where: str) -> object:
    if tp is Any:
        return data
    origin = get_origin(tp)
    if origin is None:
        return _decode_plain(tp, data, where)
    if origin is Union or origin is types.UnionType:
        return _decode_union(tp, data, where)
    if origin is Literal:
        if data not in get_args(tp):
            raise CodecError(f"{where}: expected one of {get_args(tp)!r}, got {data!r}")
        return data
    if isinstance(origin, type) and issubclass(origin, Mapping):
        return _decode_mapping(tp, origin, data, where)
    if origin in (tuple, list, frozenset, set):
        return _decode_sequence(tp, origin, data, where)
    raise CodecError(f"{where}: unsupported type {tp!r}")


def _decode_plain(tp: Any, data: object, where: str) -> object:
    if not isinstance(tp, type):
        raise CodecError(f"{where}: unsupported type {tp!r}")
    if dataclasses.is_dataclass(tp):
        return _decode_dataclass(tp, data, where)
    if issubclass(tp, Enum):
        try:
            return tp(data)
        except ValueError as exc:
            raise CodecError(f"{where}: {data!r} is not a {tp.__name__}") from exc
    if tp is datetime:
        return decode_time(data, where)
    if tp is timedelta:
        return timedelta(seconds=_expect(float, data, where))
    if tp in (tuple, list, dict) or issubclass(tp, Mapping):
        return _decode(_unparameterized(tp), data, where)
    return _expect(tp, data, where)


def _unparameterized(tp: type) -> Any:
    if tp is dict:
        return dict[str, Any]
    if issubclass(tp, Mapping):
        return Mapping[str, Any]
    return tuple[Any, ...] if tp is tuple else list[Any]


def _expect(tp: type, data: object, where: str) -> Any:
    """A JSON scalar of the declared type; ints are accepted where floats are declared."""
    if tp is float and isinstance(data, int) and not isinstance(data, bool):
        return float(data)
    if tp in (int, float) and isinstance(data, bool):
        raise CodecError(f"{where}: expected {tp.__name__}, got {data!r}")
    if tp in (str, int, float, bool, type(None)) and isinstance(data, tp):
        return data
    if tp in (str, int, float, bool, type(None)):
        raise CodecError(f"{where}: expected {tp.__name__}, got {data!r}")
    raise CodecError(f"{where}: unsupported type {tp.__name__}")


def _decode_dataclass(cls: type, data: object, where: str) -> object:
    if not isinstance(data, dict):
        raise CodecError(f"{where}: expected an object for {cls.__name__}, got {data!r}")
    hints = _hints(cls)
    values: dict[str, object] = {}
    for f in _init_fields(cls):
        if f.name in data:
            values[f.name] = _decode(hints[f.name], data[f.name], f"{where}.{f.name}")
        elif not _has_default(f):
            raise CodecError(f"{where}: missing required field {f.name!r}")
    return cls(**values)


def _has_default(f: dataclasses.Field[Any]) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


def _decode_union(tp: Any, data: object, where: str) -> object:
    arms = get_args(tp)
    if data is None and type(None) in arms:
        return None
    others = [arm for arm in arms if arm is not type(None)]
    if len(others) == 1:
        return _decode(others[0], data, where)
    for arm in others:
        try:
            return _decode(arm, data, where)
        except CodecError:
            continue
    raise CodecError(f"{where}: {data!r} matches none of {tp!r}")


def _decode_mapping(tp: Any, origin: type, data: object, where: str) -> object:
    if not isinstance(data, dict):
        raise CodecError(f"{where}: expected an object, got {data!r}")
    key_type, value_type = get_args(tp) or (str, Any)
    decoded = {
        _decode_key(key_type, key, where): _decode(value_type, value, f"{where}[{key!r}]")
        for key, value in data.items()
    }
    if origin is dict:
        return decoded
    return types.MappingProxyType(decoded)


def _decode_key(key_type: Any, key: str, where: str) -> object:
    if key_type in (str, Any):
        return key
    if key_type is int:
        try:
            return int(key)
        except ValueError as exc:
            raise CodecError(f"{where}: mapping key {key!r} is not an int") from exc
    return _decode(key_type, key, f"{where} key")


_SEQUENCE_BUILDERS: dict[type, Callable[[list[Any]], object]] = {
    tuple: tuple,
    list: list,
    frozenset: frozenset,
    set: set,
}


def _decode_sequence(tp: Any, origin: type, data: object, where: str) -> object:
    if not isinstance(data, list):
        raise CodecError(f"{where}: expected an array, got {data!r}")
    args = get_args(tp)
    if origin is tuple and args and args[-1] is not Ellipsis:
        if len(args) != len(data):
            raise CodecError(f"{where}: expected {len(args)} items, got {len(data)}")
        return tuple(
            _decode(a, d, f"{where}[{i}]") for i, (a, d) in enumerate(zip(args, data, strict=True))
        )
    item_type = args[0] if args else Any
    items = [_decode(item_type, item, f"{where}[{i}]") for i, item in enumerate(data)]
    return _SEQUENCE_BUILDERS[origin](items)
