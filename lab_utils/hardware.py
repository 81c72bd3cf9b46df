"""What the machine has, and how ranks of a parallel job map onto it."""
from __future__ import annotations

import importlib.metadata
import math
import os
import platform
import socket
import textwrap
from dataclasses import dataclass
from pathlib import Path

from . import allocator

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
    cpu_limit: str = ""  # CpuBudget.describe() when a quota, CPU_LIMIT or Slurm allows fewer CPUs than the cores

    @property
    def gpu_names(self) -> str:
        """GPU names joined with '; ' (empty string when there is none)."""
        return "; ".join(g.name for g in self.gpus)

    def _bf16_text(self) -> str:
        """'native (' the features found ')', or 'emulated': only what this CPU has (learner s12r3a: no AMX read)."""
        found = [f for f in sorted(NATIVE_BF16) if f in self.cpu_features.split()]
        return f"native ({', '.join(found)})" if found else "emulated (no avx512_bf16, no amx_bf16)"

    def fingerprint(self) -> str:
        """The machine in lines a learner can read (and results rows record): CPU, cores, features, memory, GPUs,
        and the memory allocator's setting (lab_utils.allocator)."""
        cores = f"{self.physical_cores} physical, " if self.physical_cores else ""
        lines = [f"CPU model:   {self.cpu_model or 'unknown'}",
                 f"CPU cores:   {cores}{self.cpu_count} usable by this process"
                 + (f" (its CPU time: {self.cpu_limit})" if self.cpu_limit else ""),
                 f"CPU features (those that matter here): {self.cpu_features or 'none of ' + ' '.join(FEATURES)}",
                 f"bf16 on CPU: {self._bf16_text()}"]
        if self.memory_gib:
            lines.append(f"memory:      {self.memory_gib:.1f} GiB")
        lines.append(allocator.allocator_line())
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


# ---- the CPU this process really has: affinity mask, cgroup quota, CPU_LIMIT, Slurm ---------------------------------

@dataclass(frozen=True)
class CpuSource:
    """One limit on the CPU this process may use: where it was read, how many CPUs it allows, what was read."""

    name: str  # "affinity mask", "cgroup quota", "CPU_LIMIT", "Slurm"
    cpus: float
    detail: str  # e.g. "cgroup quota 100000/100000 us"


def cpus_text(cpus: float) -> str:
    """CPUs in words: "1.0 CPU", "0.5 CPU", "2.0 CPUs" (at least one decimal, at most two)."""
    text = f"{cpus:.2f}".rstrip("0")
    return (f"{text}0" if text.endswith(".") else text) + (" CPU" if cpus <= 1 else " CPUs")


@dataclass(frozen=True)
class CpuBudget:
    """The CPU time this process may use (the smallest of its sources), which source limits it, and what was read."""

    cpus: float
    source: str
    sources: tuple[CpuSource, ...]
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        """E.g. "1.0 CPU: cgroup quota 100000/100000 us; 2 cores in the affinity mask" (the limiting source first)."""
        limiting = [s for s in self.sources if s.name == self.source][:1]
        ordered = limiting + [s for s in self.sources if s not in limiting]
        return f"{cpus_text(self.cpus)}: " + "; ".join(s.detail for s in ordered)

    def whole(self) -> int:
        """Ranks or threads to plan on this budget: the whole CPUs in it, at least 1."""
        return max(1, math.floor(self.cpus + 1e-9))

    @property
    def limited_by_quota(self) -> bool:
        """True when a quota, CPU_LIMIT or Slurm allows less than the cores of the affinity mask."""
        mask = next((s.cpus for s in self.sources if s.name == MASK), None)
        return any(s.name != MASK and (mask is None or s.cpus < mask) for s in self.sources)


MASK, QUOTA, CPU_LIMIT, SLURM = "affinity mask", "cgroup quota", "CPU_LIMIT", "Slurm"


