"""An evidence line's source as a card names it: which file or which object, in a few
characters, never a directory."""

from __future__ import annotations

import pytest

from bot.core.origins import short_source


@pytest.mark.parametrize(
    ("origin", "shown"),
    [
        ("/home/ray/pitcrew/examples/seed/driver.log", "driver.log"),
        ("examples/seed/worker-pod.describe.txt", "worker-pod.describe.txt"),
        ("examples/seed/rayjob.yaml (ml-train/rayjob/verl-ppo-qwen message)", "rayjob.yaml"),
        ("ml-train/pod/verl-ppo-qwen-raycluster-x7k2p-gpu-group-worker-9zq4f", "pod/…-9zq4f"),
        ("ml-train/rayjob/verl-ppo-qwen", "rayjob/verl-ppo-qwen"),
        (
            "ml-train/pod/verl-ppo-qwen-raycluster-x7k2p-gpu-group-worker-9zq4f [ray-worker] "
            "previous log",
            "pod/…-9zq4f [ray-worker] previous log",
        ),
        (
            "ray://verl/actors/4f1e0c9a3b7d52e8a6c1d0f201000000",
            "actors/4f1e0c9a3b7d52e8a6c1d0f201000000",
        ),
        ("<stdin>", "<stdin>"),
        ("", ""),
    ],
)
def test_short_source(origin: str, shown: str) -> None:
    assert short_source(origin) == shown
