"""How the daemon gets its Slack chat: from settings (tokens from the environment,
never in `repr`), bound to the service and mounted on the HTTP server; the whole
daemon (`bot.app.wiring.build`) in HTTP mode answers a signed slash command and posts
through the emulator; the app manifest asks for exactly the scopes the code uses."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import SecretStr

from bot.adapters.http.server import HealthServer
from bot.adapters.slack.chat import SlackChat
from bot.app import wiring as app
from bot.app.settings.sections import ChatSettings, Secrets, Settings, SlackSettings, StoreSettings
from bot.app.slack_chat import slack_chat, slack_config
from bot.core.errors import PitcrewError
from tests.e2e.slack.conftest import POLICY, SECRET, SeededService, command_body, form, post, sign
from tests.support.slack_emulator import APP_TOKEN, BOT_TOKEN, SlackEmulator

pytestmark = pytest.mark.slack

ROOT = Path(__file__).resolve().parents[3]


def settings_for(emulator: SlackEmulator, tmp_path: Path, **slack: Any) -> Settings:
    return Settings(
        store=StoreSettings(path=tmp_path / "daemon.db"),
        chat=ChatSettings(kind="slack", slack=SlackSettings(api_url=emulator.api_url, **slack)),
        approvals=POLICY,
        secrets=Secrets(
            slack_bot_token=SecretStr(BOT_TOKEN),
            slack_app_token=SecretStr(APP_TOKEN),
            slack_signing_secret=SecretStr(SECRET),
        ),
    )


def test_the_config_comes_from_settings_and_hides_tokens(
    emulator: SlackEmulator, tmp_path: Path
) -> None:
    config = slack_config(settings_for(emulator, tmp_path, ping_interval=5, timeout=3))
    assert config.bot_token == BOT_TOKEN
    assert config.timeout == 3
    assert config.api_url == emulator.api_url
    assert config.stale_after == 30
    assert config.policy == POLICY
    for secret in (BOT_TOKEN, APP_TOKEN, SECRET):
        assert secret not in repr(config)


def test_missing_tokens_are_a_clear_error(emulator: SlackEmulator, tmp_path: Path) -> None:
    settings = settings_for(emulator, tmp_path)
    no_app_token = settings.model_copy(
        update={"secrets": Secrets(slack_bot_token=SecretStr(BOT_TOKEN))}
    )
    with pytest.raises(PitcrewError, match="SLACK_APP_TOKEN"):
        slack_chat(no_app_token)
    http_mode = settings_for(emulator, tmp_path, socket_mode=False)
    no_secret = http_mode.model_copy(
        update={"secrets": Secrets(slack_bot_token=SecretStr(BOT_TOKEN))}
    )
    with pytest.raises(PitcrewError, match="SLACK_SIGNING_SECRET"):
        slack_chat(no_secret)


def test_a_bound_slack_chat_listens_and_mounts_its_route(
    emulator: SlackEmulator, tmp_path: Path, seeded: SeededService, http_server: HealthServer
) -> None:
    settings = settings_for(emulator, tmp_path, socket_mode=False)
    chat = slack_chat(settings)
    chat.bind(seeded.service, http=http_server)
    try:
        chat.start()
        assert chat.healthy()
        body = form(command_body(emulator, "status", response="wired"))
        url = f"http://127.0.0.1:{http_server.port}/slack/events"
        assert post(url, body, sign(body)).status == 200
        emulator.wait_for(lambda: emulator.responses, what="the answer")
    finally:
        chat.stop()
    assert not chat.healthy()


def test_the_daemon_runs_the_slack_chat_in_http_mode(
    emulator: SlackEmulator, tmp_path: Path, seed_report: Any
) -> None:
    settings = settings_for(emulator, tmp_path, socket_mode=False)
    settings = settings.model_copy(update={"http": settings.http.model_copy(update={"port": 0})})
    daemon = app.build(settings)
    assert isinstance(daemon.chat, SlackChat)
    daemon.start()
    try:
        body = form(command_body(emulator, "status", response="daemon"))
        url = f"http://127.0.0.1:{daemon.http.port}/slack/events"
        assert post(url, body, sign(body)).status == 200
        (answer,) = emulator.wait_for(lambda: emulator.responses, what="the answer")
        assert "*Open incidents:* 0" in answer[1]["blocks"][0]["text"]["text"]
        assert daemon.health.liveness()["chat"] is True
        daemon.chat.post("pitcrew", seed_report)
        assert len(emulator.parents()) == 1
    finally:
        daemon.stop()


def test_the_manifest_asks_for_exactly_the_scopes_the_code_uses() -> None:
    manifest = yaml.safe_load((ROOT / "slack" / "manifest.yaml").read_text())
    (command,) = manifest["features"]["slash_commands"]
    assert command["command"] == "/pitcrew"
    assert "url" not in command  # Socket Mode
    assert manifest["settings"]["socket_mode_enabled"] is True
    assert manifest["settings"]["interactivity"]["is_enabled"] is True
    assert manifest["settings"]["token_rotation_enabled"] is False

    scope_of = {
        "chat_postMessage": "chat:write",
        "chat_update": "chat:write",
        "chat_delete": "chat:write",
        "chat_postEphemeral": "chat:write",
        "usergroups_users_list": "usergroups:read",
        "files_upload_v2": "files:write",
        "conversations_history": ("channels:history", "groups:history"),
        "conversations_replies": ("channels:history", "groups:history"),
        "conversations_list": ("channels:read", "groups:read"),
        "auth_test": None,
    }
    code = "".join(p.read_text() for p in (ROOT / "bot" / "adapters" / "slack").glob("*.py"))
    called = set(
        re.findall(
            r"\.(chat_\w+|usergroups_\w+|users_\w+|reactions_\w+|files_\w+|auth_test|views_\w+"
            r"|conversations_\w+)\(",
            code,
        )
    )
    assert called <= set(scope_of), f"a Web API method without a known scope: {called}"
    needed = {
        scope
        for method in called
        for scope in (
            scope_of[method] if isinstance(scope_of[method], tuple) else (scope_of[method],)
        )
    } - {None} | {"commands"}
    assert set(manifest["oauth_config"]["scopes"]["bot"]) == needed
