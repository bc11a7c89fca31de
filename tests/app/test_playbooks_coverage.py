"""`pitcrew playbooks coverage`: every catalogue entry, in every carrier, classifies to
its class; a miss is listed with what pitcrew answered."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.adapters.files.catalogue import builtin_catalogue_dir, load_catalogue
from bot.adapters.files.playbooks import builtin_engine
from bot.core.quality.coverage import below, report_lines, run

FLOOR = 0.97

CATALOGUE = """\
project: ray
entries:
  - id: store-full
    class: object_store_full
    signature: object-store-full/in-scope-objects
    emitter: core_worker
    kind: log
    source: python/ray/exceptions.py
    versions: "2.9"
    message: "The local object store is full of objects that are still in scope and cannot be evicted."
  - id: said-in-other-words
    class: object_store_full
    signature: object-store-full/in-scope-objects
    emitter: core_worker
    kind: log
    source: python/ray/exceptions.py
    versions: "2.9"
    message: "the plasma arena has no room left"
"""


def pitcrew(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
def test_every_carrier_recognizes_at_least_97_percent_of_the_catalogue() -> None:
    coverage = run(builtin_engine(), load_catalogue([builtin_catalogue_dir()]))
    assert len({o.entry.key for o in coverage.outcomes}) >= 30
    assert coverage.unknown_signatures == ()
    short = below(coverage, FLOOR)
    assert short == [], "\n".join([*short, *report_lines(coverage)])


@pytest.mark.slow
def test_the_command_prints_each_class_and_carrier_and_lists_every_miss(tmp_path: Path) -> None:
    (tmp_path / "ray.yaml").write_text(CATALOGUE)
    result = pitcrew(
        "playbooks", "coverage", "--sample", "0", "--catalogue", str(tmp_path), "--fail-under", "97"
    )
    lines = result.stdout.splitlines()
    assert lines[:3] == [
        "class                            entries carriers recognized",
        "object_store_full                      2       39      51.3%",
        "total                                  2       39      51.3%",
    ]
    assert "bare                                            2      50.0%" in lines
    assert "entries by project: ray 2" in lines
    assert "misses (19):" in lines
    assert "  ray.yaml#said-in-other-words  bare  wanted object_store_full, answered none" in lines
    assert result.returncode == 1
    assert "pitcrew: below --fail-under: bare: 50.0% < 97%" in result.stderr


WORDED = """\
project: ray
entries:
  - id: store-full
    class: object_store_full
    signature: object-store-full/in-scope-objects
    emitter: core_worker
    kind: log
    source: python/ray/exceptions.py
    versions: "ray-1.0.0 - ray-2.9.3"
    message: &current "The local object store is full of objects that are still in scope and cannot be evicted."
    wordings:
      - template: "the plasma arena has no room left"
        versions: "ray-0.8.0 - ray-0.8.7"
      - template: *current
        versions: "ray-1.0.0 - ray-2.9.3"
"""


@pytest.mark.slow
def test_every_wording_is_carried_and_a_miss_names_its_wording(tmp_path: Path) -> None:
    (tmp_path / "ray.yaml").write_text(WORDED)
    result = pitcrew("playbooks", "coverage", "--sample", "0", "--catalogue", str(tmp_path))
    lines = result.stdout.splitlines()
    assert lines[1] == "object_store_full                      1       39      51.3%"
    assert "wordings: 2 (1 entries with more than one, read at their release tags)" in lines
    assert (
        "  ray.yaml#store-full~0 (ray-0.8.0 - ray-0.8.7)  bare  wanted object_store_full,"
        " answered none"
    ) in lines
    assert not any("store-full~1" in line for line in lines)


def test_a_bad_catalogue_file_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "ray.yaml").write_text(CATALOGUE.replace("kind: log", "kind: logg", 1))
    result = pitcrew("playbooks", "coverage", "--sample", "0", "--catalogue", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr == (
        f"pitcrew: {tmp_path}/ray.yaml:7: entry 'store-full': kind: "
        "Input should be 'log', 'event' or 'status'\n"
    )


def test_an_entry_naming_a_signature_no_playbook_has_fails_the_command(tmp_path: Path) -> None:
    (tmp_path / "ray.yaml").write_text(
        CATALOGUE.replace("object-store-full/in-scope-objects", "object-store-full/gone", 1)
    )
    result = pitcrew("playbooks", "coverage", "--sample", "0", "--catalogue", str(tmp_path))
    assert "entries naming a signature no playbook has (1):" in result.stdout
    assert "  ray.yaml#store-full: object-store-full/gone" in result.stdout
    assert result.returncode == 1


INVENTORY = "\n".join(
    [
        '{"project": "kubernetes", "read": "the test", "releases": ["1.28.7"]}',
        *(
            f'{{"id": "kubelet-broke-{n}", "emitter": "kubelet", "level": "error", "kind": "log",'
            f' "source": "pkg/kubelet/kubelet.go", "versions": "1.28.7", "wordings": [{{"template":'
            f' "volume {{volume}} of pod {{pod}} broke in way number {n}", "versions": "1.28.7"}}],'
            f' "verdict": "unclassified"}}'
            for n in range(12)
        ),
    ]
)


@pytest.mark.slow
def test_the_inventory_checked_in_processes_reports_as_in_one(tmp_path: Path) -> None:
    (tmp_path / "catalogue").mkdir()
    (tmp_path / "catalogue" / "ray.yaml").write_text(CATALOGUE)
    (tmp_path / "inventory").mkdir()
    (tmp_path / "inventory" / "kubernetes.jsonl").write_text(INVENTORY + "\n")
    reports = []
    for jobs in ("1", "2"):
        result = pitcrew(
            "playbooks", "coverage", "--catalogue", str(tmp_path / "catalogue"),
            "--inventory", str(tmp_path / "inventory"), "--jobs", jobs,
        )  # fmt: skip
        lines = result.stdout.splitlines()
        start = lines.index(
            "inventory      messages wordings  class  none unclass.  verdict   texts recognized"
        )
        reports.append(lines[start:-1])
        assert lines[-1].endswith(f"({jobs} process{'es' if jobs == '2' else ''})")
    assert reports[0] == reports[1]
    assert reports[0][1] == (
        "kubernetes           12       12      0     0       12     0.0%      36      66.7%"
    )
