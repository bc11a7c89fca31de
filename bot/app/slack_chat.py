"""The Slack chat built from the settings: its own config, checked, and bound.

Why this exists: the Slack adapter takes a `SlackConfig` (tokens, Socket Mode or HTTP,
pacing, the approval policy), never the daemon's `Settings`; this is where one becomes
the other, and where a missing token is reported before anything connects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import SecretStr

from bot.app.factories import cluster_name
from bot.app.settings.sections import Settings
from bot.core.errors import PitcrewError
from bot.daemon.ports import Clock, utcnow

if TYPE_CHECKING:
    from bot.adapters.slack.app import SlackConfig
    from bot.adapters.slack.chat import SlackChat


def _secret(value: SecretStr | None) -> str:
    return "" if value is None else value.get_secret_value()


def slack_config(settings: Settings) -> SlackConfig:
    """The Slack chat's config from the daemon's settings (`chat.slack`, the approval
    policy) and its tokens (from the environment or mounted files)."""
    from bot.adapters.slack.app import SlackConfig

    slack = settings.chat.slack
    secrets = settings.secrets
    return SlackConfig(
        bot_token=_secret(secrets.slack_bot_token),
        app_token=_secret(secrets.slack_app_token),
        signing_secret=_secret(secrets.slack_signing_secret),
        socket_mode=slack.socket_mode,
        api_url=slack.api_url,
        policy=settings.approvals,
        silence_for=slack.silence_for,
        channel_interval=slack.channel_interval,
        ping_interval=slack.ping_interval,
        stale_after=6 * slack.ping_interval,
        events_path=slack.events_path,
        timeout=slack.timeout,
        cluster=cluster_name(settings),
    )


def _checked(settings: Settings) -> SlackConfig:
    config = slack_config(settings)
    if not config.bot_token:
        raise PitcrewError("the Slack chat needs SLACK_BOT_TOKEN (or SLACK_BOT_TOKEN_FILE)")
    if config.socket_mode and not config.app_token:
        raise PitcrewError("Slack Socket Mode needs SLACK_APP_TOKEN (or SLACK_APP_TOKEN_FILE)")
    if not config.socket_mode and not config.signing_secret:
        raise PitcrewError("Slack's HTTP mode needs SLACK_SIGNING_SECRET (or ..._FILE)")
    return config


def slack_chat(settings: Settings, *, clock: Clock = utcnow) -> SlackChat:
    """The Slack chat, not yet bound to the service (what `bot.app.wiring.make_chat` uses)."""
    from bot.adapters.slack.chat import SlackChat

    return SlackChat(_checked(settings), clock=clock)
