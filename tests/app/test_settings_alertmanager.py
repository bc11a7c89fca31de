"""The Alertmanager receiver's settings (`alertmanager:` and PITCREW_ALERTMANAGER_TOKEN),
as `pitcrew config check` reports them: every problem named with its line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.app.cli_app import app
from bot.app.settings.loading import ConfigError, load, render

TOKEN = "am-s3cret-token"


def problems(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> list[str]:
    path = tmp_path / "pitcrew.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load(path, env or {})
    return [p.replace(str(path), "F") for p in caught.value.problems]


@pytest.mark.parametrize(
    ("text", "env", "found"),
    [
        ("http: {host: 0.0.0.0}\nalertmanager:\n  enabled: true\n", {},
         "F:3: alertmanager.enabled: without PITCREW_ALERTMANAGER_TOKEN (or "
         "PITCREW_ALERTMANAGER_TOKEN_FILE) POST /alertmanager answers loopback clients only, and "
         "http.host is 0.0.0.0: set the token and send it from Alertmanager's http_config "
         "(authorization or basic_auth)"),
        ("alertmanager:\n  enabled: true\n  username: alertmanager\n", {},
         "F:3: alertmanager.username: basic auth needs PITCREW_ALERTMANAGER_TOKEN (or "
         "PITCREW_ALERTMANAGER_TOKEN_FILE) in the environment as its password"),
        ("alertmanager:\n  url: https://am.example.com\n", {"PITCREW_ALERTMANAGER_TOKEN": TOKEN},
         "F:1: alertmanager.enabled: PITCREW_ALERTMANAGER_TOKEN is set but the receiver is off; "
         "set alertmanager.enabled: true, or unset the token"),
        ("alertmanager:\n  enabled: true\n  url: alertmanager:9093\n", {},
         "F:3: alertmanager.url: expected Alertmanager's address as people open it, like "
         "https://alertmanager.example.com, not 'alertmanager:9093'"),
        ("alertmanager:\n  enabeld: true\n", {},
         "F:2: alertmanager.enabeld: unknown key; did you mean 'enabled'?"),
    ],
)  # fmt: skip
def test_the_receivers_settings_are_checked(
    tmp_path: Path, text: str, env: dict[str, str], found: str
) -> None:
    assert problems(tmp_path, text, env) == [found]


def test_a_token_file_is_read_and_masked(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text(TOKEN + "\n")
    path = tmp_path / "pitcrew.yaml"
    path.write_text(
        "http: {host: 0.0.0.0}\nalertmanager:\n  enabled: true\n  username: alertmanager\n"
        "  url: https://alertmanager.example.com/\n"
    )
    loaded = load(path, {"PITCREW_ALERTMANAGER_TOKEN_FILE": str(secret)})
    token = loaded.secrets.alertmanager_token
    assert token is not None
    assert token.get_secret_value() == TOKEN
    assert loaded.alertmanager.url == "https://alertmanager.example.com"
    shown = render(loaded)
    assert TOKEN not in shown
    assert "PITCREW_ALERTMANAGER_TOKEN: '**********'" in shown


def test_config_check_names_the_receivers_problem_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "pitcrew.yaml"
    path.write_text("http: {host: 0.0.0.0}\nalertmanager: {enabled: true, username: am}\n")
    result = CliRunner().invoke(app, ["config", "check", str(path)], env={})
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        f"{path}:2: alertmanager.enabled: without PITCREW_ALERTMANAGER_TOKEN (or "
        "PITCREW_ALERTMANAGER_TOKEN_FILE) POST /alertmanager answers loopback clients only, and "
        "http.host is 0.0.0.0: set the token and send it from Alertmanager's http_config "
        "(authorization or basic_auth)",
        f"{path}:2: alertmanager.username: basic auth needs PITCREW_ALERTMANAGER_TOKEN (or "
        "PITCREW_ALERTMANAGER_TOKEN_FILE) in the environment as its password",
    ]
    ok = CliRunner().invoke(
        app, ["config", "check", str(path)], env={"PITCREW_ALERTMANAGER_TOKEN": TOKEN}
    )
    assert (ok.exit_code, ok.output) == (
        0,
        f"store: SQLite {tmp_path / 'pitcrew.db'}: no file yet (`pitcrew run` creates it)\n"
        f"{path}: OK\n",
    )
