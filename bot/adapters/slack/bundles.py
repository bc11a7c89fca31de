"""`/pitcrew bundle INCIDENT` writes the incident's evidence out into Slack.

Why this exists: the person asking is in Slack, not on the daemon's host; a list of
bundles and a `pitcrew bundle` command to run elsewhere leaves them where they were. The
daemon writes the incident's bundles as one tar.gz (`BundleWriter`, bound by the app) and
this uploads it with `files.uploadV2` (the `files:write` scope) into the card's thread,
or the channel the command came from when the incident has no card, and answers where
it went. A refused upload is said, with the bundles listed as before. Who may ask is the
evidence policy's (`bot.core.incidents.evidence_access`), checked and audited by the
service before anything here runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.adapters.slack.blocks import md
from bot.adapters.slack.commands import explain_bundles


@dataclass(frozen=True, slots=True)
class BundleFile:
    """An incident's bundles written out as one tar.gz."""

    path: str
    size: int  # bytes
    count: int  # bundles in it (one per capture: a retried RayJob has one per attempt)
    card_ref: str  # `CHANNEL_ID:TS` of the incident's card, "" when it has none


_USER = re.compile(r"[UW][A-Z0-9]{2,}")
_CHANNEL = re.compile(r"[CGD][A-Z0-9]{2,}")

BundleWriter = Callable[[str], BundleFile | None]
"""Write an incident's bundles as one tar.gz; None when none is kept."""


def upload_bundle(
    client: WebClient,
    incident_id: str,
    written: BundleFile,
    channel: str,
    user: str,
    kept: Sequence[tuple[str, int, datetime]],
) -> str:
    """Upload `written` into the card's thread (else `channel`); the answer to `user`."""
    card_channel, _, thread = written.card_ref.partition(":")
    target = card_channel if thread else channel
    name = Path(written.path).name
    summary = f"{written.count} bundle(s), {written.size / 1024:.1f} KiB"
    asker = f"<@{user}>" if _USER.fullmatch(user) else md(user, 64)
    comment = f"Evidence bundles of `{md(incident_id, 130)}` ({summary}), asked for by {asker}"
    try:
        client.files_upload_v2(
            channel=target,
            thread_ts=thread or None,
            file=written.path,
            filename=name,
            title=name,
            initial_comment=comment,
        )
    except SlackApiError as error:
        said = str(error.response.get("error") or error)
        return (
            f"{explain_bundles(incident_id, kept)}\n"
            f"Could not upload `{md(name, 140)}`: Slack refused files.uploadV2: {md(said, 200)}."
        )
    shown = f"<#{target}>" if _CHANNEL.fullmatch(target) else md(target, 80)
    where = f"the card's thread in {shown}" if thread else shown
    return f":package: Uploaded `{md(name, 140)}` ({summary}) to {where}."
