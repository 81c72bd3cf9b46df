"""The hub: its configuration, its start, and its REST API (configurable-http-proxy from npm in front of it)."""
from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

START_TIMEOUT_S = 90.0
PROXY_PACKAGE = "configurable-http-proxy"


def proxy_program(cache: Path) -> Path:
    """configurable-http-proxy, installed from npm into `cache` on first use."""
    program = cache / "node_modules" / ".bin" / PROXY_PACKAGE
    if not program.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError("the hub's proxy needs Node and npm: `apt-get install -y nodejs npm` (as root), then "
                               "run it again")
        cache.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(cache), PROXY_PACKAGE],
                              capture_output=True, text=True, timeout=600)
        if done.returncode or not program.exists():
            raise RuntimeError(f"`npm install {PROXY_PACKAGE}` failed (exit {done.returncode}): "
                               f"{done.stderr.strip()[-2000:]}")
    return program


def config(*, state: Path, venv_bin: Path, proxy: Path, port: int, hub_port: int, proxy_api_port: int,
           learners: list[str], homes: dict[str, str], cpu_limit: float, mem_limit: int, api_token: str) -> str:
    """jupyterhub_config.py: PAM logins for the learners only, each server by CgroupSpawner under its limits, and a
    service `lab-classroom` (the instructor's scripts and tests) holding the admin role."""
    return f"""# written by `python -m lab_utils classroom up`; removed by `classroom down`
c = get_config()  # noqa: F821
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.JupyterHub.db_url = "sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = "{state / 'jupyterhub_cookie_secret'}"
c.JupyterHub.pid_file = "{state / 'jupyterhub.pid'}"
c.ConfigurableHTTPProxy.command = ["{proxy}"]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"
c.ConfigurableHTTPProxy.pid_file = "{state / 'proxy.pid'}"
c.Authenticator.allowed_users = {set(learners)!r}
c.JupyterHub.spawner_class = "lab_utils.instructor.classroom.spawner.CgroupSpawner"
c.Spawner.cpu_limit = {cpu_limit!r}
c.Spawner.mem_limit = {mem_limit!r}
c.Spawner.cmd = ["{venv_bin / 'jupyterhub-singleuser'}"]
c.Spawner.default_url = "/lab/tree/notebooks"
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
# the learner's kernel imports the learner's own copy of lab_utils (in the home), not the instructor's
_homes = {homes!r}
c.Spawner.environment = {{"PYTHONPATH": lambda spawner: _homes[spawner.user.name]}}
c.JupyterHub.services = [{{"name": "lab-classroom", "api_token": "{api_token}"}}]
c.JupyterHub.load_roles = [{{"name": "admin", "services": ["lab-classroom"]}}]
"""


class Api:
    """The hub's REST API with one token (the service's, or a learner's)."""

    def __init__(self, base: str, token: str):
        self.base, self.token = base.rstrip("/"), token

    def call(self, method: str, path: str, body: dict | None = None, timeout: float = 30.0):
        """The JSON answer (None when empty); an HTTP error raises RuntimeError with the hub's message."""
        request = urllib.request.Request(self.base + path, method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Authorization": f"token {self.token}",
                                                  "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                text = answer.read()
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"{method} {path}: HTTP {exc.code}: {exc.read().decode(errors='replace')[:500]}") from None
        return json.loads(text) if text else None


def wait_until_up(base: str, hub: subprocess.Popen, log: Path, timeout: float = START_TIMEOUT_S) -> None:
    """Until the hub answers through its proxy; its log's end when it exits or times out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if hub.poll() is not None:
            break
        try:
            with urllib.request.urlopen(base + "/hub/api/", timeout=5) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:]) if log.exists() else "(no log)"
    state = f"exited with {hub.returncode}" if hub.poll() is not None else f"did not answer within {timeout:.0f} s"
    raise RuntimeError(f"the hub {state}; its log {log} ends with:\n{tail}")


def start_server(api: Api, name: str, timeout: float = 180.0) -> None:
    """Start the learner's server and wait until the hub says it is ready."""
    api.call("POST", f"/hub/api/users/{name}/server")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        server = (api.call("GET", f"/hub/api/users/{name}") or {}).get("servers", {}).get("", {})
        if server.get("ready"):
            return
        time.sleep(1)
    raise RuntimeError(f"{name}'s server was not ready after {timeout:.0f} s (see the hub's log)")
