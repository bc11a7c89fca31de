"""Debian's Alertmanager on loopback for the alert tests, a scrape target whose series the
test sets, and the Prometheus configuration that evaluates a rule over them and sends
what fires to that Alertmanager.

Why this exists: the receiver must be tested against what Alertmanager really sends
(its webhook body, its auth header, its grouping, its resolved notifications) and a
rule must really fire in Prometheus. `LocalAlertmanager` writes a config whose one
route goes to `pitcrew run`'s /alertmanager with the bearer token in a file, starts
`prometheus-alertmanager` (installed by `make alertmanager`) on a free port with its
own storage, adds alerts with `amtool alert add`, and stops by pid.
"""

from __future__ import annotations

import http.server
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import requests

from bot.adapters.local_process import LocalProcess, free_port


def installed() -> bool:
    return (
        shutil.which("prometheus-alertmanager") is not None and shutil.which("amtool") is not None
    )


class LocalAlertmanager(LocalProcess):
    """`prometheus-alertmanager` whose only receiver is `webhook` (pitcrew's /alertmanager),
    sending `token` as a bearer token read from a file, grouping by alert and object."""

    what = "alertmanager"
    log_name = "alertmanager.log"
    error = RuntimeError
    output_limit = 3000

    def __init__(
        self, webhook: str, token: str, external_url: str = "http://alertmanager.test:9093"
    ) -> None:
        self.webhook = webhook
        self.token = token
        self.external_url = external_url

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config(self, token_file: Path) -> str:
        return f"""\
route:
  receiver: pitcrew
  group_by: [alertname, namespace, pod, node, Hostname]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 24h
receivers:
  - name: pitcrew
    webhook_configs:
      - url: {self.webhook}
        send_resolved: true
        http_config:
          authorization: {{type: Bearer, credentials_file: {token_file}}}
"""

    def start(self, timeout: float = 30.0) -> str:
        if not installed():
            raise RuntimeError("prometheus-alertmanager is not installed (make alertmanager)")
        self._dir = Path(tempfile.mkdtemp(prefix="pitcrew-am-"))
        token_file = self._dir / "token"
        token_file.write_text(self.token)
        (self._dir / "alertmanager.yml").write_text(self.config(token_file))
        check = subprocess.run(
            ["amtool", "check-config", str(self._dir / "alertmanager.yml")],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check.returncode != 0:
            raise RuntimeError(f"amtool check-config: {check.stdout}{check.stderr}")
        self.port = free_port()
        self._launch(
            [
                "prometheus-alertmanager",
                f"--config.file={self._dir / 'alertmanager.yml'}",
                f"--storage.path={self._dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                f"--web.external-url={self.external_url}",
                "--cluster.listen-address=",
            ]
        )
        self._wait_ready(timeout)
        return self.url

    def _ready(self) -> bool:
        try:
            return requests.get(f"{self.url}/-/ready", timeout=1).status_code == 200
        except requests.RequestException:
            return False

    def add(self, *labels: str, annotations: tuple[str, ...] = (), generator_url: str = "") -> None:
        """`amtool alert add` of one alert (`name=value` labels and annotations)."""
        command = ["amtool", f"--alertmanager.url={self.url}", "alert", "add", *labels]
        command += [f"--annotation={a}" for a in annotations]
        if generator_url:
            command.append(f"--generator-url={generator_url}")
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"amtool alert add: {done.stdout}{done.stderr}")


class ScrapeTarget:
    """A /metrics endpoint on loopback serving what the test sets (a kube-state-metrics
    stand-in: the series are the test's, the scrape and the rule are Prometheus')."""

    def __init__(self) -> None:
        self.text = ""
        target = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = target.text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                return None

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> ScrapeTarget:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def prometheus_config(target: str, alertmanager: str) -> str:
    """Scrape `target` as kube-state-metrics every second, evaluate rules.yml every second,
    send what fires to `alertmanager` (host:port)."""
    return f"""\
global: {{scrape_interval: 1s, evaluation_interval: 1s}}
rule_files: [rules.yml]
alerting:
  alertmanagers: [{{static_configs: [{{targets: ["{alertmanager}"]}}]}}]
scrape_configs:
  - job_name: kube-state-metrics
    honor_labels: true
    static_configs: [{{targets: ["{target}"]}}]
"""
