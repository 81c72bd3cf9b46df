"""`python -m lab_utils classroom up|down`: a real JupyterHub on this machine for N local learner accounts.

`up` (root) makes a group `lab-class` and accounts learner1..N, copies the course into each home, installs
configurable-http-proxy from npm (once, into build/classroom-proxy), writes the hub's configuration and starts it; each
learner's server runs as the learner, in a cgroup with the CPU quota `cpu_limit` and the memory limit `mem_limit`
(spawner.py). Everything it creates is recorded in a state file (build/classroom/state.json) as it is created, and
`down` removes exactly that: the hub, the proxy and every learner's process, the cgroups, the accounts, their homes and
the group. A failed `up` takes down what it made.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

from ...launch import free_port
from . import access, accounts, cgroups, hub

REPO = Path(__file__).resolve().parents[3]
DEFAULT_STATE = REPO / "build" / "classroom"
PROXY_CACHE = REPO / "build" / "classroom-proxy"
GROUP = "lab-class"
PREFIX = "learner"
STOP_TIMEOUT_S = 15.0


def parse_bytes(text: str) -> int:
    """'3G', '512M', '1073741824' -> bytes (powers of 1024, as JupyterHub's mem_limit)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*", str(text), re.IGNORECASE)
    if not match:
        raise ValueError(f"mem_limit {text!r}: expected bytes or a number with K, M, G or T, e.g. 3G")
    return int(float(match[1]) * 1024 ** "_KMGT".index(match[2].upper() or "_"))


def refusal(euid: int | None = None) -> str | None:
    """Why `up` cannot run here, in one sentence (None when it can)."""
    if (os.geteuid() if euid is None else euid) != 0:
        return ("make classroom needs root: it creates learner accounts and cgroups and starts each learner's server "
                "as that learner (`sudo make classroom N=2`)")
    missing = accounts.missing_programs()
    if missing:
        return f"make classroom needs {', '.join(missing)} (Debian's passwd and util-linux packages)"
    if not any(Path(d, "npm").exists() for d in os.environ.get("PATH", "").split(os.pathsep)):
        return "make classroom needs Node and npm for the hub's proxy: `apt-get install -y nodejs npm` (as root)"
    return cgroups.controller_refusal()


def _save(state_file: Path, state: dict) -> None:
    state_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1))
    tmp.replace(state_file)


def learner_names(n: int, prefix: str = PREFIX) -> list[str]:
    if n < 1:
        raise ValueError(f"N={n}: a classroom needs at least one learner")
    return [f"{prefix}{i}" for i in range(1, n + 1)]


def up(n: int, cpu_limit: float, mem_limit: str, state_dir: Path = DEFAULT_STATE, home_base: Path = Path("/home"),
       start_servers: bool = False) -> dict:
    """Bring the classroom up; the state it recorded (url, learners, ports, the service's API token)."""
    why = refusal()
    if why:
        raise RuntimeError(why)
    if cpu_limit <= 0:
        raise ValueError(f"cpu_limit {cpu_limit}: must be positive (1 = one CPU of time per learner)")
    mem_bytes = parse_bytes(mem_limit)
    state_file = state_dir / "state.json"
    if state_file.exists():
        raise RuntimeError(f"a classroom is already up (state in {state_file}): `make classroom-down` first")
    names = learner_names(n)
    taken = [name for name in names if accounts.user_exists(name)]
    if taken or accounts.group_exists(GROUP):
        raise RuntimeError(f"account(s) {', '.join(taken) or GROUP + ' (group)'} exist already and were not made by "
                           "`classroom up`: remove them or choose another machine")
    venv_bin = Path(sys.executable).parent
    state: dict = {"state_dir": str(state_dir), "group": None, "learners": [], "hub_pid": None, "granted": [],
                   "cpu_limit": cpu_limit, "mem_limit": mem_bytes}
    _save(state_file, state)
    try:
        proxy = hub.proxy_program(PROXY_CACHE)
        accounts.create_group(GROUP)
        state["group"] = GROUP
        _save(state_file, state)
        for folder in access.blocked_folders(access.interpreter_paths()):
            mode = access.grant_search(folder, accounts.grp.getgrnam(GROUP).gr_gid)
            state["granted"].append([str(folder), mode])
            _save(state_file, state)
        passwords = {}
        for name in names:
            home = home_base / name
            learner = {"name": name, "home": str(home), "cgroups": []}
            state["learners"].append(learner)
            _save(state_file, state)
            passwords[name] = accounts.create_learner(name, GROUP, home)
            learner["cgroups"] = [str(f) for f in cgroups.LearnerGroup.for_user(name).folders]
            cgroups.LearnerGroup.for_user(name).create(cpu_limit, mem_bytes)
            _save(state_file, state)
            accounts.copy_course(REPO, home, name, GROUP)
        problem = accounts.can_run(names[0], sys.executable)
        if problem:
            raise RuntimeError(f"learner {names[0]} cannot run the course's Python {sys.executable} ({problem}): "
                               "every folder above the venv must be readable and searchable by others (chmod o+rx), "
                               "or move the venv to a folder they can reach, e.g. under /opt")
        pw_file = state_dir / "passwords.txt"
        pw_file.touch(mode=0o600)
        pw_file.write_text("".join(f"{name} {pw}\n" for name, pw in passwords.items()))
        ports = {"port": free_port(), "hub_port": free_port(), "proxy_api_port": free_port()}
        token = secrets.token_hex(32)
        config = state_dir / "jupyterhub_config.py"
        config.write_text(hub.config(state=state_dir, venv_bin=venv_bin, proxy=proxy, learners=names,
                                     homes={name: str(home_base / name) for name in names}, cpu_limit=cpu_limit,
                                     mem_limit=mem_bytes, api_token=token, **ports))
        config.chmod(0o600)
        state.update(ports, url=f"http://127.0.0.1:{ports['port']}", api_token=token, config=str(config))
        log = state_dir / "jupyterhub.log"
        with log.open("ab") as out:
            process = subprocess.Popen([str(venv_bin / "jupyterhub"), "-f", str(config)], cwd=state_dir,
                                       stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                                       env={**os.environ, "PYTHONPATH": str(REPO)})
        state["hub_pid"] = process.pid
        _save(state_file, state)
        hub.wait_until_up(state["url"], process, log)
        if start_servers:
            api = hub.Api(state["url"], token)
            for name in names:
                hub.start_server(api, name)
    except BaseException:
        down(state_dir)
        raise
    return state


