"""The local Slurm cluster's lifecycle: up, status, up twice, down — for real where this runs as root with slurm-wlm
and munge installed (CI), skipped with the reason elsewhere; the refusal without root, simulated, everywhere."""
import os
import shutil
import subprocess

import pytest

from lab_utils.instructor import cluster

REASON = cluster.refusal()


def test_refuses_without_root_in_one_sentence_saying_what_to_do():
    text = cluster.refusal(euid=1000, which=lambda *a, **k: "/usr/bin/x")
    assert "needs root" in text and "sudo make cluster" in text and "real Slurm cluster" in text and text.count(". ") == 0
    text = cluster.refusal(euid=0, which=lambda *a, **k: None)
    assert "apt-get install -y slurm-wlm munge" in text and "munge" in text and "slurm-wlm" in text
    assert cluster.refusal(euid=0, which=lambda *a, **k: "/usr/sbin/x") is None


def test_cli_refuses_with_exit_2_when_it_cannot_run(monkeypatch, capsys):
    monkeypatch.setattr(cluster, "refusal", lambda: "make cluster needs root (simulated)")
    from lab_utils.instructor import cli

    assert cli.main(["cluster", "up", "--state-dir", "/nonexistent/x"]) == 2
    assert "cluster up: make cluster needs root (simulated)" in capsys.readouterr().out


def test_the_configuration_splits_the_cores_and_declares_memory(tmp_path):
    lay = cluster.Layout(tmp_path, 3, 2048)
    conf = cluster.slurm_conf(lay, "host", 7000, [7001, 7002])
    assert "NodeName=node1 NodeHostname=host NodeAddr=127.0.0.1 Port=7001 CPUs=3 RealMemory=2048" in conf
    assert "NodeName=node2 NodeHostname=host NodeAddr=127.0.0.1 Port=7002 CPUs=3 RealMemory=2048" in conf
    assert f"AuthInfo=socket={tmp_path}/munge/munge.socket" in conf and "SlurmctldPort=7000" in conf
    assert f"StateSaveLocation={tmp_path}/ctld" in conf and "/etc/" not in conf


def _processes_of(state) -> set[int]:
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = open(f"/proc/{entry}/cmdline", "rb").read().decode(errors="replace")
            except OSError:
                continue
            if str(state) in cmd:
                pids.add(int(entry))
    return pids


@pytest.mark.skipif(REASON is not None, reason=f"needs root and slurm-wlm/munge: {REASON}")
def test_up_status_up_again_down(tmp_path):
    state = tmp_path / "c"  # a second cluster of its own: the course's cluster (if up) must stay untouched
    other = cluster.daemons(cluster.layout())
    said = []
    try:
        cluster.up(state, say=said.append)
        running = cluster.daemons(cluster.layout(state))
        assert all(running.values()), running
        assert "started a Slurm cluster" in said[0]
        assert cluster.node_states(cluster.layout(state)) == {"node1": "idle", "node2": "idle"}
        assert cluster.status(state, say=said.append)
        env = cluster.client_env(cluster.layout(state))
        out = subprocess.run(["srun", "-N2", "-n2", "--time=1", "printenv", "SLURMD_NODENAME"], capture_output=True,
                             text=True, env=env, timeout=60)
        assert sorted(out.stdout.split()) == ["node1", "node2"], out.stderr
        cluster.up(state, say=said.append)  # twice: harmless, the same processes
        assert "already runs" in said[-1] and cluster.daemons(cluster.layout(state)) == running
    finally:
        stopped = cluster.down(state, say=said.append)
    assert len(stopped) == 4
    assert not any(cluster.daemons(cluster.layout(state)).values())
    assert _processes_of(state) == set(), "a process of the stopped cluster is still running"
    assert not cluster.status(state, say=said.append) and "no cluster" in said[-1]
    assert cluster.daemons(cluster.layout()) == other, "down stopped something that was not its own"
    assert cluster.down(state, say=said.append) == [] and "nothing to stop" in said[-1]
