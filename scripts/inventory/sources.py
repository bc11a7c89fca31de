"""Where each project's source is read: a fetched git directory at release tags, or an
unpacked release (a wheel's Python files, a Debian source package), and which of its
files and call sites are read, with the emitter each path belongs to.

Every function yields `Found` values for one project; `extract.py` merges and writes.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import cfamily
import golang
import pysrc
import raycpp
from common import Found, literals

MIRROR = Path(os.environ.get("INVENTORY_MIRROR", "/work/.mirror"))
SRC = Path(os.environ.get("INVENTORY_SRC", "/work/inv-src"))


def release_tags(repo: Path, pattern: str, lowest: tuple[int, ...], highest: tuple[int, ...] = (99,)) -> list[str]:
    """The newest patch of every minor release between `lowest` and `highest`."""
    tags = subprocess.run(["git", "-C", str(repo), "tag"], capture_output=True, text=True, check=True).stdout.split()
    best: dict[tuple[int, int], tuple[tuple[int, ...], str]] = {}
    for tag in tags:
        match = re.fullmatch(pattern, tag)
        if not match:
            continue
        numbers = tuple(int(g) for g in match.groups() if g is not None)
        if not lowest <= numbers[: len(lowest)] or numbers[: len(highest)] > highest:
            continue
        key = (numbers[0], numbers[1])
        if key not in best or numbers > best[key][0]:
            best[key] = (numbers, tag)
    return [tag for _, tag in sorted(best.values())]


def git_files(repo: Path, tag: str, keep: Callable[[str], bool]) -> Iterator[tuple[str, str]]:
    names = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "-r", "--name-only", tag], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    wanted = [n for n in names if keep(n)]
    if not wanted:
        return
    batch = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "--batch"],
        input="".join(f"{tag}:{n}\n" for n in wanted).encode(),
        capture_output=True,
        check=True,
    ).stdout
    pos = 0
    for name in wanted:
        header_end = batch.index(b"\n", pos)
        header = batch[pos:header_end].split()
        size = int(header[2]) if len(header) >= 3 and header[1] != b"missing" else 0
        body = batch[header_end + 1 : header_end + 1 + size]
        pos = header_end + 1 + size + 1
        yield name, body.decode("utf-8", "replace")


def dir_files(root: Path, keep: Callable[[str], bool]) -> Iterator[tuple[str, str]]:
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and keep(rel):
            yield rel, path.read_text("utf-8", "replace")


def _go_file(path: str) -> bool:
    return path.endswith(".go") and not path.endswith("_test.go") and "/vendor/" not in f"/{path}" and "/test" not in f"/{path}" and "fake" not in path and "/testing/" not in path and "/e2e/" not in path and "mock" not in path


def go_found(files: Iterable[tuple[str, str]], version: str, emitter: Callable[[str], str], want: frozenset[str], status_object: str = "") -> Iterator[Found]:
    """Events, logs, made errors and status messages of Go files (the kinds in `want`)."""
    for path, text in files:
        consts = golang.constants(text)
        who = emitter(path)
        if "event" in want:
            for reason, template, level in golang.events(text, consts):
                yield Found(who, level, "event", path, template, version, reason=reason)
        if "log" in want:
            for level, template in golang.logs(text, consts):
                yield Found(who, level, "log", path, template, version)
        if "error" in want:
            for template in golang.errors(text, consts):
                yield Found(who, "error-return", "log", path, template, version)
        if "status" in want:
            for template in golang.status_messages(text, consts):
                yield Found(who, "status", "status", path, template, version, reason=status_object)


def py_found(root: Path, version: str, keep: Callable[[str], bool], emitter: Callable[[str], str]) -> Iterator[Found]:
    for path, text in dir_files(root, lambda p: p.endswith(".py") and keep(p)):
        who = emitter(path)
        for level, exception, template in pysrc.messages(text):
            kind = "log"
            yield Found(who, level, kind, path, template, version, exception=exception)


# --- per project -------------------------------------------------------------------


def kuberay() -> tuple[list[str], Iterator[Found]]:
    repo = MIRROR / "ray-project+kuberay/repo"
    tags = release_tags(repo, r"v(\d+)\.(\d+)\.(\d+)", (0, 4), (1, 7))

    def keep(p: str) -> bool:
        return p.startswith("ray-operator/") and _go_file(p) and "/apis/" not in p

    def emitter(p: str) -> str:
        for name in ("rayjob", "raycluster", "rayservice", "raycronjob"):
            if name in p.lower():
                return f"{name}-controller"
        return "kuberay-operator"

    def found() -> Iterator[Found]:
        for tag in tags:
            files = list(git_files(repo, tag, keep))
            yield from go_found(files, tag, emitter, frozenset({"event", "log", "error"}))
            yield from go_found([f for f in files if "rayjob" in f[0]], tag, emitter, frozenset({"status"}), "RayJob")

    return tags, found()


def _git_go_project(slug: str, pattern: str, lowest: tuple[int, ...], highest: tuple[int, ...], keep: Callable[[str], bool], emitter: Callable[[str], str], want: frozenset[str]) -> tuple[list[str], Iterator[Found]]:
    repo = MIRROR / slug / "repo"
    tags = release_tags(repo, pattern, lowest, highest)

    def found() -> Iterator[Found]:
        for tag in tags:
            yield from go_found(git_files(repo, tag, keep), tag, emitter, want)

    return tags, found()


def device_plugin() -> tuple[list[str], Iterator[Found]]:
    return _git_go_project(
        "NVIDIA+k8s-device-plugin", r"v(\d+)\.(\d+)\.(\d+)", (0, 7), (0, 20),
        lambda p: _go_file(p) and p.startswith(("cmd/", "internal/", "pkg/", "api/")) is True or (_go_file(p) and "/" not in p),
        lambda p: "gpu-feature-discovery" if ("gpu-feature-discovery" in p or "/lm/" in p) else "nvidia-device-plugin",
        frozenset({"event", "log", "error"}),
    )


def container_toolkit() -> tuple[list[str], Iterator[Found]]:
    def emitter(p: str) -> str:
        match = re.match(r"cmd/([\w-]+)/", p)
        return match.group(1) if match else "nvidia-container-toolkit"

    return _git_go_project(
        "NVIDIA+nvidia-container-toolkit", r"v(\d+)\.(\d+)\.(\d+)", (1, 10), (1, 20),
        lambda p: _go_file(p) and p.startswith(("cmd/", "internal/", "pkg/")),
        emitter, frozenset({"log", "error"}),
    )


def containerd() -> tuple[list[str], Iterator[Found]]:
    prefixes = ("pkg/cri/", "internal/cri/", "runtime/v2/", "core/runtime/v2/", "pkg/process/", "cmd/containerd-shim-runc-v2/", "pkg/shim/", "runtime/v2/runc/", "cmd/containerd-shim-runc-v2/")

    def emitter(p: str) -> str:
        if "cri/" in p:
            return "containerd-cri"
        if "shim" in p or "process/" in p or "runc" in p:
            return "containerd-shim"
        return "containerd"

    return _git_go_project(
        "containerd+containerd", r"v(\d+)\.(\d+)\.(\d+)", (1, 5), (2, 3),
        lambda p: _go_file(p) and p.startswith(prefixes), emitter, frozenset({"log", "error"}),
    )


def runc() -> tuple[list[str], Iterator[Found]]:
    return _git_go_project(
        "opencontainers+runc", r"v(\d+)\.(\d+)\.(\d+)", (1, 0), (1, 5),
        lambda p: _go_file(p) and (p.startswith("libcontainer/") or "/" not in p) and "integration" not in p,
        lambda p: "runc", frozenset({"log", "error"}),
    )


def crio() -> tuple[list[str], Iterator[Found]]:
    repo = MIRROR / "cri-o+cri-o/repo"
    every = release_tags(repo, r"v(\d+)\.(\d+)\.(\d+)", (1, 20), (1, 36))
    tags = [t for t in every if int(t.split(".")[1]) % 3 == 2 or t == every[-1]]

    def keep(p: str) -> bool:
        return _go_file(p) and p.startswith(("server/", "internal/oci/", "internal/storage/", "internal/factory/container/"))

    def found() -> Iterator[Found]:
        for tag in tags:
            yield from go_found(git_files(repo, tag, keep), tag, lambda p: "crio", frozenset({"log", "error"}))

    return tags, found()


def nccl() -> tuple[list[str], Iterator[Found]]:
    repo = MIRROR / "NVIDIA+nccl/repo"
    tags = release_tags(repo, r"v(\d+)\.(\d+)\.(\d+)-(\d+)", (2, 4))

    def found() -> Iterator[Found]:
        for tag in tags:
            for path, text in git_files(repo, tag, lambda p: p.startswith("src/") and p.endswith((".cc", ".h", ".cu", ".cpp"))):
                for level, template in cfamily.printf_calls(text, {"WARN": "warning"}):
                    yield Found("nccl", level, "log", path, template, tag)

    return tags, found()


def slurm() -> tuple[list[str], Iterator[Found]]:
    repo = MIRROR / "SchedMD+slurm/repo"
    tags = release_tags(repo, r"slurm-(\d+)-(\d+)-(\d+)-(\d+)", (20, 11))
    oom = re.compile(r"oom|out of memory|memory limit|OOM", re.I)

    def keep(p: str) -> bool:
        return p.startswith(("src/plugins/task/cgroup/", "src/plugins/cgroup/", "src/plugins/jobacct_gather/", "src/slurmd/slurmstepd/", "src/plugins/task/affinity/")) and p.endswith(".c")

    def found() -> Iterator[Found]:
        for tag in tags:
            for path, text in git_files(repo, tag, keep):
                for level, template in cfamily.printf_calls(text, {"error": "error", "fatal": "fatal", "info": "info", "verbose": "info"}):
                    if oom.search(template):
                        yield Found("slurmstepd", level, "log", path, template, tag)

    return tags, found()


def linux() -> tuple[list[str], Iterator[Found]]:
    root = SRC / "deb/linux-6.1"
    names = {"pr_err": "error", "pr_warn": "warning", "pr_info": "info", "pr_emerg": "fatal", "pr_crit": "fatal", "pr_notice": "info", "panic": "fatal", "printk": "info"}

    def found() -> Iterator[Found]:
        for path, text in dir_files(root, lambda p: p.endswith(".c")):
            for level, template in cfamily.printf_calls(text, names):
                if path.endswith("oom_kill.c") or (level != "info" and re.search(r"oom|out of memory|allocation failure", template, re.I)) or (path.endswith("memcontrol.c") and re.search(r"oom|usage .*limit|Memory cgroup", template, re.I)):
                    yield Found("kernel", level, "log", path, template, "6.1.176")

    return ["6.1.176"], found()


# Kubernetes is too large to bring here whole: 1.20.2 is Debian's source package, 1.23.13
# and 1.28.7 the first commits of two public copies of the release's source tree.
K8S_READS: tuple[tuple[str, str, str], ...] = (
    ("1.20.2", "deb/k8s-1.20", ""),
    ("1.23.13", "cvetkovic+kubernetes_v1.23.13", "e822cdbb0f4394ba6449654ddef9be8ae9563372"),
    ("1.28.7", "chengsir22+kubernetes-1.28.7", "9258ab62ed50ee9f1715cbb078b1e760e823bfcb"),
)


def kubernetes() -> tuple[list[str], Iterator[Found]]:
    """Kubernetes 1.20.2, 1.23.13 and 1.28.7: kubelet, scheduler, controllers."""
    areas = (
        ("pkg/kubelet/eviction/", "eviction_manager"),
        ("pkg/kubelet/cm/devicemanager/", "device_manager"),
        ("pkg/kubelet/cm/topologymanager/", "topology_manager"),
        ("pkg/kubelet/volumemanager/", "volume_manager"),
        ("pkg/kubelet/nodeshutdown/", "node_shutdown_manager"),
        ("pkg/kubelet/", "kubelet"),
        ("pkg/volume/util/operationexecutor/", "volume_manager"),
        ("pkg/volume/csi/", "csi"),
        ("pkg/scheduler/", "scheduler"),
        ("pkg/controller/nodelifecycle/", "node_lifecycle_controller"),
        ("pkg/controller/volume/attachdetach/", "attachdetach_controller"),
        ("pkg/controller/volume/persistentvolume/", "persistentvolume_controller"),
        ("pkg/controller/job/", "job_controller"),
        ("pkg/controller/replicaset/", "replicaset_controller"),
        ("pkg/controller/controller_utils.go", "replicaset_controller"),
        ("plugin/pkg/admission/", "apiserver"),
        ("staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/", "apiserver"),
    )

    def emitter(p: str) -> str:
        return next(name for prefix, name in areas if p.startswith(prefix))

    def keep(p: str) -> bool:
        return _go_file(p) and any(p.startswith(prefix) for prefix, _ in areas) and "/apis/" not in p

    def found() -> Iterator[Found]:
        for version, where, commit in K8S_READS:
            if commit:
                files = list(git_files(MIRROR / where / "repo", commit, keep))
            else:
                files = list(dir_files(SRC / where, keep))
            yield from go_found(files, version, emitter, frozenset({"event", "log", "error"}))
            yield from scheduler_reasons(files, version)
            yield from eviction_messages(files, version)

    return [version for version, _, _ in K8S_READS], found()


def scheduler_reasons(files: list[tuple[str, str]], version: str) -> Iterator[Found]:
    """A filter plugin's reason, as the FailedScheduling event prints it (FitError)."""
    for path, text in files:
        if not path.startswith("pkg/scheduler/framework/plugins/"):
            continue
        for name, value in golang.constants(text).items():
            if (name.startswith(("ErrReason", "errReason")) or name.endswith("Reason")) and " " in value:
                template = "0/{total} nodes are available: {count} " + value.replace("{", "{{").replace("}", "}}") + "."
                yield Found("scheduler", "event-warning", "event", path, template, version, reason="FailedScheduling")


