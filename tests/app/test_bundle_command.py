"""`pitcrew bundle INCIDENT`: the incident's evidence bundles, one folder per KubeRay
attempt, as one tar.gz a person can read, its size printed; a clear error without one."""

from __future__ import annotations

import tarfile
from datetime import UTC, datetime
from pathlib import Path

from typer.testing import CliRunner

from bot.adapters.kuberay.capture import Bundle
from bot.adapters.store.store import Store
from bot.app.cli_app import app

T0 = datetime(2026, 11, 3, 10, 0, tzinfo=UTC)


def packed(driver: bytes) -> bytes:
    bundle = Bundle()
    bundle.add("driver.log", driver, 1024, tail=True)
    bundle.add("actors.json", b'[{"death_cause": {"kind": "ActorDiedErrorContext"}}]', 1024)
    return bundle.packed(1 << 20, "pitcrew evidence bundle of RayJob ml/train")


def test_the_bundle_is_written_and_its_size_printed(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    with Store(db) as store:
        store.save_bundle("inc-1", "train-try1.tar.gz", packed(b"x" * 2000 + b"\nOOM\n"), T0)
        store.save_bundle("inc-1", "train-try2.tar.gz", packed(b"second\n"), T0)
    out = tmp_path / "inc-1.tar.gz"
    result = CliRunner().invoke(app, ["bundle", "inc-1", "--store", str(db), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output == f"{out}: {out.stat().st_size} bytes (2 bundle(s) of inc-1)\n"
    with tarfile.open(out) as tar:
        assert sorted(tar.getnames()) == [
            "train-try1/README.txt",
            "train-try1/actors.json",
            "train-try1/driver.log",
            "train-try2/README.txt",
            "train-try2/actors.json",
            "train-try2/driver.log",
        ]
        driver = tar.extractfile("train-try1/driver.log")
        assert driver is not None
        assert driver.read().endswith(b"\nOOM\n")  # the tail kept, cut to 1024 bytes
        readme = tar.extractfile("train-try2/README.txt")
        assert readme is not None
        assert readme.read() == b"pitcrew evidence bundle of RayJob ml/train\n"


def test_an_incident_without_a_bundle_says_so(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    Store(db).close()
    result = CliRunner().invoke(app, ["bundle", "inc-none", "--store", str(db)])
    assert result.exit_code != 0
    assert "inc-none: no evidence bundle kept for this incident" in result.output
