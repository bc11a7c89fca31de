"""Signals written out as objects (`apiVersion: pitcrew.dev/v1`, `kind: Signal`).

Some signals come only from live sources (a stale detached actor from the Ray
State API, an unreachable dashboard); written this way they can be pasted into
`pitcrew diagnose`, sent to a daemon's /ingest, and used in playbook examples.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from bot.core.inputs import InputPart
from bot.core.inputs.values import as_text
from bot.core.model import ObjectRef, Signal, SourceKind, frozen_map

log = logging.getLogger(__name__)

API_VERSION = "pitcrew.dev/v1"


def signal_parts(obj: Mapping[str, Any], origin: str) -> Sequence[InputPart]:
    """One Signal, or nothing (logged) when the source is not one pitcrew knows."""
    if as_text(obj.get("apiVersion")) != API_VERSION:
        return ()
    try:
        source = SourceKind(as_text(obj.get("source")))
    except ValueError:
        log.info("%s: a Signal with unknown source %r is ignored", origin, obj.get("source"))
        return ()
    fields = obj.get("fields")
    values = (
        {str(k): str(v) for k, v in fields.items() if v is not None}
        if isinstance(fields, Mapping)
        else {}
    )
    return (
        Signal(
            source=source,
            text=as_text(obj.get("text")),
            reason=as_text(obj.get("reason")),
            fields=frozen_map(values),
            obj=_ref(obj.get("object")),
            workload=_ref(obj.get("workload")),
            cluster=as_text(obj.get("cluster")),
            origin=origin,
        ),
    )


def _ref(value: Any) -> ObjectRef | None:
    if not isinstance(value, Mapping) or not as_text(value.get("name")):
        return None
    return ObjectRef(
        as_text(value.get("kind")) or "Object",
        as_text(value.get("name")),
        as_text(value.get("namespace")),
    )