def eviction_messages(files: list[tuple[str, str]], version: str) -> Iterator[Found]:
    from common import printf_template

    for path, text in files:
        if not path.startswith("pkg/kubelet/eviction/"):
            continue
        for name, value in golang.constants(text).items():
            if name.endswith(("MessageFmt", "Message", "Msg")) and " " in value:
                yield Found("eviction_manager", "status", "status", path, printf_template(value.strip(), ["resource", "value", "value2", "value3"]), version, reason="Evicted")


def pytorch() -> tuple[list[str], Iterator[Found]]:
    """C++ of 1.13.1 and 2.6.0 (Debian's source packages); Python of four wheels."""
    cpp = [("1.13.1", SRC / "deb/torch-1.13"), ("2.6.0", SRC / "deb/torch-2.6")]
    wheels = [(v, SRC / f"wheels/torch-{v}/src") for v in ("1.10.2", "2.1.2", "2.5.1", "2.9.1")]
    order = ["1.10.2", "1.13.1", "2.1.2", "2.5.1", "2.6.0", "2.9.1"]

    def emitter(p: str) -> str:
        if "c10d" in p or "distributed" in p:
            return "c10d" if "elastic" not in p else "torch.distributed.elastic"
        return "torch.cuda" if "cuda" in p else "torch"

    def keep_cpp(p: str) -> bool:
        if not p.endswith((".cpp", ".hpp", ".h", ".cu", ".cc")):
            return False
        return p.startswith(("torch/csrc/distributed/c10d/", "c10/cuda/", "aten/src/ATen/cuda/", "torch/csrc/cuda/")) and "test" not in p and "UCC" not in p and "MPI" not in p

    def keep_py(p: str) -> bool:
        return p.startswith(("torch/cuda/", "torch/distributed/")) and "/tests/" not in p and "/_testing" not in p

    def found() -> Iterator[Found]:
        for version, root in cpp:
            for path, text in dir_files(root, keep_cpp):
                for level, template in cfamily.torch_calls(text):
                    yield Found(emitter(path), level, "log", path, template, version)
        for version, root in wheels:
            yield from py_found(root, version, keep_py, emitter)

    return order, found()


