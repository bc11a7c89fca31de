"""`pitcrew demo`: the whole loop on the embedded default (see `bot.app.demo.runner`).

The demo runs a real local Ray head and kmock's Kubernetes API emulator, which the
daemon's runtime (and so the container image) does not install: they come with the
`demo` extra, and `unavailable()` says so before anything of the demo is imported.
"""

from __future__ import annotations

from importlib.util import find_spec

EXTRA = "pip install 'pitcrew[demo]'"
PACKAGES = ("ray", "kmock")


def unavailable() -> str | None:
    """Why the demo cannot run here (its packages are not installed), or None."""
    missing = [name for name in PACKAGES if find_spec(name) is None]
    if not missing:
        return None
    return (
        f"the demo needs {' and '.join(missing)}, which pitcrew's runtime does not install: {EXTRA}"
    )
