"""The verdict of an extracted message, by rules a reviewer can check one by one.

Order of decision:
1. A message a curated catalogue entry already holds (`playbooks/catalogue/`) takes that
   entry's class and is linked to it (the catalogue was read and classed by a person).
2. The first rule below whose pattern matches the message's literal text (and, for
   events, its reason) gives a TAXONOMY class: each rule is the wording TAXONOMY's class
   names as its signature or its "what" (`### 1.x`), not a guess from one word.
3. `none` only where TAXONOMY §1.26 lists the message as benign, or where the message
   says itself it is a deprecation notice printed at warning level (never a raise, never
   an error, never an event).
4. Everything else is `unclassified`: a failure no class explains, answered "pitcrew
   does not know this failure" with the entry's id and emitter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    verdict: str
    pattern: re.Pattern[str] | None
    projects: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    """Event or status reasons that alone decide (the message may say anything)."""


def _r(verdict: str, pattern: str | None, projects: tuple[str, ...] = (), reasons: tuple[str, ...] = ()) -> Rule:
    return Rule(verdict, re.compile(pattern, re.I) if pattern else None, projects, reasons)


RULES: tuple[Rule, ...] = (
    # §1.26 benign, by TAXONOMY's own list
    _r("none", r"Ray deduplicates logs by default|Tip: use `ray status`|Spilled \d* ?MiB|object store is using /tmp instead of /dev/shm|File descriptor limit .* too low|submitted successfully|PYTHON worker processes have been started"),
    # the kernel's OOM killer switched off and on around a system suspend: not a kill
    _r("none", r"^OOM killer (enabled|disabled)\.?$", ("linux",)),
    # 1.3 the kernel's OOM report, every line of it (dump_header, the memcg's usage lines)
    _r("pod_oom_killed", r"oom|Out of memory|usage .*limit .*failcnt|Memory cgroup|Tasks state|\[  pid  \]", ("linux",)),
    # 1.3 the kernel's and the cgroup's OOM killer
    _r("pod_oom_killed", r"Killed process|invoked oom-killer|Memory cgroup out of memory|oom-kill:|Out of memory: Kill|oom_kill event|OOM Killed|OOMKilled|oom-kill event|Exceeded (job|step) memory limit|Out Of Memory \(OOM\)", reasons=("OOMKilled", "OOMKilling")),
    # 1.4 Ray's memory monitor
    _r("ray_memory_monitor_oom", r"killed due to memory pressure|node running low on memory|memory usage threshold|Task was killed due to the node|RayOutOfMemoryError|System memory low at node", ("ray",)),
    # 1.5 GPU memory
    _r("cuda_oom", r"CUDA out of memory|CUDA error: out of memory|out of memory.*(GPU|CUDA|device)|(GPU|CUDA|device).*out of memory|No available memory for the cache blocks|larger than the available KV cache memory|not enough (GPU|KV cache) memory|gpu_memory_utilization.*(insufficient|too low|increase)|Insufficient memory.*KV cache|KV cache.*(insufficient|not enough)"),
    # 1.11 NCCL and collective timeouts
    _r("nccl_error_timeout", r"Watchdog caught collective operation timeout|watchdog thread terminated with exception|taking the entire process down|watchdog got stuck|NCCL error|ncclUnhandledCudaError|ncclSystemError|ncclInternalError|ncclRemoteError|NCCL communicator.*(aborted|timed out|timeout)|collective operation timeout|Timed out waiting.*NCCL|remote process exited or there was a network error|NET/IB.*(failed|error)|Connection closed by remote peer|socketProgress|Call to \w+ failed"),
    _r("nccl_error_timeout", r"fail|error|timeout|timed out|abort|unable|could not|cannot|closed|refused|reset|unreachable|mismatch", ("nccl",)),
    # 1.12 /dev/shm
    _r("shm_too_small", r"/dev/shm|shared memory segment|posix_fallocate"),
    # 1.25 a CUDA device-side assert: a kernel the job launched asserted on its own data
    _r("application_error", r"device-side assert triggered"),
    # 1.24 GPU hardware fault (the CUDA runtime's kernel exceptions, ECC and NVLink errors)
    _r("gpu_fault", r"\bXid\b|uncorrectable ECC|illegal memory access|unspecified launch failure|GPU has fallen off the bus|Unrecoverable.*GPU|GPU is lost|uncorrectable NVLink error|peer GPU memory over nvlink or a hardware error|CUDA error: (an illegal instruction was encountered|hardware stack error|misaligned address|invalid program counter)$"),
    # 1.30 GPU asked for and not usable
    _r("gpu_unavailable", r"no CUDA-capable device|CUDA driver version is insufficient|CUDA error: (initialization error|invalid device ordinal|CUDA driver is a stub library|CUDA-capable device\(s\) is/are busy or unavailable|system has unsupported display driver / cuda driver combination|forward compatibility was attempted on non supported HW|system not yet initialized|API call is not supported in the installed CUDA driver)$|Found no NVIDIA driver|NVIDIA driver on your system is too old|nvidia-container-cli|driver/library version mismatch|cudaGetDeviceCount|CUDA_VISIBLE_DEVICES.*(empty|not set|invalid)|no GPUs? (?:are |is )?(?:available|found|detected)|failed to (allocate|get) (?:requested )?devices?|unhealthy devices?|requested number of devices unavailable|UnexpectedAdmissionError|GPUs? .{0,30}not (found|available|visible)|(larger than|exceeds) the (total )?number of available GPUs|Torch not compiled with CUDA enabled|(Failed to|could not|unable to) (initiali[sz]e|load) NVML|NVML.{0,40}(error|failed|Driver Not Loaded)", reasons=("UnexpectedAdmissionError",)),
    # the kubelet's device manager and the device plugins themselves
    _r("gpu_unavailable", r"device plugin", ("kubernetes", "nvidia")),
    # 1.8 the Kubernetes scheduler's insufficiency
    _r("failed_scheduling_insufficient", r"nodes are available|Insufficient \w|didn't match (Pod's )?node (affinity|selector)|untolerated taint|didn't tolerate|No preemption victims|pod didn't trigger scale-up|didn't have free ports|Too many pods", ("kubernetes",), ("FailedScheduling", "NotTriggerScaleUp")),
    # 1.29 storage
    _r("volume_mount_failure", r"MountVolume|UnmountVolume|AttachVolume|unbound (immediate )?PersistentVolumeClaim|volume node affinity conflict|Unable to attach or mount volumes|timed out waiting for the condition.*volume|failed to (mount|attach|provision)|persistentvolumeclaim .* not found|CSI driver|volume .* (is )?not (attached|found)|mount failed|FailedMount", ("kubernetes", "containerd", "cri-o", "kuberay"), ("FailedMount", "FailedAttachVolume", "FailedMapVolume", "ProvisioningFailed", "VolumeFailedDelete", "FailedBinding")),
    # 1.9 image pulls
    _r("image_pull_backoff", r"pull(ing)? image|ErrImagePull|ImagePullBackOff|InvalidImageName|image.*not found|manifest unknown|pull access denied|failed to resolve reference|failed to (pull|unpack) |failed to fetch (anonymous |oauth )?(token|image|manifest|layer|blob)|toomanyrequests|Back-off pulling", ("kubernetes", "containerd", "cri-o"), ("ErrImagePull", "ImagePullBackOff", "InspectFailed", "ErrImageNeverPull")),
    # 1.27 a pod spec's reference that does not resolve
    _r("pod_config_error", r"couldn't find key|secret .* not found|configmap .* not found|CreateContainerConfigError|serviceaccount .* not found|service account .* not found|exceeded quota|admission webhook .* denied|no PriorityClass|priorityclass .* not found|forbidden:|must specify limits|failed to create pod\b(?! ?sandbox)|FailedCreate|couldn't get (secret|configMap)|Failed (to create|creating) (head |worker |redis cleanup )?Pod\b", ("kubernetes", "kuberay"), ("FailedToCreateHeadPod", "FailedToCreateWorkerPod", "FailedCreate", "CreateContainerConfigError", "FailedCreatePodContainer")),
    # 1.28 the runtime cannot start the process
    _r("container_start_failure", r"exec format error|executable file not found|OCI runtime (create|exec|start) failed|RunContainerError|StartError|permission denied.*exec|exec: .* (not found|permission denied)|no such file or directory.*exec|failed to (create|start) (container|task|shim)|container init|starting container process caused|error during container init|unable to start container process|CreateContainerError", ("kubernetes", "containerd", "cri-o", "runc"), ("StartError", "RunContainerError", "CreateContainerError")),
    # 1.14 node pressure eviction
    _r("pod_eviction", r"The node was low on resource|node had condition|exceeds (its|the) (request|total limit)|ephemeral local storage usage exceeds|Usage of EmptyDir volume|evict", ("kubernetes",), ("Evicted", "EvictionThresholdMet")),
    # 1.13 node loss
    _r("node_lost_preemption", r"marked dead because the detector|node has died|node .* (is )?dead|NodeDiedError|(node|instance|VM|spot).{0,40}preempted|preempted.{0,40}(node|instance|VM)\b|imminent node shutdown|node is shutting down|NodeShutdown|Node .* not ready|NodeNotReady|missing too many heartbeats|TaintManagerEviction|Deleting pod .* from node"),
    # 1.16 probes
    _r("probe_failure", r"(Readiness|Liveness|Startup) probe (failed|errored)|failed (liveness|startup) probe", (), ("Unhealthy",)),
    # 1.15 restarts
    _r("crash_loop_backoff", r"Back-off restarting failed container|CrashLoopBackOff"),
    # 1.31 batch queues
    _r("queue_admission_pending", r"\bKueue\b|ClusterQueue|LocalQueue|PodGroup|minAvailable|Volcano|queue .* (closed|overused)|not admitted", ("kubernetes", "kuberay")),
    # 1.17 before 1.10: an infeasible task's message names its runtime env too
    _r("ray_resources_infeasible", r"infeasible|No available node types can fulfill|cannot be scheduled right now|is pending and cannot currently be scheduled", ("ray",)),
    # 1.10 packages and runtime_env: a module or symbol missing, a runtime env that could
    # not be set up or created (not every message that names the runtime env agent)
    _r("dependency_runtime_env", r"No module named|ModuleNotFoundError|undefined symbol|Failed to set ?up runtime ?env|(create|creating|setup|set up|install|installing)( the)? runtime ?env(ironment)?( \S+)? (failed|error)|(Failed|unable|couldn't|could not|Fails?) to (create|set ?up|install|get or create|create or get) (a |the )?runtime ?env|RuntimeEnvSetupError|runtime_env .* (failed|error)|pip install .* failed|installing the runtime_env|CondaValueError|import .* failed|associated runtime env failed", ("ray", "vllm", "pytorch")),
    # 1.20 versions
    _r("ray_version_mismatch", r"Version mismatch|version mismatch|minor versions differ|was started with .*Ray", ("ray",)),
    # 1.19 ports
    _r("port_conflict", r"address already in use|Address already in use|Failed to find a valid port|bind: (?!.*mount)|Failed to bind(?! ?mount)|port .* (is )?(already )?in use|EADDRINUSE"),
    # 1.23 threads, pids, fds
    _r("process_limits_exhausted", r"Resource temporarily unavailable|pthread_create|Too many open files|EMFILE|too many (threads|processes)|ulimit|RLIMIT_NPROC|pids limit"),
    # 1.18 object store and spilling
    _r("object_store_full", r"ObjectStoreFullError|object store is full|out of disk|OutOfDiskError|disk.*(full|over capacity)|Local disk is full|spill(ed|ing)? .* fail|Failed to spill|No space left on device", ("ray",)),
    # 1.7 GCS
    _r("gcs_unreachable", r"GCS (has been |is )?unavailable|connect to (the )?GCS|GCS.*(not reachable|unreachable|timed out|failed to connect|connection)|wait(ing)? for GCS|Failed to get GCS|RPC to GCS|gcs_server.*(died|failed)|GcsRpcClient|GCS server|register with GCS|Unable to connect to GCS", ("ray",)),
    # 1.17 infeasible resources
    _r("ray_resources_infeasible", r"infeasible|No available node types can fulfill|cannot be scheduled right now|not enough resources|is pending and cannot currently be scheduled|placement group .* (cannot|could not) be (created|scheduled)|resource request .* cannot", ("ray",)),
    # 1.1 / 1.2 named actors
    _r("named_actor_conflict", r"is already taken|already exists in namespace|Actor with name .* already exists", ("ray",)),
    _r("named_actor_missing", r"Failed to look up actor with name|register center", ("ray",)),
    # 1.22 / 1.21 RayJob
    _r("job_deadline_timeout", r"activeDeadlineSeconds|DeadlineExceeded|passed the active ?deadline|active longer than specified deadline", ("kuberay", "kubernetes")),
    _r("rayjob_cr_failure", None, ("kuberay",), ("SubmissionFailed", "AppFailed", "ValidationFailed", "BackoffLimitExceeded")),
    _r("rayjob_cr_failure", r"Job submission has failed|submitter|BackoffLimitExceeded|Failed to (submit|get|stop) (the )?(Ray )?job|RayJob .* failed|job deployment", ("kuberay",)),
    # 1.6 process death
    _r("worker_died_system_error", r"worker (died|crashed)|actor died unexpectedly|died unexpectedly|Worker exit type: SYSTEM_ERROR|connection error code|exited unexpectedly|WorkerCrashedError|ActorDiedError|RayActorError|The actor is dead|process (has )?died|SIGSEGV|Segmentation fault", ("ray", "vllm")),
    # deprecation notices printed at warning level: benign by their own words
    _r("none", r"\bdeprecated\b|will be removed in (a )?future|is deprecated|deprecation"),
)


def verdict(project: str, level: str, text: str, reason: str = "") -> str:
    """The class, `none` or `unclassified` for one message (its literal text)."""
    for rule in RULES:
        if rule.projects and project not in rule.projects:
            continue
        if rule is RULES[-1] and level != "warning":
            continue
        if reason and reason in rule.reasons:
            return rule.verdict
        if rule.pattern is not None and rule.pattern.search(text):
            return rule.verdict
    return "unclassified"
