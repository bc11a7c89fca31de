"""Never silent on a failure it does not know: with no finding but lines that look like
a failure, the verdict is "pitcrew does not know this failure" with those lines; healthy
text (autoscaler and operator chatter, deprecation warnings, a job that succeeded, a
graceful `ray stop`) stays "No failure found"."""

from __future__ import annotations

import pytest

from bot.adapters.files import cache
from bot.adapters.files.playbooks import builtin_engine, load_builtin
from bot.core.diagnosis.engine import Engine, to_json

NO_FAILURE = "No failure found: nothing in the input matches a playbook."
UNKNOWN_HEAD = "pitcrew does not know this failure: no playbook matches it, but these lines look like a failure:"

HEALTHY = {
    "autoscaler chatter": """\
======== Autoscaler status: 2025-11-03 10:00:02.118123 ========
Node status
---------------------------------------------------------------
Active:
 1 head
 2 gpu-workers
Pending:
 (no pending nodes)
Recent failures:
 (no failures)
Demands:
 (no resource demands)
(autoscaler +5s) Tip: use `ray status` to view detailed cluster status. To disable these messages, set RAY_SCHEDULER_EVENTS=0.
(autoscaler +5s) Adding 2 node(s) of type gpu-workers.
(autoscaler +2m3s) Resized to 48 CPUs, 8 GPUs.
(autoscaler +20m) Removing 1 nodes of type gpu-workers (idle).
2025-11-03 10:20:02,118\tINFO autoscaler.py:469 -- The autoscaler took 0.071 seconds to complete the update iteration.
""",
    "operator chatter": """\
{"level":"info","ts":"2025-11-03T10:00:02.118Z","logger":"controllers.RayCluster","msg":"reconcilePods","RayCluster":{"name":"train-grpo-raycluster-x7k2p","namespace":"ml"},"worker group":"gpu-workers","maxReplicas":4,"minReplicas":0,"replicas":2}
{"level":"info","ts":"2025-11-03T10:42:17.000Z","logger":"controllers.RayJob","msg":"RayJob","RayJob":{"name":"train-grpo","namespace":"ml"},"JobStatus":"SUCCEEDED","JobDeploymentStatus":"Complete"}
Events:
  Type    Reason             Age   From                   Message
  ----    ------             ----  ----                   -------
  Normal  CreatedHeadPod     12m   raycluster-controller  Created head Pod ml/train-grpo-raycluster-x7k2p-head-9xq2z
  Normal  DeletedRayCluster  1m    rayjob-controller      Deleted RayCluster ml/train-grpo-raycluster-x7k2p
""",
    "deprecation warnings": """\
/usr/local/lib/python3.10/site-packages/ray/_private/worker.py:2051: FutureWarning: Tip: In future versions of Ray, Ray will no longer override accelerator visible devices env var if num_gpus=0 or num_gpus=None (default). To enable this behavior and turn off this error message, set RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=0
  warnings.warn(
2025-11-03 10:00:02,118\tWARNING deprecation.py:50 -- DeprecationWarning: `ray.air.session.report` has been deprecated. Use `ray.train.report` instead. This will raise an error in the future!
""",
    "a job that succeeded": """\
2025-11-03 10:00:02,130\tINFO worker.py:1810 -- Connected to Ray cluster. View the dashboard at 10.4.0.9:8265
epoch 3 step 1200 loss 0.412 reward 0.87
2025-11-03 10:42:17,000\tSUCC cli.py:61 -- Job 'raysubmit_mN4b7Vc2Xz8Lk1Qp' succeeded
{"type": "SUBMISSION", "job_id": "05000000", "submission_id": "raysubmit_mN4b7Vc2Xz8Lk1Qp", "status": "SUCCEEDED", "message": "Job finished successfully.", "error_type": null}
""",
    "a graceful ray stop": """\
$ ray stop
Stopped all 6 Ray processes.
[2025-11-03 10:50:01,004 I 233 233] main.cc:298: Raylet received SIGTERM, shutting down...
(raylet) Raylet is terminated. Termination is graceful.
""",
    "a benign line a weak signature knows": """\
[2025-05-13 10:53:26,347 W 3061289 3061289] actor_manager.cc:110: Failed to look up actor with name 'N4K03i_register_center'. This could because 1. You are trying to look up a named actor you didn't create.
""",
    "a pod deleted under kubectl get -w (its last rows say Error)": """\
raycluster-kuberay-workergroup-worker-lpnx6   1/1     Running             0          21s
raycluster-kuberay-workergroup-worker-lpnx6   1/1     Terminating         0          4m11s
raycluster-kuberay-workergroup-worker-lpnx6   0/1     Error               0          4m12s
""",
    "a readiness probe failing twice while the head starts": """\
Events:
  Type     Reason     Age                From     Message
  ----     ------     ----               ----     -------
  Normal   Started    40s                kubelet  Started container ray-head
  Warning  Unhealthy  31s (x2 over 36s)  kubelet  Readiness probe failed: HTTP probe failed with statuscode: 503
""",
    "an error its emitter retried, debug chatter and a conflict the controller retries": """\
(TaskRunner pid=1234) ConnectionResetError: [Errno 104] Connection reset by peer (wandb upload retried)
DEBUG 06-12 19:58:31 [__init__.py:76] Exception happens when checking CUDA platform: NVML Shared Library Not Found
2023-07-14T08:59:28.502Z	ERROR	controllers.RayCluster	Update status error	{"error": "Operation cannot be fulfilled on rayclusters.ray.io \\"x\\": the object has been modified; please apply your changes to the latest version and try again"}
""",
}


