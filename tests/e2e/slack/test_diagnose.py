"""`/pitcrew diagnose` for real: the daemon's diagnoser (`bot.app.on_demand`) behind the Slack
app in HTTP mode, asked with correctly signed slash commands about a job that really
failed on the session's Ray head, and about KubeRay objects in the Kubernetes emulator.

Read as a specification: the command is acked at once and answered through the
response_url with what was looked at, the root cause, what else was seen and which
actions are offered; the evidence goes to the pipeline (the sink records it) with
the cluster and namespace the Ray source would give it. An unknown job id, a cluster
that is not configured, a dashboard that does not answer, a Kubernetes target with
no Kubernetes configured: a clear sentence, nothing queued. Malformed targets get
the usage before anything runs."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.http.server import HealthServer
from bot.adapters.slack.chat import SlackChat
from bot.adapters.slack.commands import Diagnose, DiagnoseTarget, Usage, parse
from bot.app.on_demand import Diagnoser
from bot.app.settings.sections import Settings
from bot.app.settings.sources import KubernetesSourceSettings, RaySourceSettings, SourceSettings
from bot.core.inputs import LogText
from bot.core.model import Signal, SourceKind
from bot.daemon.feed import Item, Observation
from tests.e2e.slack.conftest import APPROVER, SeededService, command_body, engine, form, post, sign
from tests.support.ray_jobs import Jobs
from tests.support.slack_emulator import SlackEmulator

pytestmark = pytest.mark.slack


class ListSink:
    """The pipeline's queue, recorded; `full` refuses like a full queue."""

    def __init__(self, full: bool = False) -> None:
        self.items: list[Item] = []
        self.full = full

    def submit(self, item: Item) -> bool:
        if self.full:
            return False
        self.items.append(item)
        return True

    def observations(self) -> list[Observation]:
        return [i for i in self.items if isinstance(i, Observation)]


def ray_settings(*clusters: tuple[str, str]) -> Settings:
    return Settings(
        sources=SourceSettings(
            ray=tuple(
                RaySourceSettings(name=name, address=url, namespace="ml-dx")
                for name, url in clusters
            )
        )
    )


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class Asker:
    """Signed `/pitcrew diagnose …` over HTTP to a Slack chat bound to a diagnoser."""

    def __init__(self, emulator: SlackEmulator, url: str) -> None:
        self.emulator = emulator
        self.url = url
        self.n = 0

    def ask(self, text: str, timeout: float = 60.0) -> tuple[str, str]:
        """(the ack's text, the answer's text)."""
        self.n += 1
        name = f"dx{self.n}"
        body = form(command_body(self.emulator, text, response=name))
        started = time.monotonic()
        reply = post(self.url, body, sign(body))
        assert time.monotonic() - started < 3.0, "not acked within Slack's 3 seconds"
        assert reply.status == 200
        ack = text_of(reply.json())
        if "Diagnosing" not in ack:
            return ack, ""
        path = f"/response/{name}"
        found = self.emulator.wait_for(
            lambda: [body for at, body in self.emulator.responses if at == path],
            timeout=timeout,
            what=f"the answer at {path}",
        )
        answer: dict[str, Any] = found[-1]
        assert answer["response_type"] == "ephemeral"
        return ack, text_of(answer)


def text_of(message: dict[str, Any]) -> str:
    return "\n".join(b["text"]["text"] for b in message["blocks"] if b["type"] == "section")


@pytest.fixture
def bind(
    make_chat: Any, emulator: SlackEmulator, seeded: SeededService, http_server: HealthServer
) -> Any:
    def bound(diagnoser: Diagnoser) -> Asker:
        chat: SlackChat = make_chat(socket_mode=False)
        chat.bind(seeded.service, http=http_server, diagnoser=diagnoser)
        chat.start()
        return Asker(emulator, f"http://127.0.0.1:{http_server.port}/slack/events")

    return bound


