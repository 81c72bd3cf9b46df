"""The local Slurm cluster's lifecycle: up, status, up twice, down — for real where this runs as root with slurm-wlm
and munge installed (CI), skipped with the reason elsewhere; the refusal without root, simulated, everywhere."""
import os
import subprocess
import time

import pytest

from lab_utils.instructor.cluster import local

REASON = local.refusal()


def test_refuses_without_root_in_one_sentence_saying_what_to_do():
    text = local.refusal(euid=1000, which=lambda *a, **k: "/usr/bin/x")
    assert "needs root" in text and "sudo make cluster" in text and "real Slurm cluster" in text and text.count(". ") == 0
    text = local.refusal(euid=0, which=lambda *a, **k: None)
    assert "apt-get install -y slurm-wlm munge" in text and "munge" in text and "slurm-wlm" in text
    assert local.refusal(euid=0, which=lambda *a, **k: "/usr/sbin/x") is None


def test_cli_refuses_with_exit_2_when_it_cannot_run(monkeypatch, capsys):
    monkeypatch.setattr(local, "refusal", lambda: "make cluster needs root (simulated)")
    from lab_utils.instructor import cli

    assert cli.main(["cluster", "up", "--state-dir", "/nonexistent/x"]) == 2
    assert "cluster up: make cluster needs root (simulated)" in capsys.readouterr().out


def test_the_configuration_splits_the_cores_and_declares_memory(tmp_path):
    lay = local.Layout(tmp_path, 3, 2048)
    conf = local.slurm_conf(lay, "host", 7000, [7001, 7002, 7003])
    assert "NodeName=node1 NodeHostname=host NodeAddr=127.0.0.1 Port=7001 CPUs=3 RealMemory=2048" in conf
    assert "NodeName=node2 NodeHostname=host NodeAddr=127.0.0.1 Port=7002 CPUs=3 RealMemory=2048" in conf
    assert f"NodeName=node3 NodeHostname=host NodeAddr=127.0.0.1 Port=7003 CPUs=1 RealMemory={local.SHORT_MEMORY_MB}" in conf
    assert "PartitionName=lab Nodes=node1,node2 Default=YES" in conf and "PartitionName=short Nodes=node3 MaxTime=1" in conf
    assert f"AuthInfo=socket={tmp_path}/munge/munge.socket" in conf and "SlurmctldPort=7000" in conf
    assert f"StateSaveLocation={tmp_path}/ctld" in conf and "/etc/" not in conf
    assert "AccountingStorageType=accounting_storage/none" in conf and "JobAcctGatherParams=OverMemoryKill" in conf
    with_db = local.slurm_conf(lay, "host", 7000, [7001, 7002, 7003], dbd_port=7004)
    assert "AccountingStorageType=accounting_storage/slurmdbd" in with_db and "AccountingStoragePort=7004" in with_db
    assert f"AccountingStoragePass={tmp_path}/munge/munge.socket" in with_db


def test_accounting_files_stay_in_the_state_folder_and_listen_on_loopback(tmp_path):
    from lab_utils.instructor.cluster import database

    db = database.Database(tmp_path)
    conf = database.dbd_conf(db, "host", 7005, 7006, tmp_path / "munge" / "munge.socket")
    assert "DbdAddr=127.0.0.1" in conf and "StorageHost=127.0.0.1" in conf and "StoragePort=7006" in conf
    assert f"StoragePass={database.password(db)}" in conf and (db.password_file.stat().st_mode & 0o077) == 0
    command = database.mariadbd_command(db, 7006)
    assert "--bind-address=127.0.0.1" in command and f"--datadir={db.datadir}" in command
    assert all(str(tmp_path) in a for a in command if a.startswith(("--datadir", "--socket", "--pid-file", "--log-error")))


def test_without_mariadb_and_slurmdbd_the_cluster_says_it_has_no_accounting(monkeypatch):
    from lab_utils.instructor.cluster import database

    monkeypatch.setattr(database, "program", lambda name: None)
    text = local.accounting_refusal()
    assert text.startswith("no accounting") and "apt-get install -y mariadb-server slurmdbd" in text and "sacct" in text


def _processes_of(state) -> set[int]:
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = open(f"/proc/{entry}/cmdline", "rb").read().decode(errors="replace")
                cmd += open(f"/proc/{entry}/environ", "rb").read().decode(errors="replace")  # slurmdbd: SLURM_CONF
            except OSError:
                continue
            if str(state) in cmd:
                pids.add(int(entry))
    return pids


