"""What the machine has, and how ranks of a parallel job map onto it."""
from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
from dataclasses import dataclass

# More ranks than this many per core is a mistake, not an experiment.
MAX_RANKS_PER_CORE = 4


@dataclass(frozen=True)
class GPU:
    """One CUDA device as torch sees it."""

    index: int
    name: str
    memory_gib: float
    capability: str = ""  # CUDA compute capability, e.g. "9.0" (bf16 needs >= 8.0)


@dataclass(frozen=True)
class HardwareReport:
    """CPUs, GPUs and library versions of this machine."""

    host: str
    cpu_count: int
    gpus: tuple[GPU, ...]
    python_version: str
    torch_version: str
    tf_version: str
    cpu_model: str = ""
    physical_cores: int = 0  # 0: unknown
    cpu_features: str = ""  # space-separated, the subset of FEATURES this CPU has
    memory_gib: float = 0.0  # 0: unknown

    @property
    def gpu_names(self) -> str:
        """GPU names joined with '; ' (empty string when there is none)."""
        return "; ".join(g.name for g in self.gpus)

    @property
    def native_bf16(self) -> bool:
        """True when the CPU does bfloat16 in hardware (avx512_bf16 or AMX); emulated bf16 is slower than float32."""
        return bool(set(self.cpu_features.split()) & NATIVE_BF16)

    def fingerprint(self) -> str:
        """The machine in lines a learner can read (and results rows record): CPU, cores, features, memory, GPUs."""
        cores = f"{self.physical_cores} physical, " if self.physical_cores else ""
        lines = [f"CPU model:   {self.cpu_model or 'unknown'}",
                 f"CPU cores:   {cores}{self.cpu_count} usable by this process",
                 f"CPU features (those that matter here): {self.cpu_features or 'none of ' + ' '.join(FEATURES)}",
                 f"bf16 on CPU: {'native (avx512_bf16 / AMX)' if self.native_bf16 else 'emulated (no avx512_bf16, no AMX)'}"]
        if self.memory_gib:
            lines.append(f"memory:      {self.memory_gib:.1f} GiB")
        return "\n".join(lines)

    def describe(self) -> str:
        """A few lines a learner can read."""
        lines = [self.fingerprint()]  # the host name stays in the CSV metadata, not in notebook outputs
        if self.gpus:
            for g in self.gpus:
                capability = f", compute capability {g.capability}" if g.capability else ""
                lines.append(f"GPU {g.index}:       {g.name}, {g.memory_gib:.1f} GiB{capability}")
        else:
            lines.append("GPUs:        none (CUDA not available to torch)")
        lines += [
            f"python:      {self.python_version}",
            f"torch:       {self.torch_version}",
            f"tensorflow:  {self.tf_version}",
        ]
        return "\n".join(lines)


# Instruction-set features that change what is fast on a CPU: vector width (avx2, avx512f), native bfloat16
# (avx512_bf16, amx_bf16) and the AMX tile unit, fp16 conversions and dot products.
FEATURES = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8")
NATIVE_BF16 = {"avx512_bf16", "amx_bf16"}


def cpu_info(text: str | None = None) -> dict:
    """{'cpu_model', 'physical_cores', 'cpu_features'} parsed from `text`, else from /proc/cpuinfo."""
    if text is None:
        try:
            text = open("/proc/cpuinfo").read()
        except OSError:  # no /proc/cpuinfo (macOS, Windows): 0 cores, no features
            return {"cpu_model": platform.processor() or platform.machine(), "physical_cores": 0, "cpu_features": ""}
    flags: set[str]
    model, flags, cores = "", set(), set()
    physical = core = None
    for line in text.splitlines():
        key, _, value = (part.strip() for part in line.partition(":"))
        if key == "model name" and not model:
            model = " ".join(value.split())
        elif key == "flags" and not flags:
            flags = set(value.split())
        elif key == "physical id":
            physical = value
        elif key == "core id":
            core = value
        elif not line.strip() and core is not None:
            cores.add((physical, core))
            physical = core = None
    if core is not None:
        cores.add((physical, core))
    return {"cpu_model": model, "physical_cores": len(cores),
            "cpu_features": " ".join(f for f in FEATURES if f in flags)}


