"""Alerts from a real Alertmanager reach `pitcrew run` and join the card of the workload
they are about, checked on the Block Kit the Slack emulator received.

A real rule fires in Prometheus over a series the test exposes (a worker pod of the
seed RayJob's gpu-group OOMKilled), Alertmanager posts it to the daemon's
/alertmanager with its bearer token, and the pod's own status (its `kubectl
describe`, with the RayJob whose RayCluster it is) reaches the daemon's /ingest: one
incident, one card naming both; the series goes away, the rule resolves, and the card
says so. A DCGM-style Xid alert (`amtool alert add`) on the node a Ray worker died on
makes `gpu_fault` the card's root cause with the node's cordon to approve; an Xid
alert on a node with no Ray worker gets a card of its own. Requests the receiver must
refuse are refused with a 4xx naming the problem, counted in /metrics.
"""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.alertmanager.conftest import TOKEN, Receiver, Rules
from tests.support.slack_emulator import Posted

pytestmark = [pytest.mark.slack, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
SEED = ROOT / "examples" / "seed"
DATA = ROOT / "tests" / "data"
POD = "verl-ppo-qwen-raycluster-x7k2p-gpu-group-worker-9zq4f"
SERIES = (
    "# TYPE kube_pod_container_status_last_terminated_reason gauge\n"
    f'kube_pod_container_status_last_terminated_reason{{namespace="ml-train",pod="{POD}",'
    'container="ray-worker",reason="OOMKilled",uid="7d2c1f0e"} 1\n'
)


def wait_until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.2)