@pytest.mark.skipif(REASON is not None, reason=f"needs root and slurm-wlm/munge: {REASON}")
def test_status_prints_the_line_to_paste_in_a_terminal(tmp_path, monkeypatch):
    # lab 11 cell 2 promises it (learner B: status printed the daemons and sinfo, no export line)
    monkeypatch.setattr(local, "daemons", lambda lay: {"slurmctld": 11, "node1": 12})
    monkeypatch.setattr(local, "node_states", lambda lay: {"node1": "idle"})
    said = []
    local.status(tmp_path, say=said.append)
    assert said[-1].endswith(f"paste: export SLURM_CONF={local.layout(tmp_path).conf}")
    assert "sinfo: node1 idle" in said


@pytest.mark.skipif(REASON is not None, reason=f"needs root and slurm-wlm/munge: {REASON}")
def test_up_status_up_again_down(tmp_path):
    state = tmp_path / "c"  # a second cluster of its own: the course's cluster (if up) must stay untouched
    other = local.daemons(local.layout())
    said = []
    try:
        local.up(state, say=said.append)
        running = local.daemons(local.layout(state))
        assert all(running.values()), running
        assert any("started a Slurm cluster" in line for line in said)
        assert local.node_states(local.layout(state)) == {"node1": "idle", "node2": "idle", "node3": "idle"}
        assert local.status(state, say=said.append)
        env = local.client_env(local.layout(state))
        out = subprocess.run(["srun", "-N2", "-n2", "--time=1", "printenv", "SLURMD_NODENAME"], capture_output=True,
                             text=True, env=env, timeout=60)
        assert sorted(out.stdout.split()) == ["node1", "node2"], out.stderr
        if local.accounting_refusal() is None:  # the step is in the database: sacct reads it back
            for _ in range(50):
                done = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "JobName,State"], capture_output=True,
                                      text=True, env=env, timeout=30)
                if "printenv|COMPLETED" in done.stdout:
                    break
                time.sleep(0.2)
            assert "printenv|COMPLETED" in done.stdout, done.stdout + done.stderr
        local.up(state, say=said.append)  # twice: harmless, the same processes
        assert "already runs" in said[-1] and local.daemons(local.layout(state)) == running
    finally:
        stopped = local.down(state, say=said.append)
    assert len(stopped) == len(local.NODES) + 2 + 2 * (local.accounting_refusal() is None)  # + db, slurmdbd
    assert not any(local.daemons(local.layout(state)).values())
    assert _processes_of(state) == set(), "a process of the stopped cluster is still running"
    assert not local.status(state, say=said.append) and "no cluster" in said[-1]
    assert local.daemons(local.layout()) == other, "down stopped something that was not its own"
    assert local.down(state, say=said.append) == [] and "nothing to stop" in said[-1]


def test_a_daemon_whose_port_was_taken_is_named_so_up_can_choose_new_ports(tmp_path, monkeypatch):
    """make test saw slurmctld die with 'Address already in use' (free_port raced another program): up retries."""
    lay = local.layout(tmp_path)
    (lay.root / "log").mkdir(parents=True)
    lay.log_file("slurmctld").write_text("[t] error: Error binding slurm stream socket: Address already in use\n"
                                         "[t] fatal: slurm_init_msg_engine_port error Address already in use\n")
    lay.log_file("node1").write_text("[t] slurmd started\n")
    monkeypatch.setattr(local, "daemons", lambda lay: {"munged": 1, "slurmctld": None, "node1": None})
    assert local._port_taken(lay) == "slurmctld"
    monkeypatch.setattr(local, "daemons", lambda lay: {"munged": 1, "slurmctld": 2, "node1": None})
    assert local._port_taken(lay) is None  # a running daemon's old log line is no cause; node1 died of another


def test_up_retries_with_new_ports_when_a_port_was_taken(tmp_path, monkeypatch):
    tries = []
    def fake_up(lay, timeout, say, accounting):
        tries.append(1)
        if len(tries) < 2:
            raise local.PortTaken("slurmctld stopped: another program took its port")
        return lay
    monkeypatch.setattr(local, "refusal", lambda: None)
    monkeypatch.setattr(local, "daemons", lambda lay: {"slurmctld": None})
    monkeypatch.setattr(local, "_up", fake_up)
    monkeypatch.setattr(local, "down", lambda path=None, say=print: [])
    assert local.up(tmp_path, say=lambda *_: None).root == local.layout(tmp_path).root and len(tries) == 2


def test_cluster_conf_prints_only_the_path_for_a_shell_and_refuses_without_a_cluster(tmp_path, capsys):
    assert local.main("conf", tmp_path) == 3
    out = capsys.readouterr()
    assert out.out == "" and "make cluster" in out.err  # nothing for $(...) to put in SLURM_CONF
    local.layout(tmp_path).conf.write_text("ClusterName=lab\n")
    assert local.main("conf", tmp_path) == 0
    assert capsys.readouterr().out == f"{local.layout(tmp_path).conf}\n"