# -- parsing --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("raysubmit_Qk8vXw2m", DiagnoseTarget("ray_job", "raysubmit_Qk8vXw2m")),
        ("02000000", DiagnoseTarget("ray_job", "02000000")),
        ("gpu-prod/raysubmit_abc", DiagnoseTarget("ray_job", "raysubmit_abc", cluster="gpu-prod")),
        ("ml-train/pod/w-1", DiagnoseTarget("pod", "w-1", "ml-train")),
        ("ml-train/rayjob/verl", DiagnoseTarget("rayjob", "verl", "ml-train")),
        ("ml-train/raycluster/verl-rc", DiagnoseTarget("raycluster", "verl-rc", "ml-train")),
    ],
)
def test_targets_parse(text: str, target: DiagnoseTarget) -> None:
    assert parse(f"diagnose {text}") == Diagnose(target)
    assert str(target) == text


@pytest.mark.parametrize(
    "text",
    [
        "diagnose",
        "diagnose a b",
        "diagnose /raysubmit_abc",
        "diagnose gpu-prod/",
        "diagnose ml-train/deployment/x",
        "diagnose ML/pod/x",
        "diagnose ml-train/pod/X_Y",
        "diagnose a/b/c/d",
        "diagnose <!channel>",
        "diagnose raysubmit_`rm`",
    ],
)
def test_malformed_targets_get_the_usage(text: str) -> None:
    command = parse(text)
    assert isinstance(command, Usage)
    assert "`diagnose` takes one ray job id" in command.text
    assert "ns/raycluster/NAME" in command.text


# -- without a cluster to ask: clear answers, nothing queued ----------------------------------


def test_nothing_configured_is_said_plainly() -> None:
    sink = ListSink()
    diagnoser = Diagnoser(Settings(), engine().library, sink)
    said = diagnoser(DiagnoseTarget("ray_job", "raysubmit_abc"), APPROVER)
    assert said == ("Cannot diagnose raysubmit_abc: no Ray cluster is configured (sources.ray)")
    said = diagnoser(DiagnoseTarget("rayjob", "verl", "ml-train"), APPROVER)
    assert said.startswith("Cannot diagnose ml-train/rayjob/verl: Kubernetes is not configured")
    assert sink.items == []


def test_an_unknown_cluster_and_an_unreachable_dashboard_are_named() -> None:
    sink = ListSink()
    down = closed_port_url()
    diagnoser = Diagnoser(ray_settings(("gone", down)), engine().library, sink)
    said = diagnoser(DiagnoseTarget("ray_job", "raysubmit_abc", cluster="prod"), APPROVER)
    assert said == (
        "Cannot diagnose prod/raysubmit_abc: no Ray cluster 'prod' in sources.ray "
        "(configured: gone)"
    )
    started = time.monotonic()
    said = diagnoser(DiagnoseTarget("ray_job", "raysubmit_abc"), APPROVER)
    assert time.monotonic() - started < 30
    assert said.startswith(
        "Cannot diagnose raysubmit_abc: no Ray job 'raysubmit_abc' found; could not ask gone: "
    )
    assert down.removeprefix("http://") in said
    assert sink.items == []


