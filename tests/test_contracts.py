"""The import contracts (`[tool.importlinter]` in pyproject.toml) refuse what bot/README.md
says the layers never do.

Each case copies `bot/` and pyproject.toml to a scratch directory, adds one import the
layers forbid, and runs `lint-imports` there (as `make check` does): it must fail, naming
the contract and the offending line. Without a probe the copy passes, so the failure is
the probe's.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
IO = "The core does no I/O: no sockets, subprocesses, threads, HTTP or mail clients"
CORE_LAYERS = "Layers inside the core: inputs, text and the leaves below the classifier"
ADAPTERS = "Adapters do not import each other (kuberay composes kubernetes and ray)"


def lint_with(tmp_path: Path, module: str, probe: str) -> tuple[int, str, int]:
    """`lint-imports` on a copy of the package with `probe` appended to `module`; its exit
    status, its report with line breaks unwrapped, and the probe's line number."""
    shutil.copytree(ROOT / "bot", tmp_path / "bot", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    line = 0
    if module:
        path = tmp_path / module
        text = path.read_text(encoding="utf-8")
        line = text.count("\n") + 1
        path.write_text(f"{text}{probe}\n", encoding="utf-8")
    done = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, " ".join((done.stdout + done.stderr).split()), line


def test_the_package_as_it_is_keeps_every_contract(tmp_path: Path) -> None:
    status, report, _ = lint_with(tmp_path, "", "")
    assert status == 0, report
    assert " 0 broken." in report


@pytest.mark.parametrize(
    ("module", "probe", "contract", "broken"),
    [
        pytest.param(
            "bot/core/text.py",
            "import socket, subprocess, threading, urllib.request",
            IO,
            [
                "bot.core is not allowed to import socket: - bot.core.text -> socket (l.{line})",
                "bot.core is not allowed to import subprocess: - bot.core.text -> subprocess",
                "bot.core is not allowed to import threading: - bot.core.text -> threading",
                "bot.core is not allowed to import urllib: - bot.core.text -> urllib",
            ],
            id="I/O in the core",
        ),
        pytest.param(
            "bot/core/text.py",
            "from rich.text import Text",
            IO,
            ["bot.core is not allowed to import rich: - bot.core.text -> rich (l.{line})"],
            id="terminal rendering in the core",
        ),
        pytest.param(
            "bot/core/quantity.py",
            "import bot.core.incidents",
            CORE_LAYERS,
            [
                "bot.core.quantity is not allowed to import bot.core.incidents: "
                "- bot.core.quantity -> bot.core.incidents (l.{line})"
            ],
            id="a leaf of the core importing incidents",
        ),
        pytest.param(
            "bot/core/inputs/values.py",
            "from bot.core.engine import Engine",
            CORE_LAYERS,
            ["bot.core.inputs is not allowed to import bot.core.engine:"],
            id="inputs importing the engine",
        ),
        pytest.param(
            "bot/adapters/kuberay/clusters.py",
            "import bot.adapters.kubernetes.api",
            ADAPTERS,
            [
                "bot.adapters.kuberay is not allowed to import bot.adapters.kubernetes: "
                "- bot.adapters.kuberay.clusters -> bot.adapters.kubernetes.api (l.{line})"
            ],
            id="the pure kuberay clusters module importing the Kubernetes API",
        ),
    ],
)
def test_an_import_the_layers_forbid_fails_make_check(
    tmp_path: Path, module: str, probe: str, contract: str, broken: list[str]
) -> None:
    status, report, line = lint_with(tmp_path, module, probe)
    assert status == 1, report
    assert " 1 broken." in report
    _, _, failures = report.partition("Broken contracts")
    assert contract in failures
    for message in broken:
        assert message.format(line=line) in failures, failures
