"""The Dockerfile's structure: a pinned multi-stage build from the lock file, a non-root
user matching the chart, `pitcrew run` as the entrypoint, every file it copies present and
not excluded by .dockerignore; and how CI builds and runs it for real (`make image`,
`make image-test`: buildah, no container engine)."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass

import pytest
import yaml

from tests.e2e.helm.conftest import CHART, ROOT

DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


@dataclass
class Instruction:
    keyword: str
    args: str
    line: int


def instructions(text: str) -> list[Instruction]:
    """Dockerfile instructions with continuation lines joined and comments dropped."""
    found: list[Instruction] = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = pending + line
        pending = ""
        keyword, _, args = full.partition(" ")
        found.append(Instruction(keyword.upper(), args.strip(), start))
    assert not pending, "the Dockerfile ends inside a continued line"
    return found


PARSED = instructions(DOCKERFILE.read_text(encoding="utf-8"))


def stages() -> list[list[Instruction]]:
    out: list[list[Instruction]] = []
    for instruction in PARSED:
        if instruction.keyword == "FROM":
            out.append([])
        if out:
            out[-1].append(instruction)
    return out


def global_args() -> dict[str, str]:
    args = {}
    for instruction in PARSED:
        if instruction.keyword == "FROM":
            break
        if instruction.keyword == "ARG":
            name, _, default = instruction.args.partition("=")
            args[name] = default
    return args


def _expand(text: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), text)


def test_multi_stage_from_a_pinned_base():
    names = []
    for stage in stages():
        parts = stage[0].args.split()
        image = _expand(parts[0], global_args())
        if image not in names:
            # An exact version tag (3.11.14-slim-bookworm, never latest or 3.11-slim) or a digest.
            exact = re.fullmatch(r"[\w./-]+:\d+\.\d+\.\d+[\w.-]*(@sha256:[0-9a-f]{64})?", image)
            digest = re.fullmatch(r"[\w./:-]+@sha256:[0-9a-f]{64}", image)
            assert exact or digest, f"line {stage[0].line}: base image {image} is not pinned"
            assert image.startswith("python:3.11"), image
        if len(parts) == 3 and parts[1].upper() == "AS":
            names.append(parts[2])
    assert len(stages()) >= 2, "a multi-stage build"


def _final() -> list[Instruction]:
    return stages()[-1]


def test_runs_as_the_charts_non_root_user():
    users = [i for i in _final() if i.keyword == "USER"]
    assert users, "the final stage sets no USER (it would run as root)"
    user, _, group = users[-1].args.partition(":")
    assert user.isdigit(), "a numeric uid (so runAsNonRoot can check it)"
    assert int(user) != 0
    assert group.isdigit() if group else True
    assert int(group or user) != 0
    context = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    pod = context["podSecurityContext"]
    assert pod["runAsUser"] == int(user)
    assert pod["runAsGroup"] == int(group or user)
    assert pod["fsGroup"] == int(group or user)


def test_the_entrypoint_is_pitcrew_run():
    (entrypoint,) = [i for i in _final() if i.keyword == "ENTRYPOINT"]
    assert json.loads(entrypoint.args) == ["pitcrew", "run"]  # exec form: SIGTERM reaches it
    assert not [i for i in _final() if i.keyword == "CMD"]
    exposed = [i.args for i in _final() if i.keyword == "EXPOSE"]
    assert exposed == ["9464"]


def test_installs_the_wheel_with_the_lock_file_versions():
    runs = " ".join(i.args for i in PARSED if i.keyword == "RUN")
    # The lock is a constraint, not the list: only the wheel's runtime dependencies go in.
    assert re.search(r"\binstall --constraint requirements\.lock \S*pitcrew-\*\.whl", runs)
    assert "-r requirements.lock" not in runs
    assert "freeze --exclude pitcrew" in runs
    assert "requirements.lock" in runs
    assert "pitcrew playbooks test" in runs  # the built-in playbooks are in the wheel and load
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    force = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert force == {"playbooks": "bot/builtin_playbooks"}
    copies = [i.args.split() for i in PARSED if i.keyword == "COPY"]
    assert ["playbooks/", "playbooks/"] in copies
    final_copies = [i.args for i in _final() if i.keyword == "COPY"]
    assert final_copies == ["--from=build /opt/pitcrew /opt/pitcrew"]  # no source tree


# -- .dockerignore ------------------------------------------------------------------------


def _ignore_rules() -> list[tuple[bool, re.Pattern[str]]]:
    """(negated, regex) per .dockerignore line, in order (Docker: the last match wins)."""
    rules = []
    for raw in DOCKERIGNORE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        regex = ""
        i = 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex += "(.*/)?"
                i += 3
            elif pattern.startswith("**", i):
                regex += ".*"
                i += 2
            elif pattern[i] == "*":
                regex += "[^/]*"
                i += 1
            elif pattern[i] == "?":
                regex += "[^/]"
                i += 1
            else:
                regex += re.escape(pattern[i])
                i += 1
        rules.append((negated, re.compile(regex)))
    return rules


def in_context(path: str) -> bool:
    """Whether Docker sends `path` (relative to the repository) to the builder: a pattern
    that matches the path or one of its parent directories decides, the last one wins."""
    parts = path.strip("/").split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    included = True
    for negated, regex in _ignore_rules():
        if any(regex.fullmatch(c) for c in candidates):
            included = negated
    return included


def test_the_ignore_matcher_follows_docker_rules():
    assert in_context("bot/app/settings.py")
    assert not in_context("bot/__pycache__/settings.cpython-311.pyc")
    assert not in_context("tests/app/test_settings.py")


@pytest.mark.parametrize(
    "source",
    [
        src
        for i in PARSED
        if i.keyword == "COPY" and not i.args.startswith("--from")
        for src in i.args.split()[:-1]
    ],
)
def test_every_copied_file_exists_and_is_in_the_context(source: str):
    path = ROOT / source
    assert path.exists(), f"COPY {source}: no such file"
    assert in_context(source), f"COPY {source}: excluded by .dockerignore"
    if path.is_dir():
        files = [
            p.relative_to(ROOT).as_posix()
            for p in path.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        ]
        assert files
        missing = [f for f in files if not in_context(f)]
        assert missing == [], f"COPY {source}: .dockerignore drops {missing[:5]}"


@pytest.mark.parametrize(
    "path",
    [
        ".git/HEAD",
        ".venv/bin/python",
        "tests/e2e/helm/conftest.py",
        "pitcrew.db",
        "helm/pitcrew/Chart.yaml",
    ],
)
def test_the_context_leaves_out_what_the_image_does_not_need(path: str):
    assert not in_context(path)


def test_the_wheel_metadata_files_are_in_the_context():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert in_context("pyproject.toml")
    assert in_context(pyproject["project"]["readme"])
    assert in_context("requirements.lock")


def test_chart_app_version_is_the_package_version():
    from bot import __version__

    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    assert chart["appVersion"] == __version__
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["version"] == __version__


def test_the_image_sets_the_cache_dir_the_chart_mounts():
    env = " ".join(i.args for i in _final() if i.keyword == "ENV")
    assert "PITCREW_CACHE_DIR=/var/cache/pitcrew" in env
    assert "PYTHONUNBUFFERED=1" in env
    workdir = [i.args for i in _final() if i.keyword == "WORKDIR"][-1]
    assert workdir == "/var/lib/pitcrew"  # persistence.mountPath: ./pitcrew.db is the store


def test_the_runtime_has_no_pip_and_no_build_tools():
    build, runtime = stages()[0], _final()
    runs = " ".join(i.args for i in build if i.keyword == "RUN")
    assert "-m venv --without-pip /opt/pitcrew" in runs
    assert "--python /opt/pitcrew/bin/python" in runs  # the build's pip installs into it
    assert all("/opt/tools" not in i.args for i in runtime)


def test_a_proxy_ca_is_only_an_argument_of_the_build_stage():
    build_args = [i.args for i in stages()[0] if i.keyword == "ARG"]
    assert build_args == ["PIP_CERT"]  # no default: unset (pip's own CAs) unless given
    assert all(i.keyword != "ARG" for i in _final())


SCRIPT = (ROOT / "scripts" / "image.sh").read_text(encoding="utf-8")


def test_ci_builds_and_tests_the_image_after_the_tests():
    ci = [
        line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("make")
    ]
    assert ci == ["make test", "make image", "make image-test"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "\nimage:\n\tbash scripts/image.sh build\n" in makefile
    assert "\nimage-test:\n\tbash scripts/image.sh test\n" in makefile


def test_the_build_needs_no_daemon_and_names_no_mirror():
    assert "STORAGE_DRIVER=vfs BUILDAH_ISOLATION=chroot" in SCRIPT
    assert '--build-arg "PYTHON_IMAGE=$base"' in SCRIPT
    # The Debian mirror is the one apt is configured with, read at build time.
    assert "/etc/apt/sources.list" in SCRIPT
    hosts = re.findall(r"(?:https?|ftp)://([^/\s\"']+)", SCRIPT)
    assert hosts == ["ray-head.ml-train.svc:8265"]  # the test config's in-cluster dashboard


def test_the_image_test_runs_pitcrews_checks_as_the_charts_user():
    for command in (
        "pitcrew version",
        "pitcrew diagnose /seed",
        "pitcrew config check",
        "pitcrew playbooks test",
    ):
        assert f"-- {command}" in SCRIPT or f"-- \\\n    {command}" in SCRIPT, command
    context = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    assert f"USER_ID={context['podSecurityContext']['runAsUser']}" in SCRIPT
    assert "examples/seed:/seed:ro" in SCRIPT
