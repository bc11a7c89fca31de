"""The card an on-call engineer reads at 3 a.m.: above the first divider it answers what
broke (the root cause in one sentence naming the object and the number), what to do
(the one action to approve, or the playbook's first remediation steps and its runbook
when no action fits) and how sure pitcrew is; the seed card holds a block and character
budget, shows short source names and never a directory; a playbook's `code` stays code.
Checked on what the Slack Web API emulator received."""

from __future__ import annotations

import json
import re
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.adapters.slack.limits import text_size
from bot.core.actions.approvals import reconcile
from bot.core.incidents.reports import build_report
from bot.core.inputs import InputPart
from bot.core.inputs.reader import read_stream
from bot.core.model import Incident, ObjectRef, Report
from tests.e2e.slack.conftest import SEED, T0, engine
from tests.support.slack_emulator import SlackEmulator, block_kit_errors

pytestmark = pytest.mark.slack

PLAYBOOKS = Path(__file__).resolve().parents[3] / "playbooks"
# The seed card's budget: a card that fits a laptop screen at Slack's width.
MAX_BLOCKS = 12
MAX_CHARS = 3_600
ABSOLUTE_PATH = re.compile(r"(?:^|[\s(`'\"])/(?:[\w.-]+/)+[\w.-]+")


def incident_of(parts: list[InputPart], workload: ObjectRef) -> Incident:
    return Incident(
        id="inc-card000001",
        key=str(workload),
        opened_at=T0,
        updated_at=T0,
        diagnosis=engine().diagnose(parts),
        workload=workload,
        cluster="gpu-prod",
        namespace=workload.namespace,
    )


def seed_with_absolute_paths() -> Report:
    """The seed files read as a daemon in a pod reads them: by their absolute path."""
    parts = [
        part
        for path in sorted(SEED.iterdir())
        for part in read_stream(BytesIO(path.read_bytes()), str(path.resolve()))
    ]
    incident = incident_of(parts, ObjectRef("RayJob", "verl-ppo-qwen", "ml-train"))
    return build_report(incident, reconcile(incident, (), T0))


def cuda_oom() -> Report:
    """The CUDA OOM of a verl rollout on a 24 GB GPU (cuda-oom.yaml's own example): no
    action fits, the playbook's remediation is what to do."""
    examples = yaml.safe_load((PLAYBOOKS / "cuda-oom.yaml").read_text())["examples"]
    (example,) = (e for e in examples if e["name"].startswith("verl rollout CUDA OOM"))
    parts = list(read_stream(BytesIO(example["input"].encode()), "/var/log/ray/driver.log"))
    incident = incident_of(parts, ObjectRef("RayJob", "verl-grpo", "ml-train"))
    return build_report(incident, reconcile(incident, (), T0))


def posted(make_chat: Any, emulator: SlackEmulator, report: Report) -> list[dict[str, Any]]:
    make_chat().post("pitcrew", report)
    (message,) = emulator.parents()
    assert block_kit_errors(message.blocks) == []
    return list(message.blocks)


