"""What an issue, a chat or a log collector wraps around pasted lines is taken away
(bot.core.inputs.pasted), every line kept where it was, so the shapes and signatures
read the lines themselves."""

from __future__ import annotations

import pytest

from bot.adapters.files.playbooks import builtin_engine
from bot.core.inputs.pasted import json_log_line, without_wrappers

KILLED = "ray.exceptions.RayTaskError(KeyError): ray::TaskRunner.run() (pid=1234)"


@pytest.mark.parametrize(
    ("pasted", "read"),
    [
        ("```text\n" + KILLED + "\n```", "\n" + KILLED + "\n"),
        ("> " + KILLED + "\n>> " + KILLED, KILLED + "\n" + KILLED),
        (
            "  | (remote_read pid=1225) Plasma store status:",
            "(remote_read pid=1225) Plasma store status:",
        ),
        ("| pod-a | CrashLoopBackOff | 5 |", "pod-a  CrashLoopBackOff  5"),
        (
            "# kubectl get raycluster -o yaml, trimmed",
            "# kubectl get raycluster -o yaml, trimmed",
        ),
        (
            '`Failed to schedule pod, incompatible with nodepool "x86"`',
            'Failed to schedule pod, incompatible with nodepool "x86"',
        ),
        (
            "Nov 03 10:14:20 gpu-node-7 kubelet[1234]: E1103 10:14:20.123 4711 kuberuntime_manager.go:864] boom",
            "E1103 10:14:20.123 4711 kuberuntime_manager.go:864] boom",
        ),
        (
            "2023-10-19T11:11:54.957723331+08:00 stderr F 2023/10/19 03:11:54 Failed to initialize NVML: x.",
            "2023/10/19 03:11:54 Failed to initialize NVML: x.",
        ),
        (
            "user-directory-646bbbc878-lf4tq   2/3     OOMKilled   16 (5m13s ago)   57m",
            "user-directory-646bbbc878-lf4tq   2/3     OOMKilled   16 (5m13s ago)   57m",
        ),
        (
            "I see:\n\n    " + KILLED + '\n      File "x.py", line 3, in run\n',
            "I see:\n\n" + KILLED + '\n  File "x.py", line 3, in run\n',
        ),
        (
            "[2025-01-01 12:00:00,123 E 4721 4790] node_manager.cc:1: x\r\nnext\r\n",
            "[2025-01-01 12:00:00,123 E 4721 4790] node_manager.cc:1: x\nnext\n",
        ),
        (
            "2025-11-03 10:14:20,123\tINFO worker.py:1 -- healthy",
            "2025-11-03 10:14:20,123\tINFO worker.py:1 -- healthy",
        ),
    ],
    ids=[
        "fence",
        "quotes",
        "pipe prefix",
        "table row",
        "a comment kept",
        "backticks",
        "journal",
        "cri log",
        "restarts with their age kept",
        "indented block",
        "crlf",
        "plain line untouched",
    ],
)
def test_each_wrapper_is_taken_away_and_every_line_kept(pasted: str, read: str) -> None:
    assert without_wrappers(pasted) == read
    assert without_wrappers(pasted).count("\n") == pasted.replace("\r\n", "\n").count("\n")


def test_an_operators_json_log_line_reads_as_a_plain_one() -> None:
    line = (
        '{"level":"error","ts":"2024-06-28T18:09:14.679Z","logger":"controllers.RayJob",'
        '"msg":"failed to create k8s Job","RayJob":{"name":"mick","namespace":"launch"},'
        '"error":"Job.batch \\"mick\\" is invalid:\\nspec.template.spec.restartPolicy: Required value",'
        '"stacktrace":"github.com/ray-project/kuberay/ray-operator/controllers/ray.(*RayJobReconciler)"}'
    )
    assert json_log_line(line) == (
        "2024-06-28T18:09:14.679Z\terror\tcontrollers.RayJob\tfailed to create k8s Job\t"
        'RayJob={"name": "mick", "namespace": "launch"}\t'
        'error=Job.batch "mick" is invalid: spec.template.spec.restartPolicy: Required value'
    )
    assert json_log_line('{"level": broken') == '{"level": broken'


def test_a_quoted_paste_is_diagnosed_as_the_lines_themselves() -> None:
    pasted = (
        "We see this on every worker:\n"
        "```\n"
        "> Warning  Failed  4s  kubelet  Error: failed to create containerd task: failed to create "
        'shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "ray": '
        "executable file not found in $PATH: unknown\n"
        "```\n"
    )
    diagnosis = builtin_engine().diagnose_text(pasted, "issue.md")
    assert diagnosis.primary is not None
    assert (str(diagnosis.primary.category), dict(diagnosis.primary.captures)["command"]) == (
        "container_start_failure",
        "ray",
    )
