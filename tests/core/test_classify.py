"""The classifier finds every signature once per log, wherever chunk borders fall,
with exact line numbers and captures, and keeps benign lines quiet."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bot.adapters.files import cache as user_cache
from bot.adapters.files.playbooks import load_library
from bot.core.diagnosis import classifier as classify
from bot.core.diagnosis.classifier import Classifier
from bot.core.diagnosis.prefilter import PatternCache
from bot.core.errors import PlaybookError
from bot.core.model import Signal, SourceKind
from tests.support.playbooks import playbook, write_library

LOG = b"""\
2025-11-03 10:13:50 INFO worker.py:1821 -- Connected to Ray cluster.
(TaskRunner pid=1234) Training step 10/500
(raylet) Spilled 2048 MiB, 12 objects, write throughput 512 MiB/s.
(TaskRunner pid=1234) ValueError: The name qwAKMv_register_center (namespace=None) is already taken.
RuntimeError: Version mismatch: The cluster was started with:
    Ray: 2.40.0
    Python: 3.10.14
This process on node 10.0.3.17 was started with:
    Ray: 2.41.0
    Python: 3.10.14
(TaskRunner pid=1234) Training step 11/500
"""


def _library(tmp_path: Path, patterns: PatternCache | None = None) -> Classifier:
    directory = write_library(
        tmp_path / "pb",
        playbook(
            "clash",
            "named_actor_conflict",
            [
                {
                    "name": "taken",
                    "regex": r"The name (?P<name>\S+) \(namespace=(?P<ns>[^)]*)\) is already taken",
                }
            ],
        ),
        playbook(
            "versions",
            "ray_version_mismatch",
            [
                {
                    "name": "mismatch",
                    "regex": r"Version mismatch: The cluster was started with:\s+Ray: (?P<cluster_ray>\S+)"
                    r"\s+Python: \S+\s+This process on node (?P<node>\S+) was started with:\s+"
                    r"Ray: (?P<local_ray>\S+)",
                }
            ],
        ),
        playbook(
            "spill",
            "object_store_full",
            [{"name": "spill", "regex": r"Spilled (?P<mib>\d+) MiB"}],
        ),
        playbook(
            "oom-status",
            "pod_oom_killed",
            [
                {
                    "name": "oom",
                    "sources": ["pod_status"],
                    "reason": "OOMKilled",
                    "fields": {"exit_code": "137"},
                }
            ],
        ),
    )
    (directory / "noise.yaml").write_text(
        "noise:\n  - regex: '\\(raylet\\) Spilled \\d+ MiB'\n    why: spilling info\n"
    )
    return Classifier(load_library([directory]), patterns)


def _summary(hits: list[classify.Hit]) -> list[tuple[str, int | None, dict[str, str], int]]:
    return sorted((h.sig.playbook_id, h.evidence[0][1], h.captures, h.count) for h in hits)


EXPECTED = [
    ("clash", 4, {"name": "qwAKMv_register_center", "ns": "None"}, 1),
    ("versions", 5, {"cluster_ray": "2.40.0", "node": "10.0.3.17", "local_ray": "2.41.0"}, 1),
]


def test_a_log_in_one_piece(tmp_path: Path) -> None:
    assert _summary(_library(tmp_path).scan_log([LOG])) == EXPECTED


@pytest.mark.parametrize("cut", range(1, len(LOG), 7))
def test_chunk_borders_anywhere_change_nothing(tmp_path: Path, cut: int) -> None:
    classifier = _library(tmp_path)
    assert _summary(classifier.scan_log([LOG[:cut], LOG[cut:]])) == EXPECTED


def test_one_byte_chunks_change_nothing(tmp_path: Path) -> None:
    classifier = _library(tmp_path)
    assert _summary(classifier.scan_log(LOG[i : i + 1] for i in range(len(LOG)))) == EXPECTED


def test_windows_overlap_so_a_multiline_signature_is_seen_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    windows = list(classify._windows([b"a\nb\nc\n", b"d\ne\n", b"f"]))
    assert windows[0] == (b"a\nb\nc\n", 1, 0)
    window, first_line, fresh = windows[1]
    assert window.endswith(b"d\ne\n")
    assert window[:fresh] == b"a\nb\nc\n"
    assert first_line == 1
    assert windows[2][0].endswith(b"f")


def test_repeats_are_counted_and_evidence_capped(tmp_path: Path) -> None:
    line = b"ValueError: The name a_register_center (namespace=None) is already taken.\n"
    hits = _library(tmp_path).scan_log([b"noise\n" + line * 40])
    (hit,) = hits
    assert hit.count == 40
    assert [n for _, n in hit.evidence] == [2, 3, 4, 5, 6]


def test_crlf_and_tqdm_carriage_returns_keep_line_numbers(tmp_path: Path) -> None:
    text = b"step 1\r\n\rprogress 10%\rprogress 20%\r\nValueError: The name x (namespace=ns) is already taken.\r\n"
    (hit,) = _library(tmp_path).scan_log([text])
    assert hit.evidence == [("ValueError: The name x (namespace=ns) is already taken.", 3)]


def test_noise_lines_never_fire(tmp_path: Path) -> None:
    hits = _library(tmp_path).scan_log(
        [b"(raylet) Spilled 2048 MiB, 12 objects, write throughput 9 MiB/s\n"]
    )
    assert hits == []


@pytest.mark.parametrize(
    ("regex", "why"),
    [
        (r"Xid (?P<xid>\d+)(?=, pid)", "invalid perl operator: (?="),
        (r"(?<!\d)0 Workers", "invalid perl operator: (?<!"),
        (r"(?P<q>['\"]).*(?P=q)", "invalid perl operator: (?P"),
        (r"(a)\1", "invalid escape sequence: \\1"),
    ],
)
def test_a_regex_that_needs_backtracking_is_refused_at_load_with_file_and_line(
    tmp_path: Path, regex: str, why: str
) -> None:
    directory = write_library(
        tmp_path / "pb", playbook("slow", "gpu_fault", [{"name": "s", "regex": regex}])
    )
    with pytest.raises(PlaybookError) as refused:
        load_library([directory])
    assert str(refused.value) == (
        f"{directory / 'slow.yaml'}:7: match[0].regex: regex {regex!r}: RE2 cannot run it "
        f"({why}): lookarounds and backreferences need a backtracking engine, which a log "
        "line can stall; rewrite it, for example with `unless` for what must not match"
    )


def test_an_exponential_pattern_for_python_re_runs_in_linear_time(tmp_path: Path) -> None:
    """`(a+)+$` took Python's `re` 16 s on 28 characters; RE2 answers at once."""
    directory = write_library(
        tmp_path / "pb", playbook("nested", "gpu_fault", [{"name": "n", "regex": "(a+)+$"}])
    )
    classifier = Classifier(load_library([directory]))
    started = time.monotonic()
    assert classifier.scan_log([b"a" * 10_000 + b"!\n"] * 20) == []
    assert time.monotonic() - started < 5


