"""What makes a start fast stays correct: the validated library is cached by a hash of its
files and of pitcrew's code, an edit or a new version never reuses an entry, a damaged or
foreign entry is ignored, and `pitcrew diagnose` does not import the daemon's commands."""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from bot.adapters.files import cache
from bot.adapters.files.playbooks import load_builtin, load_library
from bot.core.diagnosis.classifier import Classifier
from bot.core.errors import PlaybookError
from bot.core.playbooks.library import Library
from bot.core.playbooks.templating import compile_template, render
from tests.support.playbooks import PLAYBOOK_TEXT


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("PITCREW_CACHE_DIR", str(directory))
    return directory


def _playbooks(tmp_path: Path, text: str = PLAYBOOK_TEXT) -> Path:
    directory = tmp_path / "playbooks"
    directory.mkdir(exist_ok=True)
    (directory / "p.yaml").write_text(text)
    return directory


def _entries(cache_dir: Path) -> list[Path]:
    return sorted(cache_dir.glob("library-*.pickle"))


def test_a_library_loaded_again_from_the_same_files_comes_from_the_cache(
    tmp_path: Path, cache_dir: Path
) -> None:
    directory = _playbooks(tmp_path)
    first = load_library([directory])
    (entry,) = _entries(cache_dir)
    assert pickle.loads(entry.read_bytes()) == first
    planted = Library(playbooks=())
    entry.write_bytes(pickle.dumps(planted))  # the entry under the files' hash is used as is
    assert load_library([directory]) == planted


def test_the_cached_library_carries_its_templates_compiled_and_they_render_the_same(
    cache_dir: Path,
) -> None:
    built = load_builtin()  # read from the files, then kept with jinja's Python for its templates
    assert load_builtin() == built
    context = {"role": "primary", "fields": {}, "captures": {}, "count": 2, "obj": None}
    context |= {"workload": None, "namespace": "ns", "reason": "", "category": "x"}
    for loaded in built.playbooks:
        diagnosis = loaded.playbook.diagnosis
        code = built.code_of(diagnosis)
        assert code is not None, loaded.source
        try:
            expected = render(compile_template(diagnosis), context)
        except Exception as error:  # a template that needs a name this context lacks
            with pytest.raises(type(error)):
                render(compile_template(diagnosis, code), context)
            continue
        assert render(compile_template(diagnosis, code), context) == expected


def test_template_code_kept_by_another_jinja_is_not_used(cache_dir: Path) -> None:
    built = load_builtin()
    diagnosis = built.playbooks[0].playbook.diagnosis
    assert built.code_of(diagnosis) is not None
    assert dataclasses.replace(built, jinja_version="0.0").code_of(diagnosis) is None


def test_an_edited_playbook_is_loaded_afresh(tmp_path: Path, cache_dir: Path) -> None:
    directory = _playbooks(tmp_path)
    load_library([directory])
    _playbooks(tmp_path, PLAYBOOK_TEXT.replace("title: My playbook", "title: Renamed"))
    (loaded,) = load_library([directory]).playbooks
    assert loaded.playbook.title == "Renamed"
    assert len(_entries(cache_dir)) == 2


def test_another_pitcrew_version_never_reads_the_entry(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = _playbooks(tmp_path)
    load_library([directory])
    monkeypatch.setattr("bot.__version__", "99.0.0")
    cache.code_fingerprint.cache_clear()
    try:
        load_library([directory])
    finally:
        cache.code_fingerprint.cache_clear()
    assert len(_entries(cache_dir)) == 2


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda entry: entry.write_bytes(b"not a pickle"), "unreadable"),
        (lambda entry: entry.write_bytes(pickle.dumps({"not": "a library"})), "another type"),
        (lambda entry: entry.chmod(0o666), "writable by others"),
    ],
)
def test_an_entry_that_cannot_be_trusted_is_ignored_and_rebuilt(
    tmp_path: Path, cache_dir: Path, damage: object, why: str
) -> None:
    directory = _playbooks(tmp_path)
    load_library([directory])
    (entry,) = _entries(cache_dir)
    planted = Library(playbooks=())
    entry.write_bytes(pickle.dumps(planted))
    damage(entry)  # type: ignore[operator]
    (loaded,) = load_library([directory]).playbooks
    assert loaded.playbook.id == "my-playbook", why


def test_a_bad_playbook_reports_its_error_and_caches_nothing(
    tmp_path: Path, cache_dir: Path
) -> None:
    directory = _playbooks(tmp_path, PLAYBOOK_TEXT.replace("severity: error", "severity: fatal"))
    for _ in range(2):
        with pytest.raises(PlaybookError, match=r"p\.yaml:4: severity: Input should be"):
            load_library([directory])
    assert _entries(cache_dir) == []


def test_a_missing_directory_is_reported_as_without_the_cache(
    tmp_path: Path, cache_dir: Path
) -> None:
    with pytest.raises(PlaybookError) as raised:
        load_library([tmp_path / "nowhere"])
    assert str(raised.value) == f"{tmp_path / 'nowhere'}: not a directory"


