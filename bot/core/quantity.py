"""Kubernetes memory quantities: parse, scale and print them the way users write them."""

from __future__ import annotations

import math
import re

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QUANTITY = re.compile(r"^(?P<number>\d+(?:\.\d+)?)(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|)$")


class QuantityError(ValueError):
    pass


def parse_bytes(quantity: str) -> int:
    """Bytes in a memory quantity such as `16Gi`, `500M` or `1073741824`."""
    match = _QUANTITY.match(quantity.strip())
    if match is None:
        raise QuantityError(f"not a memory quantity: {quantity!r}")
    suffix = match["suffix"]
    scale = _BINARY.get(suffix) or _DECIMAL[suffix]
    return math.ceil(float(match["number"]) * scale)


def format_bytes(size: int) -> str:
    """The shortest exact binary form: 25769803776 -> `24Gi`; falls back to `Mi`, rounded up."""
    for suffix in ("Ti", "Gi", "Mi"):
        unit = _BINARY[suffix]
        if size % unit == 0:
            return f"{size // unit}{suffix}"
    return f"{math.ceil(size / _BINARY['Mi'])}Mi"


def bump(quantity: str, factor: float, cap: str) -> str:
    """`quantity` times `factor`, rounded up to a whole GiB (or MiB below 1Gi), at most `cap`."""
    if factor <= 1:
        raise QuantityError(f"factor must be above 1, got {factor}")
    current = parse_bytes(quantity)
    wanted = current * factor
    step = _BINARY["Gi"] if wanted >= _BINARY["Gi"] else _BINARY["Mi"]
    rounded = math.ceil(wanted / step) * step
    return format_bytes(min(rounded, parse_bytes(cap)))
