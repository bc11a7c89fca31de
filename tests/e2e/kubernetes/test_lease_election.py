"""Leader election over a real Lease: the official client against kmock's emulator, with
the API server's concurrency rules for leases (`tests/support/kube_leases.py`).

Driven by hand first (each replica's tries called one by one, on one clock): one replica
creates the Lease and leads at term 1, the other stands by; a leader that stops renewing
is replaced after a whole lease with term 2 and, seeing it, knows it lost; a clean stop
releases the Lease and the standby takes it at once; two writes from one version, one
wins. Then on their own threads and real time: the leader's API cut for good, it stops
within its renew deadline and the standby takes over.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client

from bot.adapters.kubernetes.api import KubeApi
from bot.adapters.kubernetes.lease import KubeLease
from bot.app.demo.emulator import KubeEmulator
from bot.daemon.elector import Elector
from bot.daemon.lease import ElectionConfig, LeaseConflictError, LeaseRecord
from tests.support.kube_leases import serve_leases, stored_lease
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.kube

NS, NAME = "pitcrew", "pitcrew"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class HandClock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def kube() -> Iterator[KubeEmulator]:
    emulator = KubeEmulator()
    serve_leases(emulator)
    try:
        yield emulator
    finally:
        emulator.stop()


def api_at(url: str, timeout: float = 5.0) -> KubeApi:
    configuration = client.Configuration()
    configuration.host = url
    configuration.retries = 0
    return KubeApi(client.ApiClient(configuration), timeout=timeout)


def replica(
    kube: KubeEmulator, identity: str, clock: HandClock, url: str = "", **durations: float
) -> tuple[Elector, list[int], list[str]]:
    """An elector of `identity` on the emulator (or at `url`), and what it was told."""
    led: list[int] = []
    lost: list[str] = []
    config = ElectionConfig(identity, **{k: timedelta(seconds=v) for k, v in durations.items()})
    lock = KubeLease(api_at(url or kube.url), NS, NAME)
    elector = Elector(lock, config, clock=clock, on_lead=led.append, on_lost=lost.append)
    return elector, led, lost


def eventually(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.02)


def test_one_replica_creates_the_lease_and_leads_the_other_stands_by(kube: KubeEmulator) -> None:
    clock = HandClock()
    a, led_a, _ = replica(kube, "pitcrew-a", clock)
    b, led_b, _ = replica(kube, "pitcrew-b", clock)
    assert a.try_once() is True
    assert b.try_once() is False
    eventually(lambda: led_a == [1], 5, "a to be told it leads")
    assert led_b == []
    assert (b.role().holder, b.role().term) == ("pitcrew-a", 1)
    lease = stored_lease(kube, NS, NAME)
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "pitcrew-a"
    assert lease["spec"]["leaseDurationSeconds"] == 15
    assert lease["spec"]["leaseTransitions"] == 1
    assert lease["spec"]["renewTime"] == "2026-03-01T12:00:00.000000Z"


def test_a_leader_that_stops_renewing_is_replaced_after_a_whole_lease(kube: KubeEmulator) -> None:
    clock = HandClock()
    a, _, lost_a = replica(kube, "pitcrew-a", clock)
    b, led_b, _ = replica(kube, "pitcrew-b", clock)
    a.try_once()
    b.try_once()  # b sees a's Lease now: it is a's for 15 s from here
    clock.advance(9)
    assert a.check() == ""
    clock.advance(1)  # a, stopped (SIGSTOP, a hung API), renewed nothing for 10 s
    assert a.check() == "the Lease was not renewed for 10.0 s, past the renew deadline of 10 s"
    assert lost_a == [a.check()]
    clock.advance(4.9)
    assert b.try_once() is False
    clock.advance(0.1)
    assert b.try_once() is True
    eventually(lambda: led_b == [2], 5, "b to lead at term 2")
    assert a.try_once() is False  # a, resumed, reads b's Lease and never takes it back


def test_the_leader_that_sees_another_holder_has_lost_at_once(kube: KubeEmulator) -> None:
    clock = HandClock()
    a, _, lost_a = replica(kube, "pitcrew-a", clock)
    b, _, _ = replica(kube, "pitcrew-b", clock)
    a.try_once()
    b.try_once()
    clock.advance(16)
    b.try_once()  # a's Lease expired for b: b takes it
    a.try_once()  # a reads it
    assert a.check() == "the Lease is held by pitcrew-b (term 2), not by this replica (term 1)"
    assert lost_a == [a.check()]


def test_a_clean_stop_releases_the_lease_and_the_standby_takes_it_at_once(
    kube: KubeEmulator,
) -> None:
    clock = HandClock()
    a, _, _ = replica(kube, "pitcrew-a", clock)
    b, led_b, _ = replica(kube, "pitcrew-b", clock)
    a.try_once()
    b.try_once()
    a.stop(release=True)
    lease = stored_lease(kube, NS, NAME)
    assert lease is not None
    assert (lease["spec"]["holderIdentity"], lease["spec"]["leaseDurationSeconds"]) == ("", 1)
    assert b.try_once() is True  # no whole lease to wait for
    eventually(lambda: led_b == [2], 5, "b to lead at term 2")


def test_of_two_writes_from_one_version_the_api_server_takes_one(kube: KubeEmulator) -> None:
    lock = KubeLease(api_at(kube.url), NS, NAME)
    created = lock.create(LeaseRecord("pitcrew-a", timedelta(seconds=15), T0, T0, 1))
    first = LeaseRecord("pitcrew-b", timedelta(seconds=15), T0, T0, 2, created.version)
    second = LeaseRecord("pitcrew-c", timedelta(seconds=15), T0, T0, 2, created.version)
    assert lock.update(first).holder == "pitcrew-b"
    with pytest.raises(LeaseConflictError) as refused:
        lock.update(second)
    assert str(refused.value) == f"the Lease {NS}/{NAME} changed since version {created.version}"
    with pytest.raises(LeaseConflictError):
        lock.create(second)
    current = lock.get()
    assert current is not None
    assert (current.holder, current.transitions) == ("pitcrew-b", 2)


@pytest.mark.slow
def test_a_leader_cut_from_its_api_stops_within_the_renew_deadline_and_the_standby_leads(
    kube: KubeEmulator,
) -> None:
    port = int(kube.url.rsplit(":", 1)[1])
    proxy = TcpProxy(("127.0.0.1", port))
    proxy.start()
    durations = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.5}
    a, led_a, lost_a = replica(kube, "pitcrew-a", datetime_now, proxy.url, **durations)
    b, led_b, _ = replica(kube, "pitcrew-b", datetime_now, **durations)
    try:
        a.start()
        eventually(lambda: led_a == [1], 10, "a to lead")
        b.start()
        time.sleep(1.0)
        assert led_b == []
        assert a.leading
        cut = time.monotonic()
        proxy.stop()  # the API is unreachable from a, not from b
        eventually(lambda: lost_a, 10, "a to know it lost the Lease")
        stopped_after = time.monotonic() - cut
        assert stopped_after <= 2.0 + 0.5  # within the renew deadline of its last renewal
        assert lost_a[0].startswith("the Lease was not renewed for ")
        eventually(lambda: led_b == [2], 10, "b to lead at term 2")
        assert time.monotonic() - cut <= 3.0 + 2 * 0.5 * 2.2 + 1.0
    finally:
        a.stop(release=False)
        b.stop(release=True)
        proxy.stop()


def datetime_now() -> datetime:
    return datetime.now(UTC)
