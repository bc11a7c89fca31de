"""What names a store: a SQLite file's path, or a PostgreSQL URL, shown without its password.

Why this exists: the settings, the messages and the store itself must tell the two apart
the same way, and no message, log line or `pitcrew config show` may print a password
written into a URL; this is the one place that knows both, with no driver to import.
"""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

URL_SCHEMES = ("postgresql://", "postgres://")


def is_url(location: str | os.PathLike[str] | None) -> bool:
    """A PostgreSQL URL rather than a SQLite file's path."""
    return isinstance(location, str) and location.startswith(URL_SCHEMES)


def redacted(url: str) -> str:
    """The URL without its password, wherever it was written (user:password@, ?password=)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}@{host}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != "password"])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