# -- a real failed Ray job --------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.ray
def test_a_failed_ray_job_is_diagnosed_and_queued(jobs: Jobs, bind: Any) -> None:
    failed = jobs.submit("missing_s2.py")
    assert jobs.wait(failed)["status"] == "FAILED"
    sink = ListSink()
    settings = ray_settings(("down", closed_port_url()), ("local", jobs.url))
    asker = bind(Diagnoser(settings, engine().library, sink))

    ack, answer = asker.ask(f"diagnose {failed}")
    assert f"Diagnosing `{failed}`" in ack
    lines = answer.splitlines()
    assert lines[0] == f"*{failed}*"
    assert lines[1].startswith(f"Ray job {failed} on cluster local: FAILED (")
    assert "Root cause: dependency_runtime_env" in answer
    assert "Sent to the incident pipeline" in answer
    assert "Offered:" not in answer  # a missing module is not something to retry

    (observation,) = sink.observations()
    assert observation.context.cluster == "local"
    assert observation.context.namespace == "ml-dx"
    signal = observation.parts[0]
    assert isinstance(signal, Signal)
    assert signal.source is SourceKind.RAY_JOB
    assert signal.fields["submission_id"] == failed
    assert signal.fields["namespace"] == "ml-dx"
    logs = b"".join(
        b"".join(p.chunks)
        for p in observation.parts
        if isinstance(p, LogText) and p.source is SourceKind.DRIVER_LOG
    )
    assert b"No module named 'flash_attn_pitcrew_missing'" in logs

    # The cluster named: the same; an unknown id: said, nothing queued.
    _, answer = asker.ask(f"diagnose local/{failed}")
    assert f"Ray job {failed} on cluster local: FAILED" in answer
    assert len(sink.observations()) == 2
    _, answer = asker.ask("diagnose local/raysubmit_NoSuchJob42")
    assert answer.endswith(
        "Cannot diagnose local/raysubmit_NoSuchJob42: no Ray job 'raysubmit_NoSuchJob42' "
        "on cluster local"
    )
    _, answer = asker.ask("diagnose raysubmit_NoSuchJob42")
    assert "no Ray job 'raysubmit_NoSuchJob42' found; could not ask down: " in answer
    assert len(sink.observations()) == 2

    # A malformed target never reaches the diagnoser.
    ack, answer = asker.ask(f"diagnose local/{failed}/x")
    assert "`diagnose` takes one ray job id" in ack
    assert answer == ""


@pytest.mark.ray
def test_a_full_pipeline_is_said(jobs: Jobs) -> None:
    failed = jobs.submit("app_s3.py")
    assert jobs.wait(failed)["status"] == "FAILED"
    sink = ListSink(full=True)
    said = Diagnoser(ray_settings(("local", jobs.url)), engine().library, sink)(
        DiagnoseTarget("ray_job", failed), APPROVER
    )
    assert "Root cause: application_error" in said
    assert said.endswith("pitcrew is busy: the evidence was not queued, so no card follows.")


# -- KubeRay objects in the Kubernetes emulator ------------------------------------------------


@pytest.mark.slow
@pytest.mark.kube
def test_kuberay_objects_are_diagnosed_live_and_queued(tmp_path: Path, bind: Any) -> None:
    from tests.e2e.kubernetes.conftest import Emulator, install_seed, kubeconfig

    kube = Emulator()
    try:
        kube.install_kuberay()
        install_seed(kube)
        settings = Settings(
            sources=SourceSettings(
                kubernetes=KubernetesSourceSettings(
                    kubeconfig=kubeconfig(tmp_path, kube), context="kmock"
                )
            )
        )
        sink = ListSink()
        asker = bind(Diagnoser(settings, engine().library, sink))

        _, answer = asker.ask("diagnose ml-train/rayjob/verl-ppo-qwen")
        assert "RayJob ml-train/verl-ppo-qwen" in answer
        assert "Root cause: pod_oom_killed" in answer
        assert "named_actor_conflict" in answer  # also seen
        assert "Offered: k8s.bump_memory" in answer
        assert "Sent to the incident pipeline" in answer
        (observation,) = sink.observations()
        assert observation.context.namespace == "ml-train"

        _, answer = asker.ask("diagnose ml-train/raycluster/verl-ppo-qwen-raycluster-x7k2p")
        assert "RayCluster ml-train/verl-ppo-qwen-raycluster-x7k2p" in answer
        assert "Root cause: pod_oom_killed" in answer

        _, answer = asker.ask("diagnose ml-train/pod/nope")
        assert "Cannot diagnose ml-train/pod/nope: ml-train/pod/nope: not found" in answer
        assert len(sink.observations()) == 2
    finally:
        kube.stop()