def _cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    return ""


def _uid_pids(uid: int) -> set[int]:
    """Every process whose real uid is `uid`."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                status = (entry / "status").read_text()
                if int(status.split("\nUid:")[1].split()[0]) == uid:
                    found.add(int(entry.name))
    return found


def _stop(pids_now, timeout: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM the processes `pids_now()` names, then SIGKILL what remains, until none is left."""
    deadline, sig = time.monotonic() + timeout, signal.SIGTERM
    while pids := pids_now() - {os.getpid()}:
        if time.monotonic() > deadline:
            if sig == signal.SIGKILL:
                raise RuntimeError(f"processes {sorted(pids)} survived SIGKILL")
            sig, deadline = signal.SIGKILL, time.monotonic() + 5
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        time.sleep(0.2)


def _alive(pid: int) -> bool:
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return False


def down(state_dir: Path = DEFAULT_STATE) -> list[str]:
    """Remove exactly what `up` recorded; what was removed, one line each."""
    state_file = state_dir / "state.json"
    if not state_file.exists():
        return []
    state = json.loads(state_file.read_text())
    done = []
    config = state.get("config") or "jupyterhub_config.py"
    hub_pid = state.get("hub_pid")
    if hub_pid and config in _cmdline(hub_pid):
        _stop(lambda: {hub_pid} if _alive(hub_pid) else set())  # the hub stops the servers and its proxy
        done.append(f"stopped the hub (pid {hub_pid})")
    proxy_api = f":{state.get('proxy_api_port')}"
    with contextlib.suppress(OSError, ValueError):
        proxy_pid = int((state_dir / "proxy.pid").read_text().split()[0])
        if "configurable-http-proxy" in _cmdline(proxy_pid) and proxy_api in _cmdline(proxy_pid):
            _stop(lambda: {proxy_pid} if _alive(proxy_pid) else set())
            done.append(f"stopped the proxy (pid {proxy_pid})")
    for learner in state.get("learners", []):
        group = cgroups.LearnerGroup(tuple(Path(f) for f in learner["cgroups"]))
        uid = None
        with contextlib.suppress(KeyError):
            uid = accounts.pwd.getpwnam(learner["name"]).pw_uid
        _stop(lambda: {p for p in group.pids() | (_uid_pids(uid) if uid is not None else set()) if _alive(p)})
        group.remove()
        accounts.delete_learner(learner["name"], Path(learner["home"]))
        done.append(f"removed {learner['name']}: processes, cgroup, account, home {learner['home']}")
    cgroups.remove_parents(f for learner in state.get("learners", []) for f in learner["cgroups"])
    for folder, mode in state.get("granted", []):
        access.revoke(Path(folder), mode)
        done.append(f"removed the group's search permission on {folder} (mode {mode:o} again)")
    if state.get("group"):
        accounts.delete_group(state["group"])
        done.append(f"removed the group {state['group']}")
    for name in ("jupyterhub_config.py", "jupyterhub.sqlite", "jupyterhub_cookie_secret", "jupyterhub.pid",
                 "proxy.pid", "passwords.txt", "state.json"):
        with contextlib.suppress(FileNotFoundError):
            (state_dir / name).unlink()
    return done


def main(action: str, learners: int, cpu_limit: float, mem_limit: str, state_dir=None) -> int:
    folder = Path(state_dir).resolve() if state_dir else DEFAULT_STATE
    if action == "down":
        for line in down(folder) or ["no classroom is up (no state file in " + str(folder) + ")"]:
            print(line)
        return 0
    state = up(learners, cpu_limit, mem_limit, folder)
    names = ", ".join(learner["name"] for learner in state["learners"])
    print(f"JupyterHub is up at {state['url']} for {names}: each learner's server under a CPU quota of "
          f"{cpu_limit:g} CPU and a memory limit of {mem_limit} (cgroup v{cgroups.version()})")
    for granted, _ in state["granted"]:
        print(f"the group {GROUP} may pass through {granted} (search only, an ACL entry) to reach the course's Python")
    print(f"passwords: {folder / 'passwords.txt'} (root only); the hub's log: {folder / 'jupyterhub.log'}")
    print("`make classroom-down` stops it and removes the accounts, their homes, the group and the cgroups")
    return 0