RAY_ORDER = ["1.13.0", "2.0.1", "2.9.3", "2.24.0", "2.40.0", "2.50.0", "2.60.0"]
_RAY_SCOPE = (
    "ray/_private/", "ray/job_submission/", "ray/dashboard/modules/job/", "ray/autoscaler/",
    "ray/runtime_env/", "ray/train/", "ray/llm/", "ray/serve/", "ray/util/placement_group.py",
    "ray/util/scheduling_strategies.py", "ray/util/collective/", "ray/util/state/", "ray/experimental/state/",
    "ray/_raylet.pyi", "ray/exceptions.py", "ray/actor.py", "ray/remote_function.py", "ray/worker.py",
    "ray/runtime_context.py", "ray/job_config.py", "ray/scripts/", "ray/dashboard/",
)


def _ray_keep(p: str) -> bool:
    if "/tests/" in p or "/test_" in p or p.split("/")[-1].startswith("test") or "/examples/" in p:
        return False
    if "/thirdparty" in p or "/_vendor" in p or "cloudpickle" in p or "/benchmarks/" in p:
        return False
    return p.startswith(_RAY_SCOPE)


def ray_emitter(p: str) -> str:
    table = (
        ("ray/dashboard/modules/job/", "job_manager"), ("ray/job_submission/", "job_submission"),
        ("ray/autoscaler/", "autoscaler"), ("ray/_private/runtime_env/", "runtime_env_agent"),
        ("ray/runtime_env/", "runtime_env"), ("ray/train/", "ray.train"), ("ray/llm/", "ray.llm"),
        ("ray/serve/", "ray.serve"), ("ray/dashboard/", "dashboard"), ("ray/scripts/", "ray-cli"),
        ("ray/util/collective/", "ray.util.collective"), ("ray/_private/node.py", "ray-node"),
        ("ray/_private/services.py", "ray-node"),
    )
    return next((name for prefix, name in table if p.startswith(prefix)), "ray-core-python")