def memory_gib() -> float:
    """Total memory in GiB (0 when unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return 0.0


def usable_cpu_count() -> int:
    """Cores this process may run on (respects affinity masks and containers' cpusets)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def package_version(*names: str) -> str:
    """Installed version of the first distribution found, without importing it."""
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "not installed"


def detect_gpus() -> tuple[GPU, ...]:
    """CUDA devices visible to torch (empty on a CPU-only machine)."""
    import torch

    if not torch.cuda.is_available():
        return ()
    gpus = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        gpus.append(GPU(i, props.name, props.total_memory / 2**30, f"{props.major}.{props.minor}"))
    return tuple(gpus)


def detect() -> HardwareReport:
    """Look at this machine once and report what it has."""
    return HardwareReport(
        host=socket.gethostname(),
        cpu_count=usable_cpu_count(),
        gpus=detect_gpus(),
        python_version=platform.python_version(),
        torch_version=package_version("torch"),
        tf_version=package_version("tensorflow", "tensorflow-cpu"),
        memory_gib=memory_gib(),
        **cpu_info(),
    )


@dataclass(frozen=True)
class Plan:
    """Where each rank of a `world_size` job runs, over which backend, and why."""

    world_size: int
    backend: str
    devices: tuple[str, ...]
    threads_per_rank: int | None
    reason: str

    def device(self, rank: int) -> str:
        """Device string ('cpu', 'cuda:0', ...) for one rank."""
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank {rank} is outside 0..{self.world_size - 1} for world_size={self.world_size}")
        return self.devices[rank]

    @property
    def uses_gpus(self) -> bool:
        """True when ranks run on CUDA devices."""
        return self.devices[0].startswith("cuda")

    def describe(self) -> str:
        """The decision in words."""
        placement = ", ".join(f"rank {r} -> {d}" for r, d in enumerate(self.devices))
        threads = f"; {self.threads_per_rank} intra-op thread(s) per rank" if self.threads_per_rank else ""
        return f"world_size={self.world_size}: backend {self.backend}{threads}\n  {placement}\n  why: {self.reason}"


def plan(world_size: int, hardware: HardwareReport | None = None) -> Plan:
    """Map `world_size` ranks to devices: one GPU per rank (nccl), shared GPUs or CPU cores (gloo)."""
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a positive integer (number of ranks), got {world_size!r}")
    hw = hardware or detect()
    limit = MAX_RANKS_PER_CORE * hw.cpu_count
    if world_size > limit:
        raise ValueError(
            f"world_size={world_size} is impossible here: every rank is a process and this machine has "
            f"{hw.cpu_count} CPU core(s); use at most {limit} ranks (ideally <= {max(hw.cpu_count, len(hw.gpus))})."
        )
    n_gpus = len(hw.gpus)
    if n_gpus >= world_size:
        return Plan(world_size, "nccl", tuple(f"cuda:{r}" for r in range(world_size)), None,
                    f"{n_gpus} GPU(s) for {world_size} rank(s): each rank owns one GPU, so NCCL (fastest GPU collectives).")
    if n_gpus:
        return Plan(world_size, "gloo", tuple(f"cuda:{r % n_gpus}" for r in range(world_size)), None,
                    f"{world_size} ranks but only {n_gpus} GPU(s): ranks share GPUs round-robin. NCCL refuses two "
                    "ranks on one GPU ('Duplicate GPU detected'), so gloo carries the collectives.")
    reason = (f"no GPU: each rank is a CPU process with one intra-op thread (the operating system spreads them over the "
              f"cores), so {world_size} rank(s) use {world_size} of {hw.cpu_count} core(s); gloo is torch's CPU backend.")
    if world_size > hw.cpu_count:
        reason += (f" Warning: {world_size} ranks on {hw.cpu_count} core(s) are oversubscribed; they will run, "
                   "correctly but slower than fewer ranks, so do not read speed from this run.")
    return Plan(world_size, "gloo", ("cpu",) * world_size, 1, reason)


def show_plan(world_size: int, hardware: HardwareReport | None = None) -> Plan:
    """plan(world_size, hardware), printed as a lab's set-up cell shows it."""
    chosen = plan(world_size, hardware)
    print(chosen.describe())
    return chosen


def rank_device() -> tuple[str, str]:
    """(device, backend) for this rank, from LOCAL_RANK and LOCAL_WORLD_SIZE as a launcher or torchrun sets them."""
    one_host = bool(os.environ.get("LAB_ONE_HOST"))  # simulated nodes on one machine: the whole job is placed here
    try:
        local_rank = int(os.environ["RANK"] if one_host else os.environ.get("LOCAL_RANK", os.environ["RANK"]))
        local_world = int(os.environ["WORLD_SIZE"] if one_host else os.environ.get("LOCAL_WORLD_SIZE", os.environ["WORLD_SIZE"]))
    except KeyError:
        raise RuntimeError("RANK and WORLD_SIZE are not set: start this worker with lab_utils.launch or torchrun") from None
    local = plan(local_world)
    return local.device(local_rank), local.backend


# ---- how long things may take here: timeouts sized from this machine's measured speed ---------------------------------

REFERENCE_WORK_S = 0.009  # REFERENCE_WORK's median time on the course's 2-core reference machine, quiet
MAX_SLOWNESS = 10.0  # a machine measured slower than this is still given at most 10x the reference's timeouts


def _reference_work() -> float:
    """Seconds of 20 products of 256 x 256 matrices on one thread (what a busy or slow machine takes longer for)."""
    import time

    import torch

    a = torch.ones(256, 256)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        start = time.perf_counter()
        for _ in range(20):
            a @ a
        return time.perf_counter() - start
    finally:
        torch.set_num_threads(before)


def slowness(repeats: int = 5) -> float:
    """How many times slower than the reference machine this one computes now (median of `repeats`, after a warm-up),
    between 1 and MAX_SLOWNESS: a busy machine measures slower, as it runs."""
    import statistics

    _reference_work()
    measured = statistics.median(_reference_work() for _ in range(repeats)) / REFERENCE_WORK_S
    return min(max(measured, 1.0), MAX_SLOWNESS)


def launch_timeout(reference_s: float = 120.0) -> float:
    """Seconds a launch may run here: `reference_s` (what it may take on the reference machine) times slowness()."""
    return round(reference_s * slowness())


def launch_limit(timeout_s: float | None, reference_s: float = 120.0) -> float:
    """A lab's `timeout_s` parameter, or when None launch_timeout(reference_s) (sized from how fast this machine
    computes now: a slow or busy machine gets longer); prints the limit every launch of the lab runs under."""
    if timeout_s is None:
        timeout_s = launch_timeout(reference_s)
    print(f"every launch may run up to {timeout_s:g} s")
    return timeout_s