def above_the_divider(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    first = next(i for i, b in enumerate(blocks) if b["type"] == "divider")
    return blocks[:first]


def first_section(blocks: list[dict[str, Any]]) -> str:
    return str(next(b for b in blocks if b["type"] == "section")["text"]["text"])


def test_the_seed_card_answers_what_broke_what_to_do_and_how_sure_first(
    make_chat: Any, emulator: SlackEmulator
) -> None:
    blocks = posted(make_chat, emulator, seed_with_absolute_paths())
    assert first_section(blocks) == (
        "*What broke:* Pod `ml-train/verl-ppo-qwen-raycluster-x7k2p-gpu-group-worker-9zq4f`"
        " (container `ray-worker`) was OOMKilled at its 16Gi memory limit (exit code 137).\n"
        "*Do:* approve the plan, one step after the other:\n"
        "1. *k8s.bump_memory*: RayCluster ml-train/verl-ppo-qwen-raycluster-x7k2p"
        " workerGroupSpecs[gpu-group].containers[ray-worker].resources.limits.memory:"
        " 16Gi → 24Gi (× 1.5: no memory metrics)\n"
        "2. *kuberay.recreate_rayjob*: delete RayJob ml-train/verl-ppo-qwen, then create it"
        " again with the same spec\n"
        "_KubeRay creates a new RayCluster (or uses the selected one) and submits again._\n"
        "*How sure:* strong: worker-pod.describe.txt: container ray-worker last terminated:"
        " OOMKilled (exit code 137)"
    )
    top = above_the_divider(blocks)
    (decision,) = [b for b in top if b["type"] == "actions"]
    approve, reject = decision["elements"]
    assert approve["text"]["text"] == "Approve plan: k8s.bump_memory → kuberay.recreate_rayjob"
    assert approve["style"] == "primary"
    assert reject["text"]["text"] == "Reject"


def test_the_seed_card_holds_its_budget_and_names_no_directory(
    make_chat: Any, emulator: SlackEmulator
) -> None:
    blocks = posted(make_chat, emulator, seed_with_absolute_paths())
    shown = json.dumps(blocks, ensure_ascii=False)
    assert len(blocks) <= MAX_BLOCKS
    assert text_size(blocks) <= MAX_CHARS
    assert ABSOLUTE_PATH.findall(shown) == []
    assert str(SEED) not in shown
    evidence = next(b for b in blocks if b["block_id"].startswith("evidence."))
    assert evidence["text"]["text"].splitlines()[:5] == [
        "*Evidence* (8 lines in the thread)",
        "```",
        "worker-pod.describe.txt: container ray-worker last terminated: OOMKilled (exit code 137)",
        "driver.log:44: (TaskRunner pid=1234) ValueError: The name qwAKMv_register_center"
        " (namespace=None) is already taken. Please use a different name or get the …",
        "driver.log:18: (raylet, ip=10.0.3.17) A worker died or was killed while executing a task"
        " by an unexpected system error. To troubleshoot the problem, check …",
    ]
    # symptoms once: no explanation of each again on the card (it is in the thread)
    assert shown.count("named_actor_conflict: Named actor already taken") == 1


def test_the_cuda_oom_card_shows_the_playbooks_remediation_and_runbook(
    make_chat: Any, emulator: SlackEmulator
) -> None:
    blocks = posted(make_chat, emulator, cuda_oom())
    assert first_section(blocks) == (
        "*What broke:* A worker ran out of GPU memory on GPU 0: it tried to allocate 2.32 GiB"
        " of a 23.54 GiB card with 1.12 GiB free in"
        " `ray::WorkerDict.actor_rollout_compute_log_prob()`.\n"
        "*Do* (no action pitcrew can run fits):\n"
        "1. Use less GPU memory per worker: a smaller per-GPU batch or micro-batch, shorter"
        " sequences, gradient checkpointing or more sharding (FSDP/ZeRO offload, tensor"
        " parallelism).\n"
        "2. With a rollout engine on the same GPUs (verl, OpenRLHF, vLLM), lower its"
        " `gpu_memory_utilization` (in verl `actor_rollout_ref.rollout.gpu_memory_utilization`,"
        " e.g. 0.6 → 0.4) so the trainer keeps room.\n"
        "*Runbook:* <https://pytorch.org/docs/stable/notes/cuda.html#environment-variables>\n"
        "*How sure:* strong: driver.log:3: (TaskRunner pid=1187)"
        " ray.exceptions.RayTaskError(OutOfMemoryError):"
        " ray::WorkerDict.actor_rollout_compute_log_prob() (pid=23…"
    )
    shown = json.dumps(blocks, ensure_ascii=False)
    assert "\u02cb" not in shown  # a playbook's backticks reach Slack as backticks
    assert [b for b in above_the_divider(blocks) if b["type"] == "actions"] == []
    assert ABSOLUTE_PATH.findall(shown) == []
