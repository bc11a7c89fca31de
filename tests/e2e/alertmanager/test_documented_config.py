"""The Alertmanager configuration docs/operations.md tells operators to add (its route
and pitcrew's webhook receiver with the auth header) is one Debian's `amtool
check-config` accepts, and the pitcrew side of it is one `pitcrew config check` accepts
with the token in the environment."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from bot.app.settings.loading import load

DOC = Path(__file__).resolve().parents[3] / "docs" / "operations.md"


def block(first_line: str) -> str:
    """The fenced YAML block of the doc that starts with `first_line`."""
    found = re.search(r"```yaml\n(" + re.escape(first_line) + r"\n.*?)```", DOC.read_text(), re.S)
    assert found is not None, f"docs/operations.md has no YAML block starting {first_line!r}"
    return found.group(1)


def test_the_documented_alertmanager_config_is_valid(tmp_path: Path) -> None:
    path = tmp_path / "alertmanager.yml"
    path.write_text(block("# alertmanager.yml"))
    checked = subprocess.run(
        ["amtool", "check-config", str(path)], capture_output=True, text=True, timeout=30
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout


def test_the_documented_pitcrew_config_loads(tmp_path: Path) -> None:
    path = tmp_path / "pitcrew.yaml"
    path.write_text(block("# pitcrew.yaml\nalertmanager:"))
    loaded = load(path, {"PITCREW_ALERTMANAGER_TOKEN": "t0ken"})
    assert (loaded.alertmanager.enabled, loaded.alertmanager.url) == (
        True,
        "https://alertmanager.example.com",
    )
