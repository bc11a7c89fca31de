"""A throwaway Prometheus on loopback, holding series written beforehand.

Why this exists: the memory evidence must be tested, benchmarked and shown in the demo
against a real Prometheus (Debian's `prometheus` package), not a stand-in. This writes
series as OpenMetrics, backfills them with `promtool tsdb create-blocks-from
openmetrics` into a temporary directory, starts `prometheus` on a free 127.0.0.1 port
with that storage, and stops it by pid. A configuration of its own (scrape targets,
rule files, an Alertmanager) makes it evaluate real alerting rules, as the Alertmanager
tests need.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import requests

from bot.adapters.local_process import LocalProcess, free_port
from bot.adapters.prometheus.working_set import CLUSTER_LABEL, GROUP_LABEL, USAGE
from bot.core.actions.memory_evidence import PodSeries

LIMIT_METRIC = "kube_pod_container_resource_limits"
LABELS_METRIC = "kube_pod_labels"

CONFIG = "global:\n  scrape_interval: 15s\n"


class LocalPrometheusError(RuntimeError):
    """Prometheus is missing or did not start (the message says which, and its output)."""


def installed() -> bool:
    return shutil.which("prometheus") is not None and shutil.which("promtool") is not None


def metric_line(name: str, labels: Mapping[str, str], value: float, at: float) -> str:
    """One OpenMetrics sample line; `at` in unix seconds."""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}} {value:.17g} {at:.3f}"


def openmetrics(lines_by_metric: Mapping[str, Iterable[str]]) -> str:
    """A complete OpenMetrics exposition: each metric a gauge, samples as given."""
    out: list[str] = []
    for name, lines in lines_by_metric.items():
        out.append(f"# TYPE {name} gauge")
        out.extend(lines)
    out.append("# EOF")
    return "\n".join(out) + "\n"


def memory_lines(
    namespace: str, pods: Iterable[PodSeries], group: str = "", cluster: str = ""
) -> dict[str, list[str]]:
    """cAdvisor and kube-state-metrics samples for `pods`, as a kubelet scrape would
    leave them: the working set per sample, the limit and the pod's labels each minute."""
    lines: dict[str, list[str]] = {USAGE: [], LIMIT_METRIC: [], LABELS_METRIC: []}
    for pod in pods:
        where = {"namespace": namespace, "pod": pod.pod, "container": pod.container}
        labelled = {"namespace": namespace, "pod": pod.pod}
        if group:
            labelled[GROUP_LABEL] = group
        if cluster:
            labelled[CLUSTER_LABEL] = cluster
        for sample in pod.samples:
            at = sample.at.timestamp()
            lines[USAGE].append(metric_line(USAGE, where, sample.used, at))
            if int(at) % 60 == 0 or sample is pod.samples[-1]:
                if pod.limit:
                    limit = {**where, "resource": "memory", "unit": "byte"}
                    lines[LIMIT_METRIC].append(metric_line(LIMIT_METRIC, limit, pod.limit, at))
                lines[LABELS_METRIC].append(metric_line(LABELS_METRIC, labelled, 1, at))
    return lines


def merged(*parts: Mapping[str, list[str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for part in parts:
        for name, lines in part.items():
            out.setdefault(name, []).extend(lines)
    return out


class LocalPrometheus(LocalProcess):
    """`prometheus` with backfilled storage in a temporary directory, on a free port."""

    what = "prometheus"
    log_name = "prometheus.log"
    error = LocalPrometheusError

    def __init__(
        self,
        exposition: str = "",
        temp_parent: str = "/tmp",
        *,
        config: str = CONFIG,
        files: Mapping[str, str] | None = None,
    ) -> None:
        """`exposition`: series backfilled before the start (none: an empty store);
        `config`: prometheus.yml; `files`: more files beside it (rule files) by name."""
        self.exposition = exposition
        self.temp_parent = temp_parent
        self.config = config
        self.files = dict(files or {})

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> str:
        if not installed():
            raise LocalPrometheusError(
                "prometheus is not installed (apt-get install -y prometheus, or make prometheus)"
            )
        self._dir = Path(tempfile.mkdtemp(prefix="pitcrew-prom-", dir=self.temp_parent))
        data = self._dir / "data"
        if self.exposition:
            self._backfill(data, timeout)
        (self._dir / "prometheus.yml").write_text(self.config)
        for name, text in self.files.items():
            (self._dir / name).write_text(text)
        self.port = free_port()
        self._launch(
            [
                "prometheus",
                f"--config.file={self._dir / 'prometheus.yml'}",
                f"--storage.tsdb.path={data}",
                "--storage.tsdb.retention.time=3650d",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ]
        )
        self._wait_ready(timeout)
        return self.url

    def _backfill(self, data: Path, timeout: float) -> None:
        assert self._dir is not None
        source = self._dir / "series.om"
        source.write_text(self.exposition)
        backfill = subprocess.run(
            ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if backfill.returncode != 0:
            raise LocalPrometheusError(f"promtool backfill failed: {backfill.stderr[-2000:]}")

    def _ready(self) -> bool:
        try:
            return requests.get(f"{self.url}/-/ready", timeout=1).status_code == 200
        except requests.RequestException:
            return False


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
