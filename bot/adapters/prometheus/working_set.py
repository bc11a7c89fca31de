"""The working set of a killed pod and of its worker group's other pods, from Prometheus.

Why this exists: a memory finding (an OOM kill, a Ray memory-monitor kill, an eviction
for memory) names a pod and when it died; whether it leaked or spiked, and how much its
group really uses, is in cAdvisor's `container_memory_working_set_bytes` and
kube-state-metrics' `kube_pod_container_resource_limits` (the pod spec's limit when
kube-state-metrics has none). Four queries under one deadline; the answer is the core's
`MemoryEvidence`, which `bot.core.actions.memory_evidence` turns into a verdict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from bot.adapters.prometheus.client import Deadline, PrometheusClient, Series
from bot.core import quantity
from bot.core.actions.memory_evidence import MemoryEvidence, MemoryTarget, PodSeries, Sample

USAGE = "container_memory_working_set_bytes"
LIMITS = 'kube_pod_container_resource_limits{{resource="memory",{where}}}'
GROUP_LABEL = "label_ray_io_group"
CLUSTER_LABEL = "label_ray_io_cluster"


def fetch_memory(client: PrometheusClient, target: MemoryTarget) -> MemoryEvidence:
    """The killed pod's series and its group's, up to the kill. Raises PrometheusError
    (one line) when Prometheus does not answer within the client's timeout."""
    config = client.config
    deadline = Deadline(config.timeout)
    start, end = target.killed_at - config.window, target.killed_at
    ns = _quote(target.namespace)
    where = f'namespace="{ns}",pod="{_quote(target.pod)}",container!="",container!="POD"'
    usage = client.range(f"{USAGE}{{{where}}}", start, end, config.step, deadline)
    limits = _limits(client.instant(LIMITS.format(where=where), end, deadline))
    killed = _pick(_pods(usage, limits), target)
    if killed.limit is None and target.spec_limit:
        killed = PodSeries(killed.pod, killed.container, killed.samples, _bytes(target.spec_limit))
    group = _group(client, target, killed.container, deadline) if target.group else ()
    return MemoryEvidence(
        killed=killed,
        killed_at=target.killed_at,
        group=tuple(p for p in group if p.pod != target.pod),
        group_name=target.group,
        kernel_kill=target.kernel_kill,
    )


def _group(
    client: PrometheusClient, target: MemoryTarget, container: str, deadline: Deadline
) -> tuple[PodSeries, ...]:
    """The other pods labelled with the same ray.io/group (and cluster) over the window."""
    config = client.config
    start, end = target.killed_at - config.window, target.killed_at
    selector = [
        f'namespace="{_quote(target.namespace)}"',
        f'{GROUP_LABEL}="{_quote(target.group)}"',
    ]
    if target.cluster:
        selector.append(f'{CLUSTER_LABEL}="{_quote(target.cluster)}"')
    window = f"{int(config.window.total_seconds())}s"
    labelled = client.instant(
        f"max_over_time(kube_pod_labels{{{','.join(selector)}}}[{window}])", end, deadline
    )
    names = sorted({labels.get("pod", "") for labels, _ in labelled} - {"", target.pod})
    if not names:
        return ()
    pods = "|".join(n.replace(".", "\\.") for n in names)
    where = f'namespace="{_quote(target.namespace)}",pod=~"{_quote(pods)}"'
    where += f',container="{_quote(container)}"' if container else ',container!="",container!="POD"'
    usage = client.range(f"{USAGE}{{{where}}}", start, end, config.step, deadline)
    limits = _limits(client.instant(LIMITS.format(where=where), end, deadline))
    return tuple(_pods(usage, limits))


def _pods(usage: Sequence[Series], limits: Mapping[tuple[str, str], int]) -> list[PodSeries]:
    found: list[PodSeries] = []
    for labels, points in usage:
        pod, container = labels.get("pod", ""), labels.get("container", "")
        samples = tuple(Sample(datetime.fromtimestamp(t, UTC), int(v)) for t, v in points)
        found.append(PodSeries(pod, container, samples, limits.get((pod, container))))
    return sorted(found, key=lambda p: (p.pod, p.container))


def _pick(found: Sequence[PodSeries], target: MemoryTarget) -> PodSeries:
    """The killed container: the one the finding names, else the fullest one."""
    named = [p for p in found if target.container and p.container == target.container]
    if named:
        return named[0]
    if found:
        return max(found, key=lambda p: (p.peak / p.limit) if p.limit else 0.0)
    return PodSeries(target.pod, target.container, (), _bytes(target.spec_limit))


def _limits(series: Sequence[Series]) -> dict[tuple[str, str], int]:
    return {
        (labels.get("pod", ""), labels.get("container", "")): int(points[-1][1])
        for labels, points in series
        if points
    }


def _bytes(text: str) -> int | None:
    try:
        return quantity.parse_bytes(text) if text else None
    except quantity.QuantityError:
        return None


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')
