"""The catch-all (docs/failure-classes.md, "Precedence"): a user's own exception with no infrastructure class
anywhere in the input is `application_error`, likely (weak evidence), never offered an
action; a Ray death wrapped the same way is a worker death; and the moment any
infrastructure class is found, the catch-all is dropped, not kept as its symptom."""

from __future__ import annotations

import pytest

from bot.adapters.files.playbooks import builtin_engine
from bot.core.diagnosis.engine import Engine, to_json

TASK_RUNNER_KEY_ERROR = """\
Traceback (most recent call last):
  File "/verl/trainer/main_ppo.py", line 39, in main
    run_ppo(config)
  File "/ray/_private/worker.py", line 919, in get_objects
    raise value.as_instanceof_cause()
ray.exceptions.RayTaskError(KeyError): ray::TaskRunner.run() (pid=221840, ip=172.31.45.209, actor_id=dc2f3c95ffb4fc301709c93f01000000)
  File "/workspace/verl/trainer/main_ppo.py", line 217, in run
    trainer.fit()
  File "/workspace/verl/workers/reward_manager/naive.py", line 203, in _compute_eval_reward
    ground_truth = data_item.non_tensor_batch["reward_model"]["ground_truth"]
KeyError: 'reward_model'
"""
OOM_KILLED_POD = """\
Name:         train-grpo-raycluster-x7k2p-gpu-group-worker-9zq4f
Namespace:    ml-train
Containers:
  ray-worker:
    State:          Running
    Last State:     Terminated
      Reason:       OOMKilled
      Exit Code:    137
    Restart Count:  1
"""


@pytest.fixture(scope="module")
def engine() -> Engine:
    return builtin_engine()


@pytest.mark.parametrize(
    ("name", "text", "exception"),
    [
        ("a RayTaskError(KeyError) from TaskRunner.run", TASK_RUNNER_KEY_ERROR, "KeyError"),
        (
            "the wrapper cut after its first line",
            "ray.exceptions.RayTaskError(AssertionError): ray::main_task() (pid=36792, ip=172.21.128.147)\n"
            '  File "/llm/Logic-RL/verl/trainer/main_ppo.py", line 191, in main_task\n',
            "AssertionError",
        ),
        (
            "an ordinary exception quoted alone, with a timestamp",
            "This command will raise an error as below:\n\n"
            "[2026-03-11 17:47:54] RuntimeError: Expected all tensors to be on the same device, "
            "but found at least two devices, cuda:3 and cuda:0!\n",
            "RuntimeError",
        ),
        (
            "an actor whose own constructor raised",
            "ray.exceptions.ActorDiedError: The actor died because of an error raised in its "
            "creation task, ray::LLMRayActor.__init__() (pid=236832, ip=0.0.0.0)\n"
            '  File "/share/OpenRLHF/openrlhf/trainer/ray/vllm_engine.py", line 31, in __init__\n'
            "ValueError: max_model_len (32768) is greater than the derived max_model_len (4096)\n",
            "ValueError",
        ),
        (
            "a CUDA device-side assert in the job's kernel",
            "(WorkerDict pid=812) RuntimeError: CUDA error: device-side assert triggered\n"
            "(WorkerDict pid=812) Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n",
            "RuntimeError",
        ),
    ],
)
def test_a_users_own_exception_alone_is_a_likely_application_error(
    engine: Engine, name: str, text: str, exception: str
) -> None:
    out = to_json(engine.diagnose_text(text, "driver.log"))
    assert (out["primary"], out["likely"], out["secondary"]) == ("application_error", True, [])
    assert [a for a in out["actions"] if a["offered"]] == []
    captures = out["findings"][0]["captures"]
    assert exception in (captures.get("inner_exception"), captures.get("exception"))


def test_the_exit_code_wrapper_alone_is_only_likely(engine: Engine) -> None:
    text = '{"type": "SUBMISSION", "job_id": "02000000", "status": "FAILED", "message": "Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):\\nstep 3 done\\n"}\n'
    out = to_json(engine.diagnose_text(text, "job.json"))
    assert (out["primary"], out["likely"]) == ("application_error", True)


def test_a_ray_death_wrapped_by_the_task_is_a_worker_death(engine: Engine) -> None:
    text = (
        "ray.exceptions.RayTaskError(ActorDiedError): ray::main_task() (pid=7890, ip=10.120.7.57)\n"
        '  File "/verl/trainer/ppo/ray_trainer.py", line 610, in fit\n'
    )
    out = to_json(engine.diagnose_text(text, "driver.log"))
    assert (out["primary"], out["likely"]) == ("worker_died_system_error", False)


def test_the_catch_all_is_dropped_when_an_infrastructure_class_is_found(engine: Engine) -> None:
    out = to_json(engine.diagnose_text(OOM_KILLED_POD + "\n" + TASK_RUNNER_KEY_ERROR, "paste"))
    assert out["primary"] == "pod_oom_killed"
    assert "application_error" not in out["secondary"]
    assert [f["category"] for f in out["findings"]] == ["pod_oom_killed"]
