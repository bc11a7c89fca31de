"""The Ray adapters' logic that needs no cluster: bounded log tails, bookmarks, death
causes, backoff against a closed port, refusals that happen before any call."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.adapters.files.playbooks import builtin_engine
from bot.adapters.ray.bookmarks import Ledger, MemoryBookmarks
from bot.adapters.ray.client import (
    RayClusterConfig,
    _logs_from_json_tail,
    headers_from_env,
    log_ends,
    tail_bytes,
)
from bot.adapters.ray.executor_base import RayClusters, remediation_id
from bot.adapters.ray.kill import ActorState, KillActorExecutor
from bot.adapters.ray.on_demand import normalize_address
from bot.adapters.ray.resubmit import ResubmitJobExecutor
from bot.adapters.ray.signals import context_fields, death_parts, is_stale
from bot.adapters.ray.source import RaySource, RaySourceOptions
from bot.core.actions.params import KillActor
from bot.core.diagnosis.engine import Engine
from bot.core.errors import ActionRefusedError
from bot.core.inputs import LogText
from bot.core.inputs.ray_actors import ActorInfo
from bot.core.model import Signal, SourceKind
from tests.support.executors import verified

DATA = Path(__file__).resolve().parents[2] / "data" / "ray"


@pytest.fixture(scope="module")
def engine() -> Engine:
    return builtin_engine([])


def test_tail_keeps_only_the_last_bytes() -> None:
    chunks = [bytes([65 + i % 26]) * 1000 for i in range(5000)]
    tail = tail_bytes(iter(chunks), 2500)
    assert tail == b"".join(chunks)[-2500:]


def test_jobs_api_logs_decoded_from_the_tail_of_their_json() -> None:
    lines = [f'line {i}: "quoted" \\ back\tslash ünïcode' for i in range(2000)]
    text = "\n".join(lines) + "\n"
    body = json.dumps({"logs": text}).encode()
    whole = _logs_from_json_tail(body, 10**9, "u")
    assert whole == text.encode()
    cut = body[-5000:]
    decoded = _logs_from_json_tail(cut, 10**9, "u").decode()
    assert text.endswith(decoded)
    assert decoded.startswith("line ")  # from a whole line


def test_ledger_reports_each_job_once_and_never_below_its_floor() -> None:
    ledger = Ledger.load(None, floor=1000)
    window = 100
    assert not ledger.is_new("old", 999, window)
    assert ledger.is_new("a", 1000, window)
    ledger.record("a", 1500, window)
    assert not ledger.is_new("a", 1500, window)
    assert ledger.is_new("late", 1450, window)  # became visible late, within the window
    assert not ledger.is_new("too-late", 1300, window)
    again = Ledger.load(ledger.dump(), floor=99999)  # a restart keeps the saved floor
    assert (again.watermark, again.floor, again.recent) == (1500, 1000, {"a": 1500})
    assert Ledger.load("not json", floor=7).watermark == 7


def test_memory_monitor_kill_is_ray_memory_monitor_oom_not_container_oom(engine: Engine) -> None:
    """A real Ray 2.60 memory-monitor kill (State API payload captured from a local head)."""
    data = json.loads((DATA / "memory-monitor-kill.json").read_text())
    actors = [ActorInfo.parse(a) for a in data["actors"]]
    assert actors[0].death_kind == "oom_context"
    assert actors[0].death_reason == "OUT_OF_MEMORY"
    config = RayClusterConfig("c", "http://127.0.0.1:1")
    parts = death_parts(actors, config, {"cluster": "c"}, "ray://c/jobs/x", None)
    signal = next(p for p in parts if isinstance(p, Signal))
    assert signal.source is SourceKind.RAY_ACTOR
    assert "killed due to the node running low on memory" in signal.text
    assert any(isinstance(p, LogText) and p.source is SourceKind.WORKER_LOG for p in parts)
    diagnosis = engine.diagnose(parts)
    assert diagnosis.primary is not None
    assert diagnosis.primary.category == "ray_memory_monitor_oom"
    assert "pod_oom_killed" not in {str(r.finding.category) for r in diagnosis.findings}


def test_deaths_that_follow_from_the_job_ending_are_left_out() -> None:
    def actor(reason: str, message: str) -> ActorInfo:
        return ActorInfo.parse(
            {
                "actor_id": reason,
                "name": "",
                "state": "DEAD",
                "job_id": "02000000",
                "class_name": "Worker",
                "death_cause": {
                    "actor_died_error_context": {"reason": reason, "error_message": message}
                },
            }
        )

    config = RayClusterConfig("c", "http://127.0.0.1:1")
    quiet = [
        actor("OWNER_DIED", "The actor is dead because its owner has died."),
        actor("RAY_KILL", "The actor is dead because it was killed by `ray.kill`."),
        actor("WORKER_DIED", "Worker exit type: INTENDED_USER_EXIT Worker exit detail: done"),
    ]
    assert death_parts(quiet, config, {}, "o", None) == []
    crash = actor(
        "WORKER_DIED",
        "The actor is dead because its worker process has died. Worker exit type: "
        "SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error "
        "code 2. End of file.",
    )
    parts = death_parts([crash], config, {}, "o", None)
    assert [type(p).__name__ for p in parts] == ["Signal", "LogText"]


def test_context_fields_name_the_rayjob_from_metadata() -> None:
    config = RayClusterConfig("prod", "http://h:8265", k8s_namespace="ml", ray_cluster="rc-1")
    fields = context_fields(
        {"metadata": {"ray.io/rayjob": "team/ppo", "owner": "ann"}}, config, ("ray.io/rayjob",)
    )
    assert fields == {
        "cluster": "prod",
        "namespace": "team",
        "ray_cluster": "rc-1",
        "rayjob": "ppo",
        "metadata.ray.io/rayjob": "team/ppo",
        "metadata.owner": "ann",
    }
    assert context_fields({}, config, ())["namespace"] == "ml"


def test_stale_means_detached_named_alive_and_owner_finished() -> None:
    base = {
        "actor_id": "a",
        "name": "lock",
        "state": "ALIVE",
        "job_id": "02000000",
        "ray_namespace": "ns",
        "is_detached": True,
    }
    finished = {"status": "SUCCEEDED"}
    assert is_stale(ActorInfo.parse(base), finished, ())
    assert not is_stale(ActorInfo.parse(base), {"status": "RUNNING"}, ())
    assert not is_stale(ActorInfo.parse({**base, "is_detached": False}), finished, ())
    assert not is_stale(ActorInfo.parse({**base, "name": ""}), finished, ())
    assert not is_stale(ActorInfo.parse({**base, "ray_namespace": "serve"}), finished, ("serve",))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_dashboard_backs_off_and_is_reported_once() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    source = RaySource(
        [RayClusterConfig("gone", url, timeout=1)],
        MemoryBookmarks(),
        RaySourceOptions(
            backoff_base=timedelta(seconds=5),
            backoff_max=timedelta(seconds=20),
            down_after=timedelta(seconds=30),
        ),
    )
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    attempts = []
    notices = []
    for second in range(90):
        batches = source.poll_batches(t0 + timedelta(seconds=second))
        notices += [p.reason for b in batches for p in b.parts if isinstance(p, Signal)]
        attempts.append(source.status()["gone"]["consecutive_failures"])
    # tried at 0, 5, 15, 35, 55, 75 s: 5, 10, then the 20 s cap
    changes = [s for s in range(1, 90) if attempts[s] != attempts[s - 1]]
    assert changes == [5, 15, 35, 55, 75]
    assert notices == ["DashboardUnreachable"]
    status = source.status()["gone"]
    assert status["healthy"] is False
    assert url in status["last_error"]
    assert "Connection refused" in status["last_error"]
    assert source.healthy() is False


@pytest.mark.parametrize(
    ("name", "owner_status", "detached", "refusal"),
    [
        (
            "qwAKMv_register_center",
            "RUNNING",
            True,
            "qwAKMv_register_center is a verl register center or WorkerDict actor of a job that has not finished: never killed",
        ),
        (
            "abc_WorkerDict",
            "PENDING",
            False,
            "abc_WorkerDict is a verl register center or WorkerDict actor of a job that has not finished: never killed",
        ),
        ("trainer_register_center", "SUCCEEDED", True, ""),
        ("stats_lock", "RUNNING", True, ""),
        (
            "stats_lock",
            "RUNNING",
            False,
            "the actor is neither detached nor owned by a finished job",
        ),
    ],
)
def test_kill_refuses_a_verl_actor_until_its_job_has_finished(
    name: str, owner_status: str, detached: bool, refusal: str
) -> None:
    executor = KillActorExecutor(RayClusters([RayClusterConfig("c", "http://127.0.0.1:9")]))
    actor = ActorInfo(
        actor_id="a1",
        name=name,
        namespace="rl",
        state="ALIVE",
        class_name="X",
        job_id="01000000",
        is_detached=detached,
    )
    state = ActorState((actor,), {"01000000": owner_status}, (), ())
    params = KillActor(name=name, namespace="rl")
    assert executor._refusal(params, state) == refusal


def test_remediation_ids_are_stable_and_safe() -> None:
    first = remediation_id("kill", "inc-42/proposal 7")
    assert first == remediation_id("kill", "inc-42/proposal 7")
    assert first != remediation_id("kill", "inc-42/proposal 8")
    assert first.startswith("pitcrew-kill-inc-42-proposal-7-")


def test_clusters_resolve_by_name_or_raycluster() -> None:
    a = RayClusterConfig("a", "http://a:8265", ray_cluster="rc-a")
    b = RayClusterConfig("b", "http://b:8265")
    clusters = RayClusters([a, b])
    assert clusters.config("rc-a") is a
    assert clusters.config("b") is b
    with pytest.raises(ActionRefusedError, match="names no Ray cluster"):
        clusters.config("")
    assert RayClusters([a]).config("") is a


def test_live_diagnosis_addresses_and_headers() -> None:
    assert normalize_address("127.0.0.1:8265/") == "http://127.0.0.1:8265"
    assert normalize_address("https://ray.example.com") == "https://ray.example.com"
    env = {"RAY_AUTH_TOKEN": "t0k", "PITCREW_RAY_HEADERS": '{"X-Team": "ml"}'}
    assert headers_from_env(env) == {"X-Team": "ml", "Authorization": "Bearer t0k"}


def test_a_batch_is_only_emitted_once_its_bookmark_is_saved() -> None:
    from bot.adapters.ray.client import RayDashboard
    from bot.adapters.ray.source import RayBatch, _Cluster, _Result
    from bot.daemon.ports import CallableBookmarks

    saved: dict[str, str] = {}
    broken = {"yes": True}

    def setter(key: str, value: str) -> None:
        if broken["yes"]:
            raise OSError("disk full")
        saved[key] = value

    config = RayClusterConfig("c", "http://127.0.0.1:1")
    cluster = _Cluster(
        config, RayDashboard(config.url), RaySourceOptions(), CallableBookmarks(saved.get, setter)
    )
    cluster.ledger = Ledger.load(None, floor=0)
    batch = RayBatch("c", (Signal(SourceKind.RAY_JOB, "failed", "FAILED"),))
    result = _Result([batch], [("job-1", 100)], None, [], 1, 0.0)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert cluster.commit(result, now) == []
    assert cluster.ledger.is_new("job-1", 100, 0)  # still to report
    broken["yes"] = False
    assert cluster.commit(result, now) == [batch]
    assert not cluster.ledger.is_new("job-1", 100, 0)
    assert json.loads(saved["ray/c/jobs"])["recent"] == {"job-1": 100}


class _Jobs:
    """A dashboard whose one resubmission is PENDING for its first `pending` listings."""

    def __init__(self, pending: int, then: str) -> None:
        self.pending = pending
        self.then = then
        self.listings = 0

    def list_jobs(self) -> list[dict[str, object]]:
        self.listings += 1
        status = "PENDING" if self.listings <= self.pending else self.then
        meta = {"pitcrew.resubmit_of": "raysubmit_old"}
        return [{"submission_id": "new", "status": status, "start_time": 1, "metadata": meta}]

    def close(self) -> None:
        pass


@pytest.mark.parametrize(
    ("pending", "then", "timeout", "expected"),
    [
        (2, "RUNNING", 5.0, True),  # runtime_env set up: it started
        (2, "SUCCEEDED", 5.0, True),
        (2, "FAILED", 5.0, False),
        (1000, "RUNNING", 0.05, False),  # still PENDING when the wait ends
    ],
)
def test_a_resubmission_is_verified_once_it_has_left_pending(
    pending: int, then: str, timeout: float, expected: bool
) -> None:
    dashboard = _Jobs(pending, then)
    clusters = RayClusters(
        [RayClusterConfig("c", "http://127.0.0.1:9")],
        client_factory=lambda config: dashboard,  # type: ignore[arg-type,return-value]
    )
    executor = ResubmitJobExecutor(
        clusters, categorize=lambda parts: set(), start_timeout=timeout, poll_every=0.01
    )  # verify only reads the job's status
    assert verified(executor, {"submission_id": "raysubmit_old"}) is expected
    assert dashboard.listings >= (3 if timeout > 1 else 1)


def test_a_config_entry_sets_the_stale_age_scan_interval_and_down_grace() -> None:
    from datetime import timedelta

    from bot.app.factories import ray_source_options
    from bot.app.settings.sources import RaySourceSettings

    entry = RaySourceSettings(
        name="a",
        stale_actor_age=timedelta(minutes=5),
        stale_scan_every=timedelta(minutes=1),
        down_after=timedelta(seconds=30),
    )
    options = ray_source_options(entry)
    assert (options.stale_actor_age, options.stale_scan_every, options.down_after) == (
        timedelta(minutes=5),
        timedelta(minutes=1),
        timedelta(seconds=30),
    )


def test_a_long_driver_log_keeps_its_first_and_last_lines_and_says_what_was_left_out() -> None:
    lines = [f'line {i:05d}: "quoted" \\ back\tslash ünïcode\n' for i in range(20000)]
    body = json.dumps({"logs": "".join(lines)}).encode()
    chunks = [body[i : i + 1000] for i in range(0, len(body), 1000)]
    ends = log_ends(iter(chunks), 20_000)
    assert (ends.head, ends.tail, ends.total) == (body[:20_000], body[-20_000:], len(body))
    assert ends.newlines == body[20_000:-20_000].count(b"\\n") == 19299
    first, between, last = ends.decoded(20_000, "u").decode().split("\n[pitcrew: ")[0:1] + (
        ends.decoded(20_000, "u").decode().split("\n[pitcrew: ")[1].split("]\n")
    )
    assert first + "\n" == "".join(lines[:350])  # whole lines from the first
    assert last == "".join(lines[-350:])  # whole lines to the last
    assert between == (
        f"about {len(body) - 40_000:,} bytes (19,300 lines) of the driver log left out here; "
        f"kept: its first {len((first + chr(10)).encode()):,} bytes and its last "
        f"{len(last.encode()):,}"
    )


def test_a_driver_log_that_fits_is_kept_whole() -> None:
    text = "".join(f"line {i}\n" for i in range(100))
    body = json.dumps({"logs": text}).encode()
    assert log_ends([body[:300], body[300:]], 1000).decoded(1000, "u") == text.encode()
