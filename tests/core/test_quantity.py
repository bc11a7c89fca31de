"""Memory quantities scale like a person would."""

from __future__ import annotations

import pytest

from bot.core.quantity import QuantityError, bump, format_bytes, parse_bytes


@pytest.mark.parametrize(
    ("quantity", "size"),
    [
        ("16Gi", 16 * 2**30),
        ("500M", 500 * 10**6),
        ("1073741824", 2**30),
        ("1.5Gi", 3 * 2**29),
        ("512Mi", 2**29),
    ],
)
def test_parse_bytes(quantity: str, size: int) -> None:
    assert parse_bytes(quantity) == size


@pytest.mark.parametrize(
    ("current", "factor", "cap", "result"),
    [
        ("16Gi", 1.5, "512Gi", "24Gi"),
        ("20Gi", 1.5, "512Gi", "30Gi"),
        ("10G", 1.5, "512Gi", "14Gi"),
        ("300Mi", 1.5, "512Gi", "450Mi"),
        ("200Gi", 2.0, "256Gi", "256Gi"),
    ],
)
def test_bump_rounds_up_and_respects_the_cap(
    current: str, factor: float, cap: str, result: str
) -> None:
    assert bump(current, factor, cap) == result


@pytest.mark.parametrize("bad", ["sixteen", "16GB", "-1Gi", ""])
def test_bad_quantities_are_named(bad: str) -> None:
    with pytest.raises(QuantityError, match="not a memory quantity"):
        parse_bytes(bad)


def test_format_bytes_prefers_the_largest_exact_unit() -> None:
    assert format_bytes(3 * 2**40) == "3Ti"
    assert format_bytes(2**29) == "512Mi"
    assert format_bytes(1000) == "1Mi"
