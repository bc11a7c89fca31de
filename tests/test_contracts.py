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
CORE_LAYERS = "The core's folders are its layers: quality over incidents over diagnosis"
CORE_PACKAGES = "The core imports the standard library and only these third-party packages"
DAEMON_NETWORK = "The daemon does no network I/O"
APP_LAYERS = "Layers inside the app: the CLI over its commands over the wiring"
ADAPTERS = "Adapters do not import each other (kuberay composes kubernetes and ray)"
STORE_DRIVERS = "sqlite3 and psycopg (the store's drivers) only in bot.adapters.store"
LOCAL_PROCESS = "bot.adapters.local_process is a leaf every adapter may build on"


def lint_with(tmp_path: Path, module: str, probe: str) -> tuple[int, str, int]:
    """`lint-imports` on a copy of the package with `probe` appended to `module`; its exit
    status, its report with line breaks unwrapped, and the probe's line number."""
    shutil.copytree(ROOT / "bot", tmp_path / "bot", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts/import_contracts.py", tmp_path / "scripts/import_contracts.py")
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
            (IO, CORE_PACKAGES),
            [
                "bot.core is not allowed to import rich: - bot.core.text -> rich (l.{line})",
                "bot.core.text imports rich, which is neither the standard library nor one of:",
            ],
            id="terminal rendering in the core (rich is no package the core allows either)",
        ),
        pytest.param(
            "bot/core/quantity.py",
            "import bot.core.incidents.correlator",
            CORE_LAYERS,
            [
                "bot.core.quantity is not allowed to import bot.core.incidents: "
                "- bot.core.quantity -> bot.core.incidents.correlator (l.{line})"
            ],
            id="a leaf of the core importing incidents",
        ),
        pytest.param(
            "bot/core/inputs/values.py",
            "from bot.core.diagnosis.engine import Engine",
            CORE_LAYERS,
            [
                "bot.core.inputs is not allowed to import bot.core.diagnosis: "
                "- bot.core.inputs.values -> bot.core.diagnosis.engine (l.{line})"
            ],
            id="inputs importing the engine",
        ),
        pytest.param(
            "bot/core/diagnosis/classifier.py",
            "from bot.core.incidents.notify import NotifyConfig",
            CORE_LAYERS,
            [
                "bot.core.diagnosis is not allowed to import bot.core.incidents: "
                "- bot.core.diagnosis.classifier -> bot.core.incidents.notify (l.{line})"
            ],
            id="diagnosis importing incidents",
        ),
        pytest.param(
            "bot/core/playbooks/library.py",
            "import bot.core.diagnosis.engine",
            CORE_LAYERS,
            [
                "bot.core.playbooks is not allowed to import bot.core.diagnosis: "
                "- bot.core.playbooks.library -> bot.core.diagnosis.engine (l.{line})"
            ],
            id="playbooks importing diagnosis",
        ),
        pytest.param(
            "bot/core/actions/step.py",
            "import bot.core.playbooks.library",
            CORE_LAYERS,
            [
                "bot.core.actions is not allowed to import bot.core.playbooks: "
                "- bot.core.actions.step -> bot.core.playbooks.library (l.{line})"
            ],
            id="actions importing playbooks",
        ),
        pytest.param(
            "bot/core/incidents/notify.py",
            "import bot.core.quality.coverage",
            CORE_LAYERS,
            [
                "bot.core.incidents is not allowed to import bot.core.quality: "
                "- bot.core.incidents.notify -> bot.core.quality.coverage (l.{line})"
            ],
            id="incidents importing quality",
        ),
        pytest.param(
            "bot/core/text.py",
            "import tomlkit",
            CORE_PACKAGES,
            [
                "bot.core.text imports tomlkit, which is neither the standard library nor one "
                "of: hyperscan, jinja2, pydantic, re2, yaml (l.{line})"
            ],
            id="a third-party package the core does not allow",
        ),
        pytest.param(
            "bot/daemon/lanes.py",
            "import socket",
            DAEMON_NETWORK,
            ["bot.daemon is not allowed to import socket: - bot.daemon.lanes -> socket (l.{line})"],
            id="a socket in the daemon",
        ),
        pytest.param(
            "bot/daemon/outbox.py",
            "import urllib.request",
            DAEMON_NETWORK,
            ["bot.daemon is not allowed to import urllib: - bot.daemon.outbox -> urllib"],
            id="an HTTP client in the daemon",
        ),
        pytest.param(
            "bot/app/render.py",
            "from bot.app.cli_app import app",
            APP_LAYERS,
            [
                "bot.app.render is not allowed to import bot.app.cli_app: "
                "- bot.app.render -> bot.app.cli_app (l.{line})"
            ],
            id="a command's module importing the CLI",
        ),
        pytest.param(
            "bot/app/settings/base.py",
            "import bot.app.factories",
            APP_LAYERS,
            [
                "bot.app.settings is not allowed to import bot.app.factories: "
                "- bot.app.settings.base -> bot.app.factories (l.{line})"
            ],
            id="the settings importing the factories",
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
        pytest.param(
            "bot/adapters/http/ingest.py",
            "import psycopg",
            STORE_DRIVERS,
            [
                "bot.adapters.http is not allowed to import psycopg: "
                "- bot.adapters.http.ingest -> psycopg (l.{line})"
            ],
            id="PostgreSQL's driver outside the store",
        ),
        pytest.param(
            "bot/adapters/local_process.py",
            "import psycopg",
            STORE_DRIVERS,
            [
                "bot.adapters.local_process is not allowed to import psycopg: "
                "- bot.adapters.local_process -> psycopg (l.{line})"
            ],
            id="an SDK in the shared local process",
        ),
        pytest.param(
            "bot/adapters/local_process.py",
            "from bot.adapters.ray import local",
            (LOCAL_PROCESS, ADAPTERS),
            [
                "bot.adapters.local_process is not allowed to import bot.adapters.ray: "
                "- bot.adapters.local_process -> bot.adapters.ray.local (l.{line})",
                "bot.adapters.store is not allowed to import bot.adapters.ray: "
                "- bot.adapters.store.local_postgres -> bot.adapters.local_process",
            ],
            id="the shared local process importing an adapter",
        ),
    ],
)
def test_an_import_the_layers_forbid_fails_make_check(
    tmp_path: Path, module: str, probe: str, contract: str | tuple[str, ...], broken: list[str]
) -> None:
    contracts = (contract,) if isinstance(contract, str) else contract
    status, report, line = lint_with(tmp_path, module, probe)
    assert status == 1, report
    assert f" {len(contracts)} broken." in report
    _, _, failures = report.partition("Broken contracts")
    assert all(name in failures for name in contracts)
    for message in broken:
        assert message.format(line=line) in failures, failures
