"""How each emitting system prints an inventory message: the carriers of a log entry,
chosen by the system that prints it.

Why this exists: a message reaches a user behind the prefix its emitter's logger prints
(klog's `E1206 12:00:00.000000 4721 file.go:123]`, logrus' `time=… level=error msg="…"`,
zap's JSON, NCCL's `host:pid:tid [rank] NCCL WARN`, `slurmstepd: error:`, the kernel's
`[12345.678901]`, Ray's spdlog and Python layouts, vLLM's and PyTorch's), at the level
the entry was read at; and a message printed inside a Ray worker (Ray's own, vLLM's,
PyTorch's, NCCL's) reaches the driver behind the worker's process prefix, in a RayJob's
status or a Ray job record, that line still behind its emitter's prefix. A kubelet's or
containerd's message never does. The catalogue's carriers (`bot.core.quality.carriers`)
are applied the same way to every catalogue entry; these choose per system. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from bot.core.quality.carriers import (
    Carried,
    Carrier,
    Carry,
    actor,
    bare,
    carriers_for,
    colour,
    first_line,
    job_record,
    rayjob_status,
    raylet,
    repeated,
    wrapped,
)
from bot.core.quality.inventory import InventoryEntry

Prefix = Callable[[InventoryEntry, str], str]
_DATE, _TIME = "1206", "12:00:00.123456"
_STAMP = "2025-12-06T12:00:00.123456789Z"
_IN_RAY_WORKERS = frozenset({"ray", "vllm", "pytorch", "nccl"})
"""Systems whose messages a Ray worker prints, so the driver's carriers apply."""


def _word(entry: InventoryEntry) -> str:
    """The entry's level as its logger names it: error, warning, fatal or info."""
    if entry.level == "fatal":
        return "fatal"
    if entry.level == "warning":
        return "warning"
    return "info" if entry.level in ("info", "info-with-error") else "error"


def _file(entry: InventoryEntry, fallback: str) -> str:
    name = entry.source.rsplit("/", 1)[-1]
    return name if "." in name and " " not in name else fallback


def klog(entry: InventoryEntry, message: str) -> str:
    """klog's header (Kubernetes, the NVIDIA device plugin): level letter, date, time,
    thread, file:line."""
    letter = _word(entry)[0].upper()
    return f"{letter}{_DATE} {_TIME}    4721 {_file(entry, 'kubelet.go')}:123] {message}"


def klog_structured(entry: InventoryEntry, message: str) -> str:
    """klog's structured form (`ErrorS`/`InfoS`, Kubernetes ≥ 1.20): the message quoted."""
    letter = _word(entry)[0].upper()
    quoted = json.dumps(message, ensure_ascii=False)
    where = _file(entry, "kubelet.go")
    return f'{letter}{_DATE} {_TIME}    4721 {where}:123] {quoted} pod="ml/train-0"'


def logrus(entry: InventoryEntry, message: str) -> str:
    """logrus' text layout (containerd, CRI-O, runc, the container toolkit)."""
    quoted = json.dumps(message, ensure_ascii=False)
    return f'time="{_STAMP}" level={_word(entry)} msg={quoted}'


def zap_json(entry: InventoryEntry, message: str) -> str:
    """controller-runtime's zap JSON (KubeRay's operator)."""
    line = {
        "level": _word(entry).replace("fatal", "panic"),
        "ts": "2025-12-06T12:00:00.123Z",
        "logger": "controllers.RayCluster",
        "msg": message,
        "RayCluster": {"name": "train", "namespace": "ml"},
    }
    return json.dumps(line, ensure_ascii=False)


def zap_console(entry: InventoryEntry, message: str) -> str:
    """controller-runtime's zap console layout (KubeRay's operator, `--log-encoder console`)."""
    return f"2025-12-06T12:00:00.123Z\t{_word(entry).upper()}\tcontrollers.RayCluster\t{message}"


def nccl_warn(entry: InventoryEntry, message: str) -> str:
    """NCCL's WARN line: host, process, thread and rank before it."""
    return f"gpu-node-7:4721:4790 [3] NCCL WARN {message}"


def slurmstepd(entry: InventoryEntry, message: str) -> str:
    """Slurm's step daemon: `error:`/`fatal:` before the message, nothing at info."""
    word = _word(entry)
    if word in ("error", "fatal"):
        return f"slurmstepd: {word}: {message}"
    return f"slurmstepd: {message}"


def kernel(entry: InventoryEntry, message: str) -> str:
    """The kernel's ring buffer as `dmesg` prints it."""
    return f"[183042.771203] {message}"


def journal(entry: InventoryEntry, message: str) -> str:
    """A kernel line as the journal prints it (`journalctl -k`, syslog)."""
    return f"Dec 06 12:00:00 gpu-node-7 kernel: {message}"


def ray_glog(entry: InventoryEntry, message: str) -> str:
    """Ray's C++ log line (spdlog in glog's layout): E, W, or C for a fatal one."""
    letter = {"fatal": "C", "warning": "W", "info": "I"}.get(_word(entry), "E")
    where = _file(entry, "core_worker.cc")
    return f"[2025-12-06 12:00:00,123 {letter} 4721 4790] {where}:123: {message}"


