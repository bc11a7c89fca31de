"""Short names of where an evidence line came from, as a card shows them.

Why this exists: an evidence line's origin is whatever its source called it: a
file path as given (absolute in a pod or the demo), `namespace/pod/name`, a
pod's `[container] previous log`, a Ray dashboard URL, `rayjob.yaml (… message)`.
On a card the reader needs which file or which object, in a few characters:
`driver.log:44`, `pod/…-9zq4f`, never a directory. Pure.
"""

from __future__ import annotations

import re

# The kinds an origin `namespace/kind/name` names (ObjectRef's text).
_KINDS = frozenset(
    {
        "pod",
        "event",
        "node",
        "rayjob",
        "raycluster",
        "rayservice",
        "job",
        "deployment",
        "statefulset",
        "replicaset",
        "rayjobsubmission",
        "rayactor",
    }
)
LONG_NAME = 24
_SUFFIX = re.compile(r" (\[.*)$")


def short_name(name: str) -> str:
    """A long generated name by its distinctive tail: `…-9zq4f`."""
    if len(name) <= LONG_NAME or "-" not in name:
        return name
    return "…-" + name.rsplit("-", 1)[1]


def _short_token(token: str) -> str:
    if "://" in token:
        tail = [part for part in token.split("://", 1)[1].split("/")[1:] if part]
        return "/".join(tail[-2:]) or token
    parts = token.strip("/").split("/")
    if len(parts) >= 2 and parts[-2].lower() in _KINDS:
        return f"{parts[-2].lower()}/{short_name(parts[-1])}"
    return parts[-1] if parts[-1] else token


def short_source(origin: str) -> str:
    """`/var/log/ray/driver.log` -> `driver.log`; `ml-train/pod/verl-…-9zq4f [ray-worker]
    previous log` -> `pod/…-9zq4f [ray-worker] previous log`; `rayjob.yaml (… message)` ->
    `rayjob.yaml`."""
    origin = origin.strip()
    if not origin:
        return ""
    token = origin.partition(" (")[0]
    suffix = _SUFFIX.search(token)
    kept = suffix.group(1) if suffix else ""
    token = token[: suffix.start()] if suffix else token
    short = _short_token(token)
    return f"{short} {kept}" if kept else short
