"""`pitcrew bundle INCIDENT`: the incident's evidence bundles, one folder per KubeRay
attempt, as one tar.gz a person can read, its size printed; a clear error without one."""

from __future__ import annotations

import io
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


def hostile_tar() -> bytes:
    """A stored bundle as no pitcrew made it: members that climb out, an absolute path, a
    link out of the folder, a device."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name in ("../../escaped.txt", "/etc/cron.d/pitcrew", "pods/../../../up.log", "ok.txt"):
            info = tarfile.TarInfo(name)
            info.size = 3
            tar.addfile(info, io.BytesIO(b"hi\n"))
        link = tarfile.TarInfo("link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
        device = tarfile.TarInfo("null")
        device.type = tarfile.CHRTYPE
        tar.addfile(device)
    return buffer.getvalue()


def test_a_stored_bundle_of_hostile_members_is_written_as_plain_files_inside_folders(
    tmp_path: Path,
) -> None:
    db = tmp_path / "state.db"
    with Store(db) as store:
        store.save_bundle("inc-1", "../attempt.tar.gz", hostile_tar(), T0)
    out = tmp_path / "out"
    out.mkdir()
    result = CliRunner().invoke(app, ["bundle", "inc-1", "--store", str(db), "-o", str(out)])
    assert result.exit_code == 0, result.output
    with tarfile.open(out / "inc-1.tar.gz") as tar:
        assert sorted((m.name, m.type) for m in tar.getmembers()) == [
            ("__attempt~db9b155e/escaped.txt", tarfile.REGTYPE),
            ("__attempt~db9b155e/etc/cron.d/pitcrew", tarfile.REGTYPE),
            ("__attempt~db9b155e/ok.txt", tarfile.REGTYPE),
            ("__attempt~db9b155e/pods/up.log", tarfile.REGTYPE),
        ]
        tar.extractall(tmp_path / "extracted", filter="data")


def test_the_file_given_is_the_only_one_written(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    with Store(db) as store:
        store.save_bundle("inc-1", "first.tar.gz", packed(b"log\n"), T0)
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("not yours\n")
    link = tmp_path / "out.tar.gz"
    link.symlink_to(elsewhere)
    result = CliRunner().invoke(app, ["bundle", "inc-1", "--store", str(db), "-o", str(link)])
    assert (result.exit_code, result.output) == (
        2,
        f"pitcrew: {link} is a symbolic link (to {elsewhere}); pitcrew bundle writes only "
        "the file it is given, not through a link: remove it or give another file\n",
    )
    assert elsewhere.read_text() == "not yours\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere.txt", "out.tar.gz", "state.db"]
