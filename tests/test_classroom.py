"""make classroom: a real JupyterHub for local learners, each server in its own cgroup (lab_utils.instructor.classroom).

The slow test brings a class of two up as root, logs both learners in through the hub's REST API, runs labs 00 and 03
headless in both learners' servers at once (papermill, started from a kernel of each learner's own server, so inside
its cgroup), checks what the labs say about the quota, and takes the class down again, checking nothing is left.
"""
from __future__ import annotations

import http.cookiejar
import json
import os
import shutil
import socket
import struct
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from lab_utils.instructor import labs
from lab_utils.instructor.classroom import access, accounts, cgroups, local

ROOT = Path(__file__).resolve().parent.parent


def test_mem_limit_is_read_as_jupyterhub_reads_it():
    assert local.parse_bytes("3G") == 3 * 1024**3
    assert local.parse_bytes("512M") == 512 * 1024**2
    assert local.parse_bytes("1073741824") == 1024**3
    for bad in ("3 GB of RAM", "-1G", "", "G"):
        with pytest.raises(ValueError, match="mem_limit"):
            local.parse_bytes(bad)


def test_refuses_without_root_in_one_sentence_saying_what_to_do():
    why = local.refusal(euid=1000)
    assert "needs root" in why and "sudo make classroom" in why
    with pytest.raises(ValueError, match="at least one learner"):
        local.learner_names(0)
    assert local.learner_names(2) == ["learner1", "learner2"]