def ray_python(entry: InventoryEntry, message: str) -> str:
    """Ray's Python logging layout: `stamp<TAB>LEVEL file.py:line -- message`."""
    where = _file(entry, "worker.py")
    return f"2025-12-06 12:00:00,123\t{_word(entry).upper()} {where}:123 -- {message}"


def vllm_logger(entry: InventoryEntry, message: str) -> str:
    """vLLM's logger: `LEVEL MM-DD HH:MM:SS [file.py:line] message`."""
    return f"{_word(entry).upper()} 12-06 12:00:00 [{_file(entry, 'llm_engine.py')}:123] {message}"


def c10(entry: InventoryEntry, message: str) -> str:
    """PyTorch's C++ log line (c10's glog-like header, with its rank since 2.3)."""
    letter = _word(entry)[0].upper()
    where = _file(entry, "ProcessGroupNCCL.cpp")
    return f"[rank0]:[{letter}{_DATE} {_TIME}000 4721 {where}:123] {message}"


def torch_raise(entry: InventoryEntry, message: str) -> str:
    """A CUDA runtime error as PyTorch raises it."""
    return f"RuntimeError: {message}"


def _prefixes(entry: InventoryEntry) -> tuple[tuple[str, Prefix], ...]:
    """The prefixes the entry's emitter prints before a message at its level."""
    project, python = entry.project, entry.source.endswith(".py")
    if entry.level == "raise":
        return ()
    table: dict[str, tuple[tuple[str, Prefix], ...]] = {
        "kubernetes": (("klog", klog), ("klog-structured", klog_structured)),
        "containerd": (("logrus", logrus),),
        "cri-o": (("logrus", logrus),),
        "runc": (("logrus", logrus),),
        "kuberay": (("zap-json", zap_json), ("zap-console", zap_console)),
        "nccl": (("nccl-warn", nccl_warn),),
        "slurm": (("slurmstepd", slurmstepd),),
        "linux": (("dmesg", kernel), ("journal", journal)),
        "vllm": (("vllm-logger", vllm_logger),),
    }
    if project == "nvidia":
        return (
            (("klog", klog),)
            if "device-plugin" in entry.file or "feature" in entry.emitter
            else (("logrus", logrus),)
        )
    if project == "ray":
        return (("python-logging", ray_python),) if python else (("glog", ray_glog),)
    if project == "pytorch":
        if entry.source.startswith("libcudart"):
            return (("torch-raise", torch_raise),)
        return (("python-logging", ray_python),) if python else (("c10", c10),)
    return table.get(project, ())


def _first(prefix: Prefix, entry: InventoryEntry, message: str) -> str:
    """The prefix on the message's first line (a logger prints it once a call)."""
    head, _, rest = message.partition("\n")
    return prefix(entry, head) + ("\n" + rest if rest else "")


def _prefixed(prefix: Prefix, entry: InventoryEntry) -> Carry:
    def carry(_: Carried, message: str) -> str:
        return _first(prefix, entry, message)

    return carry


def _driver(carry: Carry, prefix: Prefix | None, entry: InventoryEntry) -> Carry:
    """A driver's carrier of the line as the worker printed it (behind its prefix)."""

    def carried(item: Carried, message: str) -> str | None:
        return carry(item, _first(prefix, entry, message) if prefix else message)

    return carried


_DRIVER: tuple[tuple[str, Carry], ...] = (
    ("actor-prefix", actor),
    ("repeated", repeated),
    ("colour", colour),
    ("rayjob-status", rayjob_status),
    ("job-record", job_record),
)


def carriers_of(entry: InventoryEntry) -> tuple[Carrier, ...]:
    """The carriers of one inventory entry: its kind's for an event or a status; for a
    log, the message bare, behind each prefix its emitter prints, hard-wrapped and cut to
    its first line, and, where a Ray worker prints it, the driver's carriers of the line
    as the worker printed it (Ray's C++ lines also as the driver forwards the raylet's)."""
    if entry.kind != "log":
        return carriers_for(entry.kind)
    prefixes = _prefixes(entry)
    own = prefixes[0][1] if prefixes else None
    found = [Carrier("bare", "log", bare)]
    found.extend(Carrier(name, "log", _prefixed(prefix, entry)) for name, prefix in prefixes)
    if entry.project in _IN_RAY_WORKERS:
        found.extend(Carrier(name, "log", _driver(carry, own, entry)) for name, carry in _DRIVER)
        if entry.project == "ray" and not entry.source.endswith(".py"):
            found.append(Carrier("raylet-prefix", "log", _driver(raylet, own, entry)))
    found.extend(
        (
            Carrier("wrap-80", "log", wrapped(80)),
            Carrier("wrap-120", "log", wrapped(120)),
            Carrier("first-line", "log", first_line),
        )
    )
    return tuple(found)