def post(url: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=body, headers=headers or {}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def oversized(port: int) -> tuple[int, Any]:
    """A request declaring 2 MiB of body, its head only: the answer comes before the body
    (sending the body too races the server closing the connection)."""
    head = (
        f"POST /alertmanager HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {2 << 20}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.encode())
        reply = b""
        while not reply.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
    status_line, _, rest = reply.partition(b"\r\n")
    return int(status_line.split()[1]), json.loads(rest.partition(b"\r\n\r\n")[2])


def section(card: Posted, name: str) -> str:
    """The text of the card's block whose id starts with `name.`."""
    for block in card.blocks:
        if block.get("block_id", "").startswith(f"{name}."):
            text = block.get("text") or block["elements"][0]  # a section, or a context
            return str(text["text"])
    return ""


def card_text(card: Posted) -> str:
    return json.dumps(card.blocks)


def test_a_rule_firing_on_a_rayjobs_worker_pod_and_its_oomkilled_status_are_one_card(
    receiver: Receiver, rules: Rules
) -> None:
    pitcrew, slack = receiver.pitcrew, receiver.slack
    for name in ("rayjob.yaml", "worker-pod.describe.txt"):  # what the Kubernetes watch says
        assert post(f"{pitcrew.url}/ingest?origin={name}", (SEED / name).read_bytes())[0] == 202
    started = time.monotonic()
    rules.target.text = SERIES
    card = wait_until(
        lambda: next((c for c in slack.parents() if section(c, "alerts")), None),
        60,
        "the card to show the alert",
    )
    seconds = time.monotonic() - started
    assert len(slack.parents()) == 1  # one card: the alert joined the RayJob's incident
    assert "RayJob ml-train/verl-ppo-qwen" in card_text(card)
    assert "OOMKilled" in section(card, "evidence")
    alerts = section(card, "alerts")
    firing = re.fullmatch(
        r"\*Alerts:\*\n• KubeContainerOOMKilled firing since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d: "
        r"Container ray-worker was OOMKilled\. · <(?P<rule>http://[^|>]+)\|rule> · "
        r"<(?P<am>http://alertmanager\.test:9093/#/alerts\?[^|>]+)\|Alertmanager> · "
        r"<(?P<silence>http://alertmanager\.test:9093/#/silences/new\?filter=[^|>]+)\|silence "
        r"it in Alertmanager>\n_pitcrew's Silence mutes this workload's cards; a silence in "
        r"Alertmanager mutes the alert itself, wherever Alertmanager sends it\._",
        alerts,
    )
    assert firing is not None, alerts
    assert (
        f":{rules.prometheus.port}/graph?g0.expr=kube_pod_container_status_last" in firing["rule"]
    )
    assert "pod%3D%22" + POD + "%22" in firing["silence"]
    print(f"alert on the card {seconds:.1f} s after the series appeared")

    rules.target.text = ""  # the series goes away: the rule resolves
    wait_until(
        lambda: "KubeContainerOOMKilled resolved at" in section(slack.parents()[0], "alerts"),
        60,
        "the card to show the alert resolved",
    )
    card = slack.parents()[0]
    assert len(slack.parents()) == 1
    assert "silence it in Alertmanager" not in section(card, "alerts")
    assert section(card, "status").startswith("*Status:* open")  # the pod's status still stands


def worker_died_on(node: str) -> bytes:
    """A KubeRay worker pod whose ray-worker exited 1 and crash-loops, on `node`."""
    pod = json.loads((DATA / "inputs" / "pod-oomkilled.json").read_text())
    pod["spec"]["nodeName"] = node
    status = pod["status"]["containerStatuses"][0]
    status["lastState"]["terminated"].update(reason="Error", exitCode=1)
    return json.dumps(pod).encode()


def xid(alertmanager: Any, node: str) -> None:
    alertmanager.add(
        "alertname=GPUXidError",
        f"Hostname={node}",
        "gpu=3",
        "UUID=GPU-5b7c9e2a-41f3-8d6e-2c0a-9f1e3d5b7a90",
        "modelName=NVIDIA H100 80GB HBM3",
        "err_code=79",
        "err_msg=GPU has fallen off the bus",
        "severity=critical",
        annotations=(f"summary=GPU 3 on {node} reported Xid 79",),
        generator_url="http://prometheus.test:9090/graph?g0.expr=DCGM_FI_DEV_XID_ERRORS+%3E+0",
    )


def test_an_xid_alert_on_the_node_a_ray_worker_died_on_is_its_gpu_fault(receiver: Receiver) -> None:
    pitcrew, slack = receiver.pitcrew, receiver.slack
    xid(receiver.alertmanager, "gpu-h100-node-7")
    assert (
        post(f"{pitcrew.url}/ingest?origin=pod.json", worker_died_on("gpu-h100-node-7"))[0] == 202
    )
    card = wait_until(
        lambda: next((c for c in slack.parents() if "GPUXidError" in section(c, "alerts")), None),
        60,
        "the worker's card to show the Xid alert",
    )
    text = card_text(card)
    assert "RayCluster rlhf/openrlhf-ppo-raycluster-m2d8k" in text
    assert section(card, "cause").startswith(
        "*What broke:* A GPU fault: the NVIDIA driver reported Xid 79"
    )
    buttons = [
        e["text"]["text"] for b in card.blocks if b["type"] == "actions" for e in b["elements"]
    ]
    assert "Approve k8s.cordon_node" in buttons
    assert "crash_loop_backoff" in section(card, "symptoms")

    xid(receiver.alertmanager, "gpu-node-9")  # a node no Ray worker failed on
    alone = wait_until(
        lambda: next((c for c in slack.parents() if "gpu-node-9" in card_text(c)), None),
        60,
        "a card for the node",
    )
    assert alone.text.startswith(
        "[CRITICAL] GPU hardware or driver fault (Xid, ECC, illegal memory access): Node gpu-node-9"
    )
    assert len(slack.parents()) == 2


def test_requests_the_receiver_must_refuse_are_refused_and_counted(receiver: Receiver) -> None:
    url = f"{receiver.pitcrew.url}/alertmanager"
    resolved = (DATA / "alertmanager" / "kube-pod-crashlooping-resolved.json").read_bytes()
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert post(url, resolved) == (
        403,
        {"error": "/alertmanager needs the credentials this daemon was given"},
    )
    assert post(url, resolved, {"Authorization": "Bearer wrong"})[0] == 401
    assert oversized(receiver.pitcrew.port) == (413, {"error": f"the body is over {1 << 20} bytes"})
    assert post(url, b'{"version": "4"}', bearer) == (
        400,
        {"error": "alerts: expected a list of at least one alert"},
    )
    assert post(url, resolved, bearer) == (202, {"accepted": 1})
    assert post(url, resolved, bearer)[0] == 409
    with urllib.request.urlopen(f"{receiver.pitcrew.url}/metrics", timeout=10) as response:
        metrics = response.read().decode()
    counted = dict(
        re.findall(
            r'pitcrew_ingest_rejected_total\{path="/alertmanager",reason="(\w+)"\} (\S+)', metrics
        )
    )
    assert counted == {
        "unauthenticated": "1.0",
        "bad_credentials": "1.0",
        "too_large": "1.0",
        "malformed": "1.0",
        "replayed": "1.0",
    }
