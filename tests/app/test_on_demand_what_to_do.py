"""`/pitcrew diagnose`'s answer says what to do when no action fits: the root cause's
playbook's first remediation step and its runbook."""

from __future__ import annotations

from bot.adapters.files.playbooks import builtin_engine
from bot.app.on_demand import Found, summary
from bot.daemon.feed import Context

CUDA_OOM = (
    "(TaskRunner pid=1187) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
    "2.32 GiB. GPU 0 has a total capacity of 23.54 GiB of which 1.12 GiB is free.\n"
)


def test_an_answer_without_an_offer_says_what_to_do() -> None:
    diagnosis = builtin_engine([]).diagnose_text(CUDA_OOM, "driver.log")
    found = Found("Ray job raysubmit_x on cluster c: FAILED", diagnosis, (), Context("c", "ml"))
    assert summary(found, None).splitlines()[-2:] == [
        "What to do: Use less GPU memory per worker: a smaller per-GPU batch or micro-batch, "
        "shorter sequences, gradient checkpointing or more sharding (FSDP/ZeRO offload, tensor "
        "parallelism).",
        "Runbook: https://pytorch.org/docs/stable/notes/cuda.html#environment-variables",
    ]
