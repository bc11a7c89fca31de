"""Extract the message inventory: every warning- and error-level message the emitting
systems print, read from their source at release tags, merged across releases (every
wording kept with the releases that print it), given a verdict (`verdicts.py`) and
linked to the curated catalogue entry that already holds it.

Usage: python scripts/inventory/extract.py [PROJECT ...] [--out playbooks/inventory]
Reads the git directories `fetch` brought to /work/.mirror and the unpacked releases
under /work/inv-src (INVENTORY_MIRROR, INVENTORY_SRC); writes one JSON Lines file per output (its header
first, then one entry a line: playbooks/inventory/README.md).
No upstream code is copied: only message texts, paths and release names.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import yaml

import sources
from common import Found, Message, literal_text, literals, merge, ranges, slug, usable
from verdicts import verdict

# output file -> (project, description of what was read, the readers)
OUTPUTS: dict[str, tuple[str, str, list[Callable[[], tuple[list[str], Iterator[Found]]]]]] = {
    "kuberay": ("kuberay", "ray-project/kuberay at the newest patch of each minor release v0.4-v1.7: ray-operator/ (not apis/), Warning Events, logr Error/Info-with-error logs, errors made (fmt.Errorf, errors.New), RayJob status messages", [sources.kuberay]),
    "kubernetes": ("kubernetes", "Kubernetes 1.20.2 (Debian's source package kubernetes 1.20.5+really1.20.2), 1.23.13 and 1.28.7 (the first commits of two public copies of the release's source: cvetkovic/kubernetes_v1.23.13, chengsir22/kubernetes-1.28.7; the kubernetes repository is too large to bring here): kubelet (eviction, device, topology, volume managers, node shutdown), pkg/volume, scheduler and its plugins' reasons as FailedScheduling prints them, node lifecycle, attach-detach, persistent volume, job and replicaset controllers, admission plugins; Warning Events, klog errors and warnings, errors made", [sources.kubernetes]),
    "nvidia-device-plugin": ("nvidia", "NVIDIA/k8s-device-plugin at the newest patch of each minor release v0.7-v0.20: logs at warning/error, Warning Events, errors made", [sources.device_plugin]),
    "nvidia-container-toolkit": ("nvidia", "NVIDIA/nvidia-container-toolkit at the newest patch of each minor release v1.10-v1.20: cmd/, internal/, pkg/ logs at warning/error and errors made", [sources.container_toolkit]),
    "containerd": ("containerd", "containerd/containerd at the newest patch of each minor release v1.5-v2.3: the CRI plugin, runtime v2 and the runc shim; logs at warning/error and errors made", [sources.containerd]),
    "runc": ("runc", "opencontainers/runc at the newest patch of each minor release v1.0-v1.5: libcontainer/ and the commands; logs and errors made", [sources.runc]),
    "cri-o": ("cri-o", "cri-o/cri-o at every third minor release v1.20-v1.36 (newest patch) and the newest: server/, internal/oci, internal/storage; logs at warning/error and errors made", [sources.crio]),
    "nccl": ("nccl", "NVIDIA/nccl at the newest patch of each minor release from v2.4: every WARN(...) in src/", [sources.nccl]),
    "slurm": ("slurm", "SchedMD/slurm at the newest patch of each release from 20.11: error/fatal/info lines about OOM and memory limits in the cgroup, task and accounting plugins and slurmstepd", [sources.slurm]),
    "linux": ("linux", "Linux 6.1.176 (Debian's source package linux): mm/oom_kill.c in full, and the OOM and memory lines of mm/memcontrol.c and mm/page_alloc.c", [sources.linux]),
    "pytorch": ("pytorch", "PyTorch C++ (torch/csrc/distributed/c10d, c10/cuda, ATen/cuda, torch/csrc/cuda) from Debian's source packages pytorch 1.13.1 and 2.6.0: TORCH_CHECK/TORCH_WARN/C10_THROW_ERROR/LOG(ERROR|WARNING|FATAL) and c10::str error messages; PyTorch Python (torch/cuda, torch/distributed) from the 1.10.2, 2.1.2, 2.5.1 and 2.9.1 wheels: raises and logger errors/warnings", [sources.pytorch]),
    "cuda-runtime": ("pytorch", "The CUDA runtime's error strings (cudaGetErrorString) as PyTorch's C10_CUDA_CHECK prints them (`CUDA error: <string>`, c10/cuda/CUDAException.cpp): the string table of libcudart from the nvidia-cuda-runtime-cu11 11.8.89 and nvidia-cuda-runtime-cu12 12.8.90 packages", [sources.cuda_runtime]),
    "vllm": ("vllm", "vLLM's Python from the 0.4.3, 0.6.6.post1, 0.8.5, 0.10.2, 0.20.0 and 0.34.0 wheels (models left out): raises and logger errors/warnings in config, engine, executor, worker, platforms, distributed, KV cache and scheduler code, and elsewhere those that speak of GPUs, memory, Ray, devices or parallelism", [sources.vllm]),
    "ray-python": ("ray", "Ray's Python from the 1.13.0, 2.0.1, 2.9.3, 2.24.0, 2.40.0, 2.50.0 and 2.60.0 wheels: core (ray/_private, actor, exceptions, worker), job submission and job manager, autoscaler, runtime_env, dashboard, train, serve, llm, util/collective, state; raises and logger errors/warnings", [sources.ray_python]),
    "ray-cpp": ("ray", "Ray's C++ (src/ray: raylet, scheduling, GCS server, core worker, object manager and plasma, rpc, pubsub, common, util) read from source: RAY_LOG/RAY_EVENT at ERROR, WARNING and FATAL and the text a failed RAY_CHECK streams (`Check failed: <cond> <text>`). The ray repository is too large to bring here; two public copies of it were read: jcoffi/cluster-anywhere (ray-project/ray's master to 2025-02-11) at the ray-1.13.0 and ray-2.0.1 tags and at the master commits before the 2.9, 2.24 and 2.40 branches (2023-11-19, 2024-05-27, 2024-11-18), and drawing1201/ray-net-sense's 2.53.0 snapshot (for 2.50.0 and 2.60.0); a message read at a master commit or the snapshot is kept for a release only where that release's raylet, gcs_server and _raylet.so hold its longest literal part", [sources.ray_cpp]),
    "ray-checks": ("ray", "Ray's C++ RAY_CHECK conditions as the raylet, gcs_server and _raylet.so of the 1.13.0-2.60.0 wheels print them (`Check failed: <condition>`): the repository is too large to bring here, and the binaries hold each check's condition whole; a check whose source streams text after it is ray-cpp's, with its text", [sources.ray_checks]),
}

CATALOGUE = Path(__file__).resolve().parents[2] / "playbooks" / "catalogue"


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def catalogue_index() -> list[tuple[str, str, str]]:
    """(key, class, literal text) of every curated catalogue entry."""
    found: list[tuple[str, str, str]] = []
    for path in sorted(CATALOGUE.glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        for entry in data.get("entries", []):
            found.append((f"{path.name}#{entry['id']}", entry["class"], _norm(" \x00 ".join(literals(entry["message"])))))
    return found


def _in_order(parts: Sequence[str], text: str) -> bool:
    position = 0
    for part in parts:
        index = text.find(part, position)
        if index < 0:
            return False
        position = index + len(part)
    return True


def link(template: str, index: list[tuple[str, str, str]]) -> tuple[str, str] | None:
    """The catalogue entry holding this wording: every literal part of one in the other."""
    mine = [_norm(p) for p in literals(template) if len(p.strip()) >= 4]
    if sum(len(p) for p in mine) < 15:
        return None
    for key, category, text in index:
        theirs = [p.strip() for p in text.split("\x00") if len(p.strip()) >= 4]
        flat = text.replace("\x00", " ")
        # a wording inside a catalogue message must be most of it, not a wrapper's prefix
        # (`failed to create shim task: {error}` is not the OOM kill it may carry)
        if _in_order(mine, flat) and 5 * sum(len(p) for p in mine) >= 3 * sum(len(p) for p in theirs):
            return key, category
        if sum(len(p) for p in theirs) >= 20 and _in_order(theirs, " ".join(mine)):
            return key, category
    return None


def _id(message: Message, used: set[str]) -> str:
    first = next(iter(message.wordings))
    base = f"{re.sub(r'[^a-z0-9]+', '-', message.emitter.lower()).strip('-')}-{slug(literal_text(first))}"
    base = base[:72].strip("-")
    ident, n = base, 2
    while ident in used:
        ident, n = f"{base}-{n}", n + 1
    used.add(ident)
    return ident


def build(name: str) -> tuple[dict[str, object], Counter[str]]:
    project, described, readers = OUTPUTS[name]
    index = catalogue_index()
    entries: list[dict[str, object]] = []
    used: set[str] = set()
    counts: Counter[str] = Counter()
    all_releases: list[str] = []
    for reader in readers:
        order, found = reader()
        all_releases.extend(v for v in order if v not in all_releases)
        kept = [f for f in found if usable(f.template)]
        for message in merge(kept, order):
            entries.append(_entry(project, message, order, index, used, counts))
    entries.sort(key=lambda e: (str(e["source"]), str(e["id"])))
    return {"project": project, "read": described, "releases": all_releases, "entries": entries}, counts


def _entry(project: str, message: Message, order: Sequence[str], index: list[tuple[str, str, str]], used: set[str], counts: Counter[str]) -> dict[str, object]:
    wordings = [{"template": t, "versions": ranges(vs, order)} for t, vs in message.wordings.items()]
    entry: dict[str, object] = {"id": _id(message, used), "emitter": message.emitter, "level": message.level, "kind": message.kind}
    if message.reason:
        entry["reason"] = message.reason
    if message.exception:
        entry["exception"] = message.exception
    entry["source"] = message.source
    entry["versions"] = ranges(message.versions(order), order)
    entry["wordings"] = wordings
    linked = next((hit for t in message.wordings if (hit := link(t, index))), None)
    if linked:
        entry["verdict"] = linked[1]
        entry["catalogue"] = linked[0]
    else:
        text = message.said or " ".join(literal_text(t) for t in message.wordings)
        entry["verdict"] = verdict(project, message.level, f"{message.exception}: {text}" if message.exception else text, message.reason)
    counts[str(entry["verdict"])] += 1
    counts["wordings"] += len(wordings)
    counts["entries"] += 1
    return entry


def reverdict(path: Path) -> None:
    """A written file's verdicts and links given again by today's rules (after a rule's
    fix, without reading the sources again); a failed check's verdict, read from its
    streamed text alone, is kept."""
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    index = catalogue_index()
    counts: Counter[str] = Counter()
    out = [lines[0]]
    for raw in lines[1:]:
        entry = json.loads(raw)
        templates = [w["template"] for w in entry["wordings"]]
        if not templates[0].startswith("Check failed:"):
            entry.pop("catalogue", None)
            linked = next((hit for t in templates if (hit := link(t, index))), None)
            if linked:
                entry["verdict"], entry["catalogue"] = linked[1], linked[0]
            else:
                text = " ".join(literal_text(t) for t in templates)
                said = f"{entry['exception']}: {text}" if entry.get("exception") else text
                entry["verdict"] = verdict(header["project"], entry["level"], said, entry.get("reason", ""))
        counts[entry["verdict"]] += 1
        out.append(json.dumps(entry, ensure_ascii=False))
    path.write_text("\n".join(out) + "\n")
    print(f"{path.stem}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), flush=True)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outputs", nargs="*", default=list(OUTPUTS))
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[2] / "playbooks" / "inventory")
    parser.add_argument("--reverdict", action="store_true", help="give the files' entries their verdicts and links again (no source read)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.reverdict:
        for name in args.outputs:
            reverdict(args.out / f"{name}.jsonl")
        return 0
    for name in args.outputs:
        document, counts = build(name)
        entries = document.pop("entries")
        assert isinstance(entries, list)
        lines = [json.dumps(document, ensure_ascii=False)] + [json.dumps(e, ensure_ascii=False) for e in entries]
        (args.out / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
        print(f"{name}: {counts['entries']} messages, {counts['wordings']} wordings, " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k not in ("entries", "wordings")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
