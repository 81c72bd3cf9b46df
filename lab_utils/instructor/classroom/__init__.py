"""A real JupyterHub classroom on this machine: local learner accounts, each server under its own cgroup CPU quota and
memory limit (`python -m lab_utils classroom up|down`, `make classroom N=2`)."""
