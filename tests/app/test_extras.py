"""Ray and kmock are the demo's, not the runtime's: the daemon talks to Ray over HTTP, so
the runtime dependencies (what the image installs) leave them to the `demo` extra, every
module outside the demo imports without them, and where they are missing the commands
that need them say which extra brings them."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from typer.testing import CliRunner

from bot.adapters.ray.local import LocalRayError, LocalRayHead
from bot.app.cli_app import app
from bot.app.demo import unavailable

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
DEMO_ONLY = {"ray", "kmock"}
NEEDS_THE_DEMO_EXTRA = (
    "bot.app.demo.emulator",
    "bot.app.demo.jobs",
    "bot.app.demo.runner",
    "bot.app.demo.session",
)


def _names(requirements: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


def _lock() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text(encoding="utf-8").splitlines():
        name, _, version = line.partition("==")
        pins[canonicalize_name(name)] = version
    return pins


def test_ray_and_kmock_come_with_the_demo_extra_only():
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert not _names(PYPROJECT["project"]["dependencies"]) & DEMO_ONLY
    assert _names(extras["demo"]) == DEMO_ONLY
    assert "pitcrew[demo]" in extras["dev"]  # the tests run the demo's parts


def _runtime_closure() -> dict[str, str]:
    """Every distribution the runtime dependencies pull in (name -> installed version),
    with markers and extras resolved as pip does for a plain `pip install pitcrew`."""
    found: dict[str, str] = {}
    pending = [(Requirement(r), "") for r in PYPROJECT["project"]["dependencies"]]
    while pending:
        requirement, extra = pending.pop()
        if requirement.marker and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        wanted = {""} | set(requirement.extras)
        seen = found.setdefault(name, metadata.version(name))
        assert seen
        for wanted_extra in wanted:
            key = f"{name}[{wanted_extra}]"
            if key in found:
                continue
            found[key] = ""
            for sub in metadata.requires(name) or []:
                pending.append((Requirement(sub), wanted_extra))
    return {k: v for k, v in found.items() if "[" not in k}


def test_the_runtime_closure_has_no_ray_and_is_pinned_by_the_lock():
    closure = _runtime_closure()
    assert not set(closure) & {"ray", "kmock", "grpcio", "opencensus", "py-spy", "pytest"}
    pins = _lock()
    unpinned = {name: v for name, v in closure.items() if pins.get(name) != v}
    assert unpinned == {}, "installed runtime packages not pinned at these versions"


def _third_party_imports(skip: tuple[str, ...]) -> set[str]:
    """Top-level names of the non-standard modules that bot/ imports (outside `skip`)."""
    found: set[str] = set()
    for path in (ROOT / "bot").rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if module in skip:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"bot", "__future__"}


@pytest.mark.slow
def test_every_package_the_runtime_imports_is_a_runtime_dependency():
    providers = metadata.packages_distributions()
    closure = _runtime_closure()
    imported = _third_party_imports(NEEDS_THE_DEMO_EXTRA) - DEMO_ONLY
    missing = {
        name: providers.get(name)
        for name in imported
        if not any(canonicalize_name(d) in closure for d in providers.get(name, []))
    }
    assert missing == {}, "imported by bot/ but not installed by pitcrew's dependencies"


@pytest.mark.slow
def test_every_module_outside_the_demo_imports_without_ray_or_kmock():
    code = (
        "import pkgutil, sys\n"
        "sys.modules['ray'] = sys.modules['kmock'] = None  # as if not installed\n"
        "import bot\n"
        f"skip = {(*NEEDS_THE_DEMO_EXTRA, 'bot.__main__')!r}\n"
        "names = [m.name for m in pkgutil.walk_packages(bot.__path__, 'bot.')]\n"
        "for name in names:\n"
        "    if name not in skip:\n"
        "        __import__(name)\n"
        "print(len(names))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout) > 50


@pytest.mark.parametrize(
    ("missing", "message"),
    [
        (("ray",), "the demo needs ray, which pitcrew's runtime does not install"),
        (
            ("ray", "kmock"),
            "the demo needs ray and kmock, which pitcrew's runtime does not install",
        ),
    ],
)
def test_the_demo_without_its_packages_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, missing: tuple[str, ...], message: str
) -> None:
    for name in missing:
        monkeypatch.setitem(sys.modules, name, None)  # what an image without them has
    assert unavailable() == f"{message}: pip install 'pitcrew[demo]'"
    result = CliRunner().invoke(app, ["demo", "--yes"])
    assert result.exit_code == 2
    assert result.stderr == f"pitcrew: {message}: pip install 'pitcrew[demo]'\n"


def test_the_demo_has_its_packages_here():
    assert unavailable() is None


def test_a_local_ray_head_without_ray_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    with pytest.raises(LocalRayError) as raised:
        LocalRayHead().start()
    assert str(raised.value) == (
        f"no `ray` command beside {tmp_path}/bin/python: a local Ray head needs Ray, "
        "which pitcrew's runtime does not install: pip install 'pitcrew[demo]'"
    )
    assert not re.search("pcray-", " ".join(p.name for p in tmp_path.iterdir()))
