"""Turning what users paste or point at into signals and log streams.

`pitcrew diagnose` accepts plain logs, `kubectl describe` output, `kubectl get
events` tables, Kubernetes objects (JSON/YAML), Ray job info and `ray job
status` output, or a mix pasted together. Structured parts become `Signal`s;
log text stays bytes and is streamed to the classifier.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bot.core.model import ObjectRef, Signal, SourceKind


@dataclass(frozen=True)
class LogText:
    """Log text to scan, as byte chunks (possibly a one-shot stream)."""

    chunks: Iterable[bytes]
    source: SourceKind = SourceKind.DRIVER_LOG
    origin: str = ""
    obj: ObjectRef | None = None
    workload: ObjectRef | None = None


InputPart = Signal | LogText
