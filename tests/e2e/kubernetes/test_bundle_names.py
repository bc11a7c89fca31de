"""A bundle of objects whose names no real API server would take (`..`, `/`, an
absolute path, control characters: an emulator, a proxy or a future kind may give them)
names its members from clean forms of them, each name unique, the real one inside the
file and listed in README.txt; the capture and `pitcrew bundle`'s tarball extract inside
their folder with tarfile's `data` filter and with `tar -x`. Objects served by kmock's
emulator over the official client."""

from __future__ import annotations

import copy
import io
import subprocess
import tarfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.adapters.kuberay.capture import EvidenceCollector
from bot.adapters.store.store import Store
from bot.app.demo import seed
from tests.e2e.kubernetes.conftest import Emulator
from tests.support.cli import pitcrew
from tests.support.faults import Measured

pytestmark = pytest.mark.kube

NAMES = ("../../../tmp/evil-pod", "/etc/cron.d/pod", "title\x1b]0;owned\x07pod", "a..b", "..")
CONTAINER = "../c\x1b[2J"


def hostile_pods(objects: dict[str, Any]) -> list[dict[str, Any]]:
    """The seed's head pod under hostile names, its container restarted (so its previous
    log is asked for) and named with a `..` and an escape sequence."""
    pods = []
    for name in NAMES:
        pod = copy.deepcopy(objects["pods"][0])
        pod["metadata"]["name"] = name
        pod["spec"]["containers"][0]["name"] = CONTAINER
        pod["status"]["containerStatuses"] = [
            {"name": CONTAINER, "lastState": {"terminated": {"exitCode": 137}}, "state": {}}
        ]
        pods.append(pod)
    return pods


def inside(folder: Path) -> list[str]:
    """Every path extracted under `folder`, relative; raises if one resolves outside."""
    found = []
    for path in sorted(folder.rglob("*")):
        assert path.resolve().is_relative_to(folder.resolve()), path
        if path.is_file():
            found.append(str(path.relative_to(folder)))
    return found


def extracted(body: bytes, folder: Path) -> tuple[list[str], list[str]]:
    """The files of a tar.gz extracted with tarfile's `data` filter, and with `tar -x`."""
    by_python, by_tar = folder / "python", folder / "tar"
    by_python.mkdir(parents=True)
    by_tar.mkdir()
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        tar.extractall(by_python, filter="data")
    archive = folder / "bundle.tar.gz"
    archive.write_bytes(body)
    subprocess.run(["tar", "-xzf", str(archive), "-C", str(by_tar)], check=True)
    return inside(by_python), inside(by_tar)


def test_a_bundle_of_hostile_names_extracts_inside_its_folder(
    tmp_path: Path, kuberay: Emulator, measured: Measured
) -> None:
    objects: dict[str, Any] = seed.seed_objects()
    kuberay.create(objects["rayjob"])
    kuberay.create(objects["cluster"])
    for pod in hostile_pods(objects):
        kuberay.create(pod)
    rayjob = objects["rayjob"]["metadata"]["name"]
    body = EvidenceCollector(kuberay.api, lambda cluster: None).collect("RayJob", seed.NS, rayjob)

    by_python, by_tar = extracted(body, tmp_path / "capture")
    measured.bad_clicks_accepted(0)  # `inside` raised had one left its folder
    assert by_python == by_tar
    assert sorted(p for p in by_python if p.startswith("pods/") and p.endswith(".yaml")) == [
        "pods/______tmp_evil-pod~30a2858e.yaml",
        "pods/_etc_cron.d_pod~12e790a8.yaml",
        "pods/_~9d891e73.yaml",
        "pods/a_b~89cf32c3.yaml",
        "pods/title_0_owned_pod~2a7d757c.yaml",
    ]
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        readme = tar.extractfile("README.txt").read().decode()  # type: ignore[union-attr]
        shown = tar.extractfile("pods/a_b~89cf32c3.yaml").read()  # type: ignore[union-attr]
    assert yaml.safe_load(shown)["metadata"]["name"] == "a..b"  # the real name, inside
    assert "pods/_etc_cron.d_pod~12e790a8.yaml is named for '/etc/cron.d/pod'" in readme
    assert "\x1b" not in readme

    with Store(tmp_path / "state.db") as store:
        store.save_bundle("inc-1", "../../attempt\x07.tar.gz", body, datetime.now(UTC))
    result = pitcrew("bundle", "inc-1", "--store", str(tmp_path / "state.db"), "-o", str(tmp_path))
    assert result.returncode == 0, result.stderr
    merged = (tmp_path / "inc-1.tar.gz").read_bytes()
    by_python, by_tar = extracted(merged, tmp_path / "merged")
    assert by_python == by_tar
    assert {p.split("/")[0] for p in by_python} == {"____attempt_~0d127765"}