def test_invalid_utf8_inside_a_log_is_replaced_not_fatal(tmp_path: Path) -> None:
    (hit,) = _library(tmp_path).scan_log(
        [b"\xff\xfe ValueError: The name x\xff (namespace=ns) is already taken.\n"]
    )
    assert hit.captures == {"name": "x\ufffd", "ns": "ns"}


@pytest.mark.parametrize(
    ("signal", "matched"),
    [
        (
            Signal(
                SourceKind.POD_STATUS, "terminated", reason="OOMKilled", fields={"exit_code": "137"}
            ),
            ["oom-status"],
        ),
        (
            Signal(
                SourceKind.POD_STATUS, "terminated", reason="OOMKilled", fields={"exit_code": "1"}
            ),
            [],
        ),
        (Signal(SourceKind.POD_STATUS, "terminated", reason="OOMKilled"), []),
        (Signal(SourceKind.K8S_EVENT, "x", reason="OOMKilled", fields={"exit_code": "137"}), []),
        (
            Signal(SourceKind.RAY_JOB, "ValueError: The name a (namespace=b) is already taken."),
            ["clash"],
        ),
    ],
)
def test_structured_signals_match_on_source_reason_fields_and_text(
    tmp_path: Path, signal: Signal, matched: list[str]
) -> None:
    assert [h.sig.playbook_id for h in _library(tmp_path).classify(signal)] == matched


def test_a_huge_log_streams_in_bounded_windows(tmp_path: Path) -> None:
    classifier = _library(tmp_path)
    filler = b"(WorkerDict pid=2321) step ok loss=0.123 lr=1e-5 tokens/s=3021\n" * 40_000
    chunks = [filler] * 10 + [b"ValueError: The name big (namespace=ns) is already taken.\n"]
    sizes: list[int] = []
    original = classify._windows

    def spy(stream):  # type: ignore[no-untyped-def]
        for window in original(stream):
            sizes.append(len(window[0]))
            yield window

    classify._windows = spy
    try:
        (hit,) = classifier.scan_log(iter(chunks))
    finally:
        classify._windows = original
    assert hit.evidence[0][1] == 400_001
    assert max(sizes) <= len(filler) + classify.OVERLAP_MAX_BYTES


def test_compiled_patterns_are_cached_and_a_corrupt_cache_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("PITCREW_CACHE_DIR", str(cache))
    _library(tmp_path, user_cache.PATTERNS)
    files = sorted(cache.glob("hyperscan-*.db"))
    assert files, "the compiled database is written to the cache"
    for file in files:
        file.write_bytes(b"not a hyperscan database")
    classifier = _library(tmp_path / "again", user_cache.PATTERNS)
    assert _summary(classifier.scan_log([LOG])) == EXPECTED
    assert all(f.read_bytes() != b"not a hyperscan database" for f in files)