def ray_python() -> tuple[list[str], Iterator[Found]]:
    def found() -> Iterator[Found]:
        for version in RAY_ORDER:
            yield from py_found(SRC / f"wheels/ray-{version}/src", version, _ray_keep, ray_emitter)

    return RAY_ORDER, found()


def ray_checks() -> tuple[list[str], Iterator[Found]]:
    """`RAY_CHECK` conditions as the release binaries print them (`Check failed: cond`),
    read from the release's own raylet, GCS server and core worker library (every check
    of the release, where the source read is near it); a check the source streams text
    after is `ray-cpp`'s, with its text."""
    binaries = (
        ("ray/core/src/ray/raylet/raylet", "raylet"),
        ("ray/core/src/ray/gcs/gcs_server", "gcs_server"),
        ("ray/_raylet.so", "core_worker"),
    )
    check = re.compile(r"Check failed: (.+?) ?$")

    def found() -> Iterator[Found]:
        streamed = _ray_streamed_conditions()
        for version in RAY_ORDER:
            base = SRC / f"wheels/ray-{version}/x"
            if not base.exists():
                continue
            for rel, who in binaries:
                path = base / rel
                if not path.exists():
                    continue
                out = subprocess.run(["strings", "-n", "12", str(path)], capture_output=True, text=True).stdout
                seen: set[str] = set()
                for line in out.splitlines():
                    match = check.search(line)
                    if not match or "Debug check" in line:
                        continue
                    cond = match.group(1).strip()
                    if cond in seen or not re.search(r"[A-Za-z_]{3}", cond) or "".join(cond.split()) in streamed[version]:
                        continue
                    seen.add(cond)
                    template = "Check failed: " + cond.replace("{", "{{").replace("}", "}}")
                    yield Found(who, "fatal", "log", f"binary:{rel}", template, version, said="Check failed")

    return RAY_ORDER, found()