def test_the_cache_can_be_switched_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PITCREW_CACHE_DIR", "off")
    assert cache.cache_dir() is None
    (loaded,) = load_library([_playbooks(tmp_path)]).playbooks
    assert loaded.playbook.id == "my-playbook"


def test_old_entries_of_a_kind_are_dropped(cache_dir: Path) -> None:
    for n in range(cache.KEEP_PER_KIND + 3):
        path = cache.entry("library", f"{n:032x}", ".pickle")
        cache.write(path, b"x")
        assert path is not None
        os.utime(path, (n, n))
    cache.write(cache.entry("library", "f" * 32, ".pickle"), b"x")
    names = {p.name for p in _entries(cache_dir)}
    assert len(names) == cache.KEEP_PER_KIND
    assert f"library-{'0' * 32}.pickle" not in names
    assert f"library-{'f' * 32}.pickle" in names
    assert oct((cache_dir / f"library-{'f' * 32}.pickle").stat().st_mode & 0o777) == "0o600"


def _modules_after(*argv: str, stdin: str = "") -> set[str]:
    code = (
        "import sys\n"
        "from bot.app.cli import main\n"
        f"sys.argv = ['pitcrew', *{list(argv)!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('MODULES', *sorted(sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], input=stdin, capture_output=True, text=True, check=True
    )
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("MODULES ")]
    return set(line.split()[1:])


@pytest.mark.slow
def test_diagnose_and_version_start_without_the_daemons_commands(cache_dir: Path) -> None:
    assert "jinja2" in _modules_after("diagnose", "-", stdin="OOM!\n")  # reads the files
    for argv in (("diagnose", "-"), ("version",)):
        loaded = _modules_after(*argv, stdin="OOM!\n")
        # the library cached, nothing found to render, no action offered or parameter
        # checked: pydantic is typer's alone (it makes each parameter's value with it)
        assert not {"jinja2", "yaml", "bot.core.playbooks.schema"} & loaded, argv
        assert "bot.app.commands" not in loaded, argv
        assert "bot.app.settings" not in loaded, argv
        assert "rich.progress" not in loaded, argv
        sdks = {"kubernetes", "slack_sdk", "slack_bolt", "ray", "requests", "sqlite3", "uvicorn"}
        assert not sdks & loaded, argv


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("", "imported: collecting True; run: collecting True, imports set aside True"),
        (
            "import gc; gc.disable(); ",
            "imported: collecting False; run: collecting False, imports set aside True",
        ),
    ],
)
def test_the_cli_pauses_the_collector_while_it_imports_and_leaves_it_as_it_was(
    before: str, after: str
) -> None:
    code = before + (
        "import gc, sys; from bot.app import cli\n"
        "imported = f'collecting {gc.isenabled()}'\n"
        "assert gc.get_freeze_count() == 0, 'importing the entry froze objects'\n"
        "sys.argv = ['pitcrew', 'version']\n"
        "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
        "print(f'imported: {imported}; run: collecting {gc.isenabled()}, "
        "imports set aside {gc.get_freeze_count() > 0}')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.stdout.strip().splitlines()[-1] == after


def test_the_library_diagnoses_a_paste_from_the_cache_without_pydantic_jinja_or_yaml(
    cache_dir: Path,
) -> None:
    code = (
        "import io, sys\n"
        "from bot.adapters.console.render import plain_lines\n"
        "from bot.adapters.files.playbooks import builtin_engine\n"
        "from bot.core.inputs.reader import read_stream\n"
        "diagnosis = builtin_engine().diagnose(read_stream(io.BytesIO(b'OOM!'), '-'))\n"
        "print(*plain_lines(diagnosis), sep='\\n')\n"
        "print('MODULES', *sorted(sys.modules))\n"
    )
    for _ in range(2):  # read from the files and kept, then read back from the cache
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    lines = done.stdout.splitlines()
    assert lines[0] == "No failure found: nothing in the input matches a playbook."
    loaded = set(lines[-1].split()[1:])
    assert not {"pydantic", "jinja2", "yaml"} & loaded


@pytest.mark.slow
def test_the_daemons_commands_load_when_asked_for() -> None:
    assert "bot.app.commands" in _modules_after("status", "--help")
    assert "bot.app.commands" in _modules_after("--help")


@pytest.mark.slow
def test_a_second_classifier_of_a_library_compiles_no_hyperscan_database(
    cache_dir: Path,
) -> None:
    library = load_builtin()
    assert library.noise, "the built-in library has benign-noise rules"
    Classifier(library, cache.PATTERNS)
    first = {p.name: p.stat().st_mtime_ns for p in cache_dir.glob("hyperscan-*.db")}
    assert len(first) == 4  # event prefilter, log prefilter, noise, the unless patterns
    Classifier(library, cache.PATTERNS)
    again = {p.name: p.stat().st_mtime_ns for p in cache_dir.glob("hyperscan-*.db")}
    assert again == first  # loaded, not compiled and written again
