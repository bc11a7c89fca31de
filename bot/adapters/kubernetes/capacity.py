"""Whether a pod template fits: node labels and allocatable, taints, ResourceQuotas.

Why this exists: an action is offered only when its change can run, so the fit of a
memory limit, a GPU count or a set of tolerations is judged from nodes and quotas as
values (read by the executors); the judgement and its one-line reasons live here,
pure and tested on their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bot.adapters.kubernetes.templates import escape, resolve
from bot.core import quantity
from bot.core.inputs.values import as_list, as_map, text_at

# Taints a GPU pool's own tolerations never need to cover (node conditions, roles).
_SYSTEM_TAINT_PREFIXES = ("node.kubernetes.io/", "node-role.kubernetes.io/")


def quantity_text(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return ""
    return str(value)


def same_bytes(a: str, b: str) -> bool:
    try:
        return quantity.parse_bytes(a) == quantity.parse_bytes(b)
    except quantity.QuantityError:
        return a == b


def gpu_count(value: Any) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def byte_delta(old: str, new: str) -> int:
    if not old or not new:
        return 0
    return quantity.parse_bytes(new) - quantity.parse_bytes(old)


def node_matches(node: Mapping[str, Any], selector: Mapping[str, Any]) -> bool:
    labels = as_map(resolve(node, "/metadata/labels"))
    return all(text_at(labels, key) == str(value) for key, value in selector.items())


def node_ready(node: Mapping[str, Any]) -> bool:
    for condition in as_list(resolve(node, "/status/conditions")):
        if text_at(condition, "type") == "Ready":
            return text_at(condition, "status") == "True"
    return False


def allocatable_bytes(node: Mapping[str, Any], resource: str) -> int:
    value = quantity_text(resolve(node, f"/status/allocatable/{escape(resource)}"))
    try:
        return quantity.parse_bytes(value) if value else 0
    except quantity.QuantityError:
        return 0


def quota_fits(quota: Mapping[str, Any], deltas: Mapping[str, int]) -> tuple[bool, str]:
    name = text_at(quota, "metadata", "name")
    hard = as_map(resolve(quota, "/status/hard")) or as_map(resolve(quota, "/spec/hard"))
    used = as_map(resolve(quota, "/status/used"))
    shown: list[str] = []
    for key, delta in deltas.items():
        if key not in hard or delta <= 0:
            continue
        try:
            limit = quantity.parse_bytes(quantity_text(hard[key]))
        except quantity.QuantityError:
            return False, f"quota {name}: cannot read {key} {hard[key]!r}"
        if key not in used:
            return False, f"quota {name} reports no {key} usage yet: cannot confirm it fits"
        try:
            now = quantity.parse_bytes(quantity_text(used[key]))
        except quantity.QuantityError:
            return False, f"quota {name}: cannot read used {key} {used[key]!r}"
        after = now + delta
        text = (
            f"quota {name} {key}: {quantity.format_bytes(now)} used + "
            f"{quantity.format_bytes(delta)} of {quantity.format_bytes(limit)}"
        )
        if after > limit:
            return False, f"{text} is over the quota"
        shown.append(text)
    return True, "; ".join(shown) or f"quota {name} does not limit memory"


def missing_tolerations(
    nodes: Sequence[Mapping[str, Any]],
    pod_spec: Mapping[str, Any],
    extra: Sequence[Mapping[str, str]],
) -> list[dict[str, str]]:
    """Tolerations the group needs on the pool and does not have yet."""
    existing = [as_map(t) for t in as_list(pod_spec.get("tolerations"))]
    wanted: list[dict[str, str]] = [dict(t) for t in extra]
    for node in nodes:
        for taint in as_list(resolve(node, "/spec/taints")):
            key, value, effect = (text_at(taint, k) for k in ("key", "value", "effect"))
            if not key or effect not in ("NoSchedule", "NoExecute"):
                continue
            if key.startswith(_SYSTEM_TAINT_PREFIXES):
                continue
            toleration = {"key": key, "operator": "Exists", "effect": effect}
            if value:
                toleration = {"key": key, "operator": "Equal", "value": value, "effect": effect}
            if toleration not in wanted:
                wanted.append(toleration)
    return [t for t in wanted if not any(tolerates(e, t) for e in existing)]


def tolerates(existing: Mapping[str, Any], wanted: Mapping[str, str]) -> bool:
    if text_at(existing, "effect") not in ("", wanted.get("effect", "")):
        return False
    if text_at(existing, "operator") == "Exists":
        return text_at(existing, "key") in ("", wanted.get("key", ""))
    return text_at(existing, "key") == wanted.get("key") and text_at(
        existing, "value"
    ) == wanted.get("value", "")


def toleration_text(t: Mapping[str, str]) -> str:
    value = f"={t['value']}" if t.get("value") else ""
    return f"{t.get('key', '')}{value}:{t.get('effect', '')} ({t.get('operator', 'Equal')})"


def selector_text(selector: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in sorted(selector.items())) + "}"