VLLM_ORDER = ["0.4.3", "0.6.6.post1", "0.8.5", "0.10.2", "0.20.0", "0.34.0"]
_VLLM_PATHS = ("vllm/config", "vllm/engine/", "vllm/executor/", "vllm/worker/", "vllm/v1/engine/", "vllm/v1/executor/", "vllm/v1/worker/", "vllm/platforms/", "vllm/distributed/", "vllm/utils", "vllm/ray/", "vllm/device_allocator/", "vllm/v1/core/kv_cache", "vllm/core/block_manager", "vllm/core/scheduler", "vllm/v1/core/sched/")
_VLLM_WORDS = re.compile(r"GPU|CUDA|cuda|memory|Ray|placement|device|KV cache|cache blocks|parallel|world.size|NCCL|nccl|resource|node|driver|OOM|gpu_memory_utilization|max_model_len|blocks", re.I)


def vllm() -> tuple[list[str], Iterator[Found]]:
    def keep(p: str) -> bool:
        return p.startswith("vllm/") and "/models/" not in p and "test" not in p and "benchmark" not in p

    def emitter(p: str) -> str:
        if "executor" in p or "/ray" in p:
            return "vllm-executor"
        if "worker" in p:
            return "vllm-worker"
        if "config" in p:
            return "vllm-config"
        if "engine" in p:
            return "vllm-engine"
        if "platforms" in p:
            return "vllm-platform"
        if "distributed" in p:
            return "vllm-distributed"
        return "vllm"

    def found() -> Iterator[Found]:
        for version in VLLM_ORDER:
            for item in py_found(SRC / f"wheels/vllm-{version}/src", version, keep, emitter):
                if item.level not in ("raise", "error", "fatal") and not _VLLM_WORDS.search(item.template):
                    continue
                if item.source.startswith(_VLLM_PATHS) or _VLLM_WORDS.search(item.template):
                    yield item

    return VLLM_ORDER, found()


