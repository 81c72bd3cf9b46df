"""JupyterHub's LocalProcessSpawner with its cpu_limit and mem_limit enforced: each learner's server starts inside a
cgroup of its own (cgroups.py). JupyterHub's spawners export CPU_LIMIT and MEM_LIMIT; this one also makes them true.

Used by the hub that `python -m lab_utils classroom up` writes the configuration of (no systemd here, so no
SystemdSpawner; no container runtime, so no DockerSpawner).
"""
from __future__ import annotations

from jupyterhub.spawner import LocalProcessSpawner

from .cgroups import LearnerGroup


class CgroupSpawner(LocalProcessSpawner):
    """A local process per learner, as the learner's own account, in the learner's cgroup."""

    def make_preexec_fn(self, name):
        """Join the learner's group (as root, before exec, so every process it starts is inside), then drop to the
        learner's uid as LocalProcessSpawner does."""
        if not self.cpu_limit or not self.mem_limit:
            raise ValueError("CgroupSpawner needs c.Spawner.cpu_limit and c.Spawner.mem_limit")
        group = LearnerGroup.for_user(name)
        group.create(float(self.cpu_limit), int(self.mem_limit))
        set_user = super().make_preexec_fn(name)

        def preexec() -> None:
            group.join()
            set_user()

        return preexec