def test_each_learners_group_nests_under_this_process_own_group_in_each_v1_hierarchy():
    own = cgroups._own_paths("4:memory:/process_api/abc\n1:cpu,cpuacct:/\n0::/\n")
    assert own == {"memory": "/process_api/abc", "cpu": "/", "cpuacct": "/", "": "/"}
    mounts = cgroups._v1_mounts(
        "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        "40 31 0:35 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n")
    assert mounts == {"cpu": Path("/sys/fs/cgroup/cpu,cpuacct"), "memory": Path("/sys/fs/cgroup/memory")}


def test_v1_and_v2_limits_are_written_as_the_kernel_reads_them(tmp_path, monkeypatch):
    v1 = [tmp_path / "cpu" / "lab-classroom" / "ada", tmp_path / "memory" / "lab-classroom" / "ada"]
    for folder, files in zip(v1, (("cpu.cfs_quota_us", "cpu.cfs_period_us"), ("memory.limit_in_bytes",))):
        folder.mkdir(parents=True)
        for name in files:  # the kernel makes these files with the folder; a fake tree has them made in advance
            (folder / name).write_text("-1")
    monkeypatch.setattr(cgroups, "version", lambda root=None: 1)
    cgroups.LearnerGroup(tuple(v1)).create(1.5, 3 * 1024**3)
    assert (v1[0] / "cpu.cfs_quota_us").read_text() == "150000" and (v1[0] / "cpu.cfs_period_us").read_text() == "100000"
    assert (v1[1] / "memory.limit_in_bytes").read_text() == str(3 * 1024**3)
    v2 = tmp_path / "unified" / "me" / "lab-classroom" / "ada"
    v2.mkdir(parents=True)
    for folder in (v2.parent.parent, v2.parent):
        (folder / "cgroup.subtree_control").write_text("")
    (v2 / "cpu.max").write_text("max 100000")
    (v2 / "memory.max").write_text("max")
    monkeypatch.setattr(cgroups, "version", lambda root=None: 2)
    cgroups.LearnerGroup((v2,)).create(0.5, 2**30)
    assert (v2 / "cpu.max").read_text() == "50000 100000" and (v2 / "memory.max").read_text() == str(2**30)
    assert (v2.parent / "cgroup.subtree_control").read_text() == "+memory"  # the fake file keeps the last write
    with pytest.raises(ValueError, match="positive"):
        cgroups.LearnerGroup((v2,)).create(0, 2**30)


def test_the_acl_grants_the_group_search_and_keeps_the_owners_bits():
    acl = access.acl_granting_search(0o700, 1234)
    version, *words = struct.unpack("<I" + "HHI" * 5, acl)
    entries = [tuple(words[i:i + 3]) for i in range(0, 15, 3)]
    assert version == 2
    assert entries == [(access.USER_OBJ, 7, access.UNDEFINED), (access.GROUP_OBJ, 0, access.UNDEFINED),
                       (access.GROUP, 1, 1234), (access.MASK, 1, access.UNDEFINED),
                       (access.OTHER, 0, access.UNDEFINED)]


def test_blocked_folders_are_the_ones_others_cannot_search(tmp_path):
    shut = tmp_path / "shut"
    (shut / "venv" / "bin").mkdir(parents=True)
    shut.chmod(0o700)
    try:
        assert shut in access.blocked_folders([shut / "venv" / "bin" / "python"])
        assert shut / "venv" not in access.blocked_folders([shut / "venv" / "bin" / "python"])
    finally:
        shut.chmod(0o755)


def test_the_spawner_joins_the_learners_group_before_it_drops_root(monkeypatch):
    pytest.importorskip("jupyterhub")
    from lab_utils.instructor.classroom import spawner

    calls = []

    class Group:
        def __init__(self, name):
            self.name = name

        @classmethod
        def for_user(cls, name):
            return cls(name)

        def create(self, cpu_limit, mem_limit):
            calls.append(("create", self.name, cpu_limit, mem_limit))

        def join(self):
            calls.append(("join", self.name))

    monkeypatch.setattr(spawner, "LearnerGroup", Group)
    monkeypatch.setattr(spawner.LocalProcessSpawner, "make_preexec_fn",
                        lambda self, name: lambda: calls.append(("setuid", name)))
    preexec = spawner.CgroupSpawner(cpu_limit=1.5, mem_limit="3G").make_preexec_fn("ada")
    assert calls == [("create", "ada", 1.5, 3 * 1024**3)]
    preexec()
    assert calls[1:] == [("join", "ada"), ("setuid", "ada")]
    with pytest.raises(ValueError, match="cpu_limit"):
        spawner.CgroupSpawner().make_preexec_fn("ada")


def test_down_without_a_classroom_removes_nothing(tmp_path):
    assert local.down(tmp_path) == []


# ---- the class, for real -------------------------------------------------------------------------------------------

def _why_not_here() -> str | None:
    if os.geteuid() != 0:
        return "needs root (it creates learner accounts and cgroups)"
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "needs Node and npm for configurable-http-proxy (apt-get install nodejs npm)"
    return local.refusal()


NOTEBOOK_TIMEOUT_S = 600  # one lab in one learner's server; quiet, lab 03 at its test size takes about a minute
RUN_LABS = """
import json, os, subprocess, sys, time
home = os.path.expanduser("~")
os.makedirs(os.path.join(home, "runs"), exist_ok=True)
print(json.dumps({{"cgroup": open("/proc/self/cgroup").read(), "uid": os.getuid()}}))
for notebook, params in {runs!r}:
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "papermill", os.path.join(home, "notebooks", notebook),
                               os.path.join(home, "runs", notebook), "-y", json.dumps(params), "-k", "python3",
                               "--cwd", os.path.join(home, "notebooks"), "--execution-timeout", "400"],
                              capture_output=True, text=True, timeout={timeout})
        rc, said = done.returncode, done.stderr[-2000:]
    except subprocess.TimeoutExpired:
        rc, said = "timeout", f"not finished after {timeout} s; load average {{os.getloadavg()}}"
    print(json.dumps({{"notebook": notebook, "rc": rc, "seconds": round(time.monotonic() - started, 1),
                      "stderr": said}}))
"""


def _notebook_text(path: Path) -> str:
    """Every output an executed notebook shows, as text."""
    out = []
    for cell in json.loads(path.read_text())["cells"]:
        for o in cell.get("outputs", []):
            out.append(o.get("text", "") if isinstance(o.get("text"), str) else "".join(o.get("text", [])))
            out.append("".join(o.get("data", {}).get("text/plain", "")))
            out.append("\n".join(o.get("traceback", [])))
    return "\n".join(out)


def _pam_login(url: str, name: str, password: str) -> str:
    """Log in through the hub's login form (PAM) as a learner would; the page it lands on, or the HTTP error."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    with opener.open(f"{url}/hub/login", timeout=30) as page:
        xsrf = page.read().decode().split('name="_xsrf" value="', 1)[1].split('"', 1)[0]
    form = urllib.parse.urlencode({"username": name, "password": password, "_xsrf": xsrf}).encode()
    try:
        with opener.open(f"{url}/hub/login?next=%2Fhub%2Fhome", data=form, timeout=60) as page:
            return page.url
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"


def _refused(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.slow
@pytest.mark.classroom  # its own step (make test-classroom): two learners' labs under a 1-CPU quota each take minutes
@pytest.mark.timeout(1500)
def test_two_learners_run_labs_00_and_03_at_once_each_under_its_quota_and_down_leaves_nothing(tmp_path):
    why = _why_not_here()
    if why:
        pytest.skip(f"make classroom cannot run here: {why}")
    from lab_utils.instructor.classroom import hub, remote

    state_dir = tmp_path / "classroom"
    started = time.monotonic()
    state = local.up(2, 1.0, "3G", state_dir)
    names = [learner["name"] for learner in state["learners"]]
    runs = [(next((ROOT / "notebooks").glob(f"{lab}_*.ipynb")).name, labs.declared(lab).test_size)
            for lab in ("00", "03")]
    try:
        passwords = dict(line.split() for line in (state_dir / "passwords.txt").read_text().splitlines())
        assert "/hub/home" in _pam_login(state["url"], names[0], passwords[names[0]])
        assert _pam_login(state["url"], names[1], "not-the-password") == "HTTP 403"
        service = hub.Api(state["url"], state["api_token"])
        tokens = {name: service.call("POST", f"/hub/api/users/{name}/tokens",
                                     {"note": "test_classroom", "expires_in": 3600})["token"] for name in names}
        for name in names:
            hub.start_server(hub.Api(state["url"], tokens[name]), name)
        with ThreadPoolExecutor(len(names)) as pool:  # both learners at once
            printed = dict(zip(names, pool.map(
                lambda name: remote.run_code(state["url"], name, tokens[name],
                                             RUN_LABS.format(runs=runs, timeout=NOTEBOOK_TIMEOUT_S),
                                             2 * NOTEBOOK_TIMEOUT_S + 60),
                names)))
        throttling = {}
        for learner in state["learners"]:
            cpu = next(Path(f) for f in learner["cgroups"] if (Path(f) / "cpu.stat").exists())
            throttling[learner["name"]] = dict(line.split() for line in (cpu / "cpu.stat").read_text().splitlines())
        uids = [accounts.pwd.getpwnam(name).pw_uid for name in names]
        texts = {name: {nb: _notebook_text(Path(f"/home/{name}/runs/{nb}")) if Path(f"/home/{name}/runs/{nb}").exists()
                        else "" for nb, _ in runs} for name in names}
    finally:
        gone = local.down(state_dir)
    print(f"classroom up, both learners' labs 00 and 03, down: {time.monotonic() - started:.0f} s")
    # down left nothing behind
    assert len(gone) >= 4
    for name in names:
        assert not accounts.user_exists(name) and not Path(f"/home/{name}").exists()
    # a zombie is only a pid entry waiting for its parent to read its exit status: one orphaned to an init that does not
    # reap (a container's or a micro-VM's first process) is no process left running
    left = {pid: local._cmdline(pid) for uid in uids for pid in local._uid_pids(uid) if local._alive(pid)}
    assert not left, f"processes of the learners still running after down: {left}"
    assert not local._alive(state["hub_pid"])
    assert not accounts.group_exists(local.GROUP)
    for learner in state["learners"]:
        assert not any(Path(f).exists() for f in learner["cgroups"])
        assert not any(Path(f).parent.exists() for f in learner["cgroups"])
    assert all(_refused(state[port]) for port in ("port", "hub_port", "proxy_api_port"))
    for folder, mode in state["granted"]:
        assert os.stat(folder).st_mode & 0o7777 == mode and access.XATTR not in os.listxattr(folder)
    assert not (state_dir / "state.json").exists()
    # what each learner's server ran (the words of lab 00 and lab 03 last: they come with issue 46's items 1 and 3)
    lab00, lab03 = (nb for nb, _ in runs)
    for name in names:
        lines = [json.loads(line) for line in printed[name].splitlines() if line.startswith("{")]
        where = lines[0]
        assert f"/lab-classroom/{name}\n" in where["cgroup"], where["cgroup"]  # the kernel runs in the learner's group
        assert where["uid"] != 0
        ran = {run["notebook"]: run for run in lines[1:]}
        for run in ran.values():
            print(f"{name}: {run['notebook']} in {run['seconds']} s")
        assert int(throttling[name]["nr_periods"]) > 0  # the quota applied to what the learner ran
        assert ran[lab00]["rc"] == 0, f"{name}: {lab00} failed:\n{ran[lab00]['stderr']}"
        assert "CPU cores:" in texts[name][lab00]  # what lab 00 printed before the quota was read
        assert ran[lab03]["rc"] == 0, f"{name}: {lab03} failed:\n{ran[lab03]['stderr']}"
        assert "CPU this notebook may use: 1.0 CPU: cgroup quota" in texts[name][lab00]
        assert "cgroup quota" in texts[name][lab03] or "cpu_limit" in texts[name][lab03]