# Ray's C++ source: the ray repository is too large to bring here whole; two public
# copies of it are: a full-history copy of its master branch to 2025-02-11 (with the
# ray-1.13.0 and ray-2.0.1 tags) and a snapshot of the 2.53.0 release.
_RAY_FULL = "jcoffi+cluster-anywhere"
_RAY_253 = "drawing1201+ray-net-sense"
RAY_CPP_READS: tuple[tuple[str, str, str, bool], ...] = (
    # (release, repository, tag or commit, checked against the release's binaries)
    ("1.13.0", _RAY_FULL, "ray-1.13.0", False),
    ("2.0.1", _RAY_FULL, "ray-2.0.1", False),
    ("2.9.3", _RAY_FULL, "5a7071e5b021b62d6ec8e2e300d4ab89cc0dfdef", True),  # master, 2023-11-19
    ("2.24.0", _RAY_FULL, "baffe070eb64f9dc36797e9cab59214da9a3b811", True),  # master, 2024-05-27
    ("2.40.0", _RAY_FULL, "b5934e54c446fd4f5c28cf9b848c402f9a044357", True),  # master, 2024-11-18
    ("2.50.0", _RAY_253, "6f12bda", True),  # the 2.53.0 snapshot
    ("2.60.0", _RAY_253, "6f12bda", True),
)


def _ray_cpp_keep(p: str) -> bool:
    if not p.startswith("src/ray/") or not p.endswith((".cc", ".h")):
        return False
    return "/test" not in p and "_test" not in p and "/thirdparty/" not in p and "/java/" not in p and "mock" not in p


