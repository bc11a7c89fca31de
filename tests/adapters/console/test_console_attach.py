"""The console chat says what an attached file is: the memory chart (a PNG) or the
evidence bundle (a tar.gz), with where it is."""

from __future__ import annotations

import io

import pytest

from bot.adapters.console.chat import ConsoleChat


@pytest.mark.parametrize(
    ("path", "text", "printed"),
    [
        (
            "/var/lib/pitcrew/bundles/inc-1-train-raycluster-x7k2p.tar.gz",
            "Evidence bundle of RayJob ml/train (1.5 KiB)",
            "  ↳ [pitcrew/1] Evidence bundle of RayJob ml/train (1.5 KiB)\n"
            "    bundle: /var/lib/pitcrew/bundles/inc-1-train-raycluster-x7k2p.tar.gz\n",
        ),
        (
            "/var/lib/pitcrew/charts/inc-1.png",
            "Memory of gpu-group ▁▃▇",
            "  ↳ [pitcrew/1] Memory of gpu-group ▁▃▇\n    chart: /var/lib/pitcrew/charts/inc-1.png\n",
        ),
        ("/tmp/notes.txt", "notes", "  ↳ [pitcrew/1] notes\n    file: /tmp/notes.txt\n"),
    ],
)
def test_an_attached_file_is_named_for_what_it_is(path: str, text: str, printed: str) -> None:
    out = io.StringIO()
    ConsoleChat(out, width=200).attach("pitcrew/1", path, text)
    assert out.getvalue() == printed