def _affinity_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def _read(path: Path, notes: list[str]) -> str | None:
    """The file's text, or None when it is absent; unreadable: None and a note."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return None
    except OSError as err:
        notes.append(f"could not read {path.name} ({err.strerror or err}): assumed no limit there")
        return None


def cpu_groups(root: Path = Path("/"), notes: list[str] | None = None) -> tuple[int, list[Path]]:
    """(cgroup version, this process's cpu cgroup folders from its own group up to the root of the mounted
    hierarchy); (0, []) where there is none (not Linux, no cpu controller mounted)."""
    notes = [] if notes is None else notes
    text = _read(root / "proc/self/cgroup", notes)
    if not text:
        return 0, []
    v1_path: str | None = None
    v2_path: str | None = None
    for line in text.splitlines():
        number, _, rest = line.partition(":")
        controllers, _, where = rest.partition(":")
        if number == "0" and controllers == "":
            v2_path = where
        elif "cpu" in controllers.split(","):
            v1_path = where
    version, path = (1, v1_path) if v1_path is not None else (2, v2_path)
    if path is None:
        return 0, []
    mount_root, mount_point = _mount(root, version, notes)
    relative = path[len(mount_root):] if path.startswith(mount_root) else path
    top = root / mount_point.lstrip("/")
    own = top / relative.strip("/")
    groups = [own] + [parent for parent in own.parents if parent.is_relative_to(top)]
    return version, groups


def _mount(root: Path, version: int, notes: list[str]) -> tuple[str, str]:
    """(root inside the hierarchy, mount point) of the v1 cpu controller or the v2 hierarchy, from mountinfo; the
    usual places when mountinfo does not say."""
    for line in (_read(root / "proc/self/mountinfo", notes) or "").splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        fstype, _, *options = line.split(" - ", 1)[1].split()
        if version == 2 and fstype == "cgroup2":
            return fields[3], fields[4]
        if version == 1 and fstype == "cgroup" and options and "cpu" in options[-1].split(","):
            return fields[3], fields[4]
    if version == 2:
        return "/", "/sys/fs/cgroup"
    for name in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        if (root / "sys/fs/cgroup" / name).is_dir():
            return "/", f"/sys/fs/cgroup/{name}"
    return "/", "/sys/fs/cgroup/cpu"


def _group_quota(version: int, group: Path, notes: list[str]) -> tuple[int, int] | None:
    """(quota, period) in microseconds set on one group, None when it sets none (or it cannot be read: a note)."""
    if version == 2:
        text = _read(group / "cpu.max", notes)
        if text is None:
            return None
        parts = text.split()
        if parts[:1] == ["max"]:
            return None
        read = f"cpu.max {text.strip()!r}"
    else:
        quota_text = _read(group / "cpu.cfs_quota_us", notes)
        period_text = _read(group / "cpu.cfs_period_us", notes)
        if quota_text is None or period_text is None:
            return None
        if quota_text.strip() == "-1":
            return None
        parts = [quota_text.strip(), period_text.strip()]
        read = f"cpu.cfs_quota_us {quota_text.strip()!r} / cpu.cfs_period_us {period_text.strip()!r}"
    try:
        quota, period = int(parts[0]), int(parts[1])
        if quota <= 0 or period <= 0:
            raise ValueError
    except (ValueError, IndexError):
        notes.append(f"malformed cgroup {read}: assumed no quota there")
        return None
    return quota, period


def quota_group(root: Path = Path("/"), notes: list[str] | None = None) -> tuple[int, Path, float | None] | None:
    """(cgroup version, the folder whose quota limits this process (its own when none does), that quota in CPUs or
    None); None where there is no cpu cgroup."""
    notes = [] if notes is None else notes
    version, groups = cpu_groups(root, notes)
    if not groups:
        return None
    best: tuple[float, Path] | None = None
    for group in groups:
        quota = _group_quota(version, group, notes)
        if quota and (best is None or quota[0] / quota[1] < best[0]):
            best = quota[0] / quota[1], group
    return (version, best[1], best[0]) if best else (version, groups[0], None)


def _quota_source(root: Path, notes: list[str]) -> CpuSource | None:
    version, groups = cpu_groups(root, notes)
    best: CpuSource | None = None
    for level, group in enumerate(groups):
        quota = _group_quota(version, group, notes)
        if quota and (best is None or quota[0] / quota[1] < best.cpus):
            where = "" if level == 0 else " (set on a parent group)"
            best = CpuSource(QUOTA, quota[0] / quota[1], f"cgroup quota {quota[0]}/{quota[1]} us{where}")
    if groups and best is None:
        read = "cpu.max is 'max'" if version == 2 else "cpu.cfs_quota_us is -1"
        notes.append(f"no cgroup CPU quota: none on this process's cgroup or its parents ({read} or absent, "
                     f"cgroup v{version})")
    return best


def _number(name: str, environ, notes: list[str]) -> float | None:
    """A positive number of CPUs from environ[name]; absent: None; anything else: None and a note."""
    text = environ.get(name)
    if text is None or not text.strip():
        return None
    try:
        value = float(text)
        if not math.isfinite(value) or value <= 0:
            raise ValueError
    except ValueError:
        notes.append(f"{name}={text!r} is not a positive number of CPUs: ignored")
        return None
    return value


def cpu_budget(root: Path = Path("/"), environ=None, mask_cores: int | None = None) -> CpuBudget:
    """The CPU this process may use: the smallest of the affinity mask (or cpuset), the cgroup CPU quota (v1 or v2,
    the smallest over its nested groups), CPU_LIMIT (JupyterHub's spawners export it) and, inside a Slurm
    allocation, SLURM_CPUS_PER_TASK or SLURM_CPUS_ON_NODE. Never raises: what it could not read is in its notes."""
    environ = os.environ if environ is None else environ
    notes: list[str] = []
    mask = _affinity_cores() if mask_cores is None else mask_cores
    sources = [CpuSource(MASK, float(mask), f"{mask} core{'s' if mask != 1 else ''} in the affinity mask")]
    try:
        quota = _quota_source(Path(root), notes)
    except (OSError, ValueError) as err:  # a cgroup tree stranger than any above: the mask still stands
        notes.append(f"could not read the cgroup CPU quota ({err}): assumed none")
        quota = None
    if quota:
        sources.append(quota)
    limit = _number("CPU_LIMIT", environ, notes)
    if limit is not None:
        sources.append(CpuSource(CPU_LIMIT, limit, f"CPU_LIMIT={environ['CPU_LIMIT']} in the environment"))
    if environ.get("SLURM_JOB_ID"):
        for name in ("SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE"):
            cpus = _number(name, environ, notes)
            if cpus is not None:
                sources.append(CpuSource(SLURM, cpus, f"{name}={environ[name]} in Slurm job {environ['SLURM_JOB_ID']}"))
                break
    limiting = min(sources, key=lambda s: s.cpus)  # the first of equals: the mask before a quota as large
    return CpuBudget(limiting.cpus, limiting.name, tuple(sources), tuple(notes))


def usable_cpu_count() -> int:
    """Whole CPUs this process may use: cpu_budget().whole() (affinity, cpuset, cgroup quota, CPU_LIMIT, Slurm)."""
    return cpu_budget().whole()


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
    budget = cpu_budget()
    return HardwareReport(
        host=socket.gethostname(),
        cpu_count=budget.whole(),
        cpu_limit=budget.describe() if budget.limited_by_quota else "",
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
        why = textwrap.fill(f"why: {self.reason}", width=100, initial_indent="  ", subsequent_indent="    ",
                            break_on_hyphens=False, break_long_words=False)  # learner s10a: 180-320 chars on one line
        return f"world_size={self.world_size}: backend {self.backend}{threads}\n  {placement}\n{why}"


def rank_limit(hw: HardwareReport) -> tuple[int, int]:
    """(cores the ranks can run on, the most ranks allowed on them: MAX_RANKS_PER_CORE per core). A CPU quota
    (hw.cpu_limit) slows ranks but takes no core away: its cores are those of the affinity mask."""
    cores = hw.cpu_count
    if hw.cpu_limit:
        mask = next((s.cpus for s in cpu_budget().sources if s.name == MASK), cores)
        cores = max(cores, int(mask))
    return cores, MAX_RANKS_PER_CORE * cores


def plan(world_size: int, hardware: HardwareReport | None = None) -> Plan:
    """Map `world_size` ranks to devices: one GPU per rank (nccl), shared GPUs or CPU cores (gloo)."""
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a positive integer (number of ranks), got {world_size!r}")
    hw = hardware or detect()
    cores, limit = rank_limit(hw)
    if world_size > limit:
        raise ValueError(  # in lines under 100 columns, "ValueError: " before the first (lab 00 prints it)
            f"world_size={world_size} is impossible here: every rank is a process, and this machine\n"
            f"    has {cores} CPU core(s); use at most {limit} ranks (ideally <= {max(hw.cpu_count, len(hw.gpus))}).\n"
            f"    Why {limit}: the course allows {MAX_RANKS_PER_CORE} ranks per core, enough to show what oversubscribing\n"
            "    does; beyond that the ranks spend their time waiting for a core and their timeouts fire.\n"
            "    Ideally one rank per core (or GPU): only that many compute at once."
        )
    n_gpus = len(hw.gpus)
    if n_gpus >= world_size:
        return Plan(world_size, "nccl", tuple(f"cuda:{r}" for r in range(world_size)), None,
                    f"{n_gpus} GPU(s) for {world_size} rank(s): each rank owns one GPU, so NCCL (fastest GPU collectives).")
    if n_gpus:
        return Plan(world_size, "gloo", tuple(f"cuda:{r % n_gpus}" for r in range(world_size)), None,
                    f"{world_size} ranks but only {n_gpus} GPU(s): ranks share GPUs round-robin. NCCL refuses two "
                    "ranks on one GPU ('Duplicate GPU detected'), so gloo carries the collectives.")
    ranks = f"{world_size} rank{'s' if world_size > 1 else ''}"
    on = f"{hw.cpu_count} core{'s' if hw.cpu_count > 1 else ''}"
    use = (f"{ranks} share the {on}" if world_size > hw.cpu_count else
           f"{ranks} use{'s' if world_size == 1 else ''} {world_size} of the {on}")
    reason = (f"no GPU: each rank is a CPU process with one intra-op thread (the operating system spreads them over the "
              f"cores), so {use}; gloo is torch's CPU backend.")
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


def speed_words(factor: float) -> str:
    """How slowness()'s `factor` sizes a limit, in words that agree with it: ': this machine measured as fast as the
    course's just now' at 1.00 (slowness() never reports faster), else ' x 1.50: this machine measured 1.50x slower'."""
    if f"{factor:.2f}" == "1.00":
        return ": this machine measured as fast as the course's just now"
    if factor < 1:
        return f" x {factor:.2f}: this machine measured {1 / factor:.2f}x faster just now"
    return f" x {factor:.2f}: this machine measured {factor:.2f}x slower just now"


def launch_limit(timeout_s: float | None, reference_s: float = 120.0) -> float:
    """A lab's `timeout_s` parameter, or when None launch_timeout(reference_s) (sized from how fast this machine
    computes now: a slow or busy machine gets longer); prints the limit every launch of the lab runs under."""
    if timeout_s is None:  # the reason printed with it: two labs run minutes apart may measure different speeds
        factor = slowness()
        timeout_s = round(reference_s * factor)
        # two short lines (learner s10j: one 170-character line): the limit, then how it was sized
        if timeout_s == reference_s:  # learner s13r5h: '180 s (180 s on the course's machine...)': one figure
            print(f"every launch may run up to {timeout_s:g} s, as on the course's machine\n    (this machine "
                  "measured as fast as the course's just now; a busy moment measures slower)")
            return timeout_s
        print(f"every launch may run up to {timeout_s:g} s\n    ({reference_s:g} s on the course's machine"
              f"{speed_words(factor)};\n    a busy moment measures slower)")
        return timeout_s
    print(f"every launch may run up to {timeout_s:g} s")
    return timeout_s