def ray_cpp_emitter(p: str) -> str:
    table = (
        ("src/ray/object_manager/plasma/", "plasma_store"), ("src/ray/object_manager/", "object_manager"),
        ("src/ray/raylet/scheduling/", "raylet-scheduler"), ("src/ray/raylet/", "raylet"),
        ("src/ray/gcs/", "gcs_server"), ("src/ray/core_worker/", "core_worker"), ("src/ray/rpc/", "ray-rpc"),
        ("src/ray/pubsub/", "ray-pubsub"), ("src/ray/common/", "ray-common"), ("src/ray/util/", "ray-util"),
    )
    return next((name for prefix, name in table if p.startswith(prefix)), "ray-cpp")


def _binary_text(version: str) -> str:
    """The printable strings of a release's raylet, GCS server and core worker library."""
    base = SRC / f"wheels/ray-{version}/x"
    out: list[str] = []
    for rel in ("ray/core/src/ray/raylet/raylet", "ray/core/src/ray/gcs/gcs_server", "ray/_raylet.so"):
        if (base / rel).exists():
            out.append(subprocess.run(["strings", "-n", "6", str(base / rel)], capture_output=True, text=True).stdout)
    return "\n".join(out)


def in_binary(template: str, strings: str) -> bool:
    """The wording's longest literal part is in the release's binaries (a message the
    source read near the release has, that the release itself prints)."""
    parts = sorted((p.strip() for p in literals(template)), key=len, reverse=True)
    longest = parts[0] if parts else ""
    if len(longest) < 6:
        return True
    return longest[:200] in strings


def _ray_streamed_conditions() -> dict[str, set[str]]:
    """Per release, the checks the source streams text after (`ray-cpp` holds them)."""
    found: dict[str, set[str]] = {}
    for version, slug, rev, _ in RAY_CPP_READS:
        conditions = found.setdefault(version, set())
        for _, text in git_files(MIRROR / slug / "repo", rev, _ray_cpp_keep):
            conditions |= raycpp.streamed_conditions(text)
    return found


def ray_cpp() -> tuple[list[str], Iterator[Found]]:
    """RAY_LOG at ERROR/WARNING/FATAL and checks' streamed text, read from source at each
    release (or the master commit before its branch), kept for a release read near it
    only where its binaries print the text."""

    def found() -> Iterator[Found]:
        for version, slug, rev, checked in RAY_CPP_READS:
            repo = MIRROR / slug / "repo"
            strings = _binary_text(version) if checked else ""
            for path, text in git_files(repo, rev, _ray_cpp_keep):
                for level, template, said in raycpp.ray_calls(text):
                    if checked and not in_binary(template, strings):
                        continue
                    yield Found(ray_cpp_emitter(path), level, "log", path, template, version, said=said)

    return RAY_ORDER, found()


CUDART = (("11.8.89", "nvidia_cuda_runtime_cu11-11.8.89", "libcudart.so.11.0"), ("12.8.90", "nvidia_cuda_runtime_cu12-12.8.90", "libcudart.so.12"))


def cuda_runtime() -> tuple[list[str], Iterator[Found]]:
    """The CUDA runtime's error strings (`cudaGetErrorString`) as PyTorch prints them
    (`CUDA error: <string>`, c10/cuda/CUDAException.cpp): the table of the runtime
    library the nvidia-cuda-runtime-cu11 and -cu12 packages ship, from `no error` to
    `startup failure in cuda runtime`, the names (`cudaError…`) between them left out."""

    def found() -> Iterator[Found]:
        for version, folder, name in CUDART:
            path = SRC / "cudart" / folder / "nvidia/cuda_runtime/lib" / name
            out = subprocess.run(["strings", "-n", "6", str(path)], capture_output=True, text=True, check=True).stdout.splitlines()
            start = out.index("no error")
            end = out.index("startup failure in cuda runtime", start)
            for text in out[start + 1 : end + 1]:
                if text.startswith("cudaError") or " " not in text:
                    continue
                template = "CUDA error: " + text.replace("{", "{{").replace("}", "}}")
                yield Found("torch.cuda", "error", "log", "libcudart.so (cudaGetErrorString)", template, version)

    return [v for v, _, _ in CUDART], found()