@pytest.fixture(scope="module")
def engine() -> Engine:
    return builtin_engine()


@pytest.fixture(scope="module")
def playbooks_only() -> Engine:
    """The built-in playbooks without the message inventory, which names the lines it
    knows (its own tests say how): here, which lines are said at all."""
    return Engine(load_builtin(), cache.PATTERNS)  # its databases compiled once, kept


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_text_is_no_failure_found(engine: Engine, name: str) -> None:
    diagnosis = engine.diagnose_text(HEALTHY[name], "in.txt")
    assert (diagnosis.findings, diagnosis.unknown, diagnosis.text) == ((), (), NO_FAILURE)


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        (
            "step:41 - actor/pg_loss:0.012\n"
            "Traceback (most recent call last):\n"
            '  File "reward.py", line 3, in <module>\n'
            "foo.bar.FrobnicationFault: the widget is gone\n",
            (
                "in.txt:2  Traceback (most recent call last):",
                "in.txt:4  foo.bar.FrobnicationFault: the widget is gone",
            ),
        ),
        (
            "(TaskRunner pid=1187) FATAL 2025-11-03 trainer.py:88 -- reward server returned 503\n",
            (
                "in.txt:1  (TaskRunner pid=1187) FATAL 2025-11-03 trainer.py:88 -- reward server returned 503",
            ),
        ),
        (
            "+ python train.py\nsetup.sh: line 12: exited with code 3\n",
            ("in.txt:2  setup.sh: line 12: exited with code 3",),
        ),
        (  # the exception alone, which only the weak final-exception signature matches
            "sky.exceptions.NoClusterLaunchedError: No cluster name found in the pool.\n",
            (
                "in.txt:1  sky.exceptions.NoClusterLaunchedError: No cluster name found in the pool.",
            ),
        ),
        (  # a traceback cut before its exception, behind Ray's process prefix
            "(LLMRayActor pid=4335) Exception raised in creation task: ray::LLMRayActor.__init__()\n"
            '(LLMRayActor pid=4335)   File "/vllm/engine/llm_engine.py", line 109, in __init__\n'
            "(LLMRayActor pid=4335)     self.llm = LLM(*args, **kwargs)\n",
            (
                'in.txt:2  (LLMRayActor pid=4335)   File "/vllm/engine/llm_engine.py", line 109, in __init__',
            ),
        ),
        (  # glog's F line and a failed check of Ray's C++ core
            "[2025-07-22 15:32:09,880 C 742 742] task_manager.cc:1068: Check failed: it != "
            "submissible_tasks_.end() Tried to fail task that was not pending\n"
            "*** StackTrace Information ***\n",
            (
                "in.txt:1  [2025-07-22 15:32:09,880 C 742 742] task_manager.cc:1068: Check failed: "
                "it != submissible_tasks_.end() Tried to fail task that was not pending",
            ),
        ),
        (  # a Warning Event no playbook knows, in a describe's Events block
            "Events:\n"
            "  Type     Reason           Age   From     Message\n"
            "  ----     ------           ----  ----     -------\n"
            "  Warning  NetworkNotReady  2m    kubelet  network is not ready: container runtime "
            "network not ready: NetworkReady=false\n",
            (
                "in.txt:1  NetworkNotReady: network is not ready: container runtime network not "
                "ready: NetworkReady=false",
            ),
        ),
    ],
)
def test_a_failure_no_playbook_knows_is_said_with_its_lines(
    playbooks_only: Engine, text: str, lines: tuple[str, ...]
) -> None:
    diagnosis = playbooks_only.diagnose_text(text, "in.txt")
    assert diagnosis.findings == ()
    assert diagnosis.unknown == lines
    assert diagnosis.text == "\n".join([UNKNOWN_HEAD, *lines])
    shown = to_json(diagnosis)
    assert (shown["primary"], shown["unknown"]) == (None, list(lines))


def test_a_known_failure_lists_no_unknown_lines(engine: Engine) -> None:
    text = "ray.exceptions.WorkerCrashedError: The worker died unexpectedly while executing this task.\nFATAL other\n"
    diagnosis = engine.diagnose_text(text, "in.txt")
    assert diagnosis.primary is not None
    assert diagnosis.unknown == ()
