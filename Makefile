# CNN Parallelism Lab: `make course` runs every lab headless, `make test` runs the tests.
# Both create .venv on first use. LAB_TARGET=cpu|gpu overrides the GPU detection (default: gpu when nvidia-smi sees one).
# TORCH_INDEX passes extra pip options for torch, e.g. TORCH_INDEX="--index-url https://download.pytorch.org/whl/cpu".
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
LAB_TARGET ?= $(shell nvidia-smi -L >/dev/null 2>&1 && echo gpu || echo cpu)
TORCH_INDEX ?=
STAMP := $(VENV)/.installed-$(LAB_TARGET)
PIP_QUIET := 2>&1 | { grep -v -e 'is ignored: it is neither a file nor a directory' || true; }
LABS ?=
N ?= 2
CPU_LIMIT ?= 1
MEM_LIMIT ?= 3G
QUICK ?=
# extra pytest options for make test, e.g. PYTEST_ARGS=--durations=0 (each test's time, to see where the 10 minutes go)
PYTEST_ARGS ?=
# pytest-xdist workers for make test; each test file (or notebook) stays on one worker. Four even on two cores: the
# tests spend much of their time starting processes and waiting on planned timeouts and on Slurm
TEST_WORKERS ?= 4
.DEFAULT_GOAL := env
# Python caches compiled modules (and pytest its rewritten tests) in __pycache__/: without it every process the labs and
# tests start compiles lab_utils again (some images set PYTHONDONTWRITEBYTECODE=1)
unexport PYTHONDONTWRITEBYTECODE

.PHONY: help env course test test-fast test-classroom test-browser lab assign outputs bench info gpu-check cluster cluster-down classroom classroom-down clean

help:  ## this list of targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## /\1\t/' | \
		while IFS=$$'\t' read -r target text; do printf '  make %-14s %s\n' "$$target" "$$text"; done

env: $(STAMP)

$(STAMP): pyproject.toml
	@echo "setting up $(VENV) for $(LAB_TARGET) (torch 2.13.0, tensorflow 2.21.0) ..."
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet $(TORCH_INDEX) torch==2.13.0 $(PIP_QUIET)
	$(PY) -m pip install --quiet -e ".[$(LAB_TARGET),dev]" $(PIP_QUIET)
	rm -f $(VENV)/.installed-*
	touch $@

course: env  ## execute every lab headless into build/course/ and print the summary
	$(PY) -m lab_utils course --out build/course $(if $(LABS),--labs $(LABS))

test: env  ## the type check, unit tests, the student-notebook drift check, and nbval on solutions/ (TEST_WORKERS=1: one at a time)
	@mkdir -p build; $(PY) -m mypy > build/mypy.log 2>&1 & mypy_pid=$$!; \
	LAB_RESULTS_DIR=$(CURDIR)/build/test-results $(PY) -m pytest solutions tests --nbval --nbval-current-env \
		--nbval-sanitize-with tests/nbval_sanitize.cfg --nbval-cell-timeout 300 -p no:cacheprovider -q -m "not classroom" \
		$(if $(filter-out 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile) $(PYTEST_ARGS) && tests_rc=0 || tests_rc=$$?; \
	wait $$mypy_pid && mypy_rc=0 || mypy_rc=$$?; \
	echo "type check (mypy, run beside the tests):"; cat build/mypy.log; \
	exit $$(( tests_rc || mypy_rc ))

test-fast: env  ## the inner loop (a few minutes): the type check, unit tests, assign --check and the judges; no notebook, no test marked slow
	$(PY) -m mypy
	LAB_RESULTS_DIR=$(CURDIR)/build/test-results $(PY) -m pytest tests -m "not slow" -p no:cacheprovider -q \
		$(if $(filter-out 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile)

test-classroom: env  ## as root: a JupyterHub class of 2 learners up, labs 00 and 03 in both servers at once under a 1-CPU quota each, then down (minutes)
	$(PY) -m pytest tests/test_classroom.py -m classroom -p no:cacheprovider -q

test-browser: env  ## JupyterLab in headless Chromium: lab 04's explorer and lab 01's progress bar, as a learner sees them
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
		echo "make test-browser needs headless Chromium and its driver: apt-get install chromium chromium-driver (Debian)"; exit 2; }
	$(PY) -m pytest tests/browser_lab.py -p no:cacheprovider -q

lab: env  ## JupyterLab on the course with the venv's kernel
	@# the kernels start with lab_utils' allocator settings (lab_utils.allocator.ENV): in force from their first allocation
	env $$($(PY) -c 'from lab_utils import allocator; print(" ".join(f"{k}={v}" for k, v in allocator.ENV.items()))') \
	$(VENV)/bin/jupyter lab --notebook-dir=$(CURDIR) $(if $(filter 0,$(shell id -u)),--allow-root)

assign: env  ## regenerate notebooks/ from solutions/
	$(PY) -m lab_utils assign

outputs: env  ## re-execute solutions/ in place as one run in course order, write the measured run times, regenerate notebooks/
	$(PY) -m lab_utils outputs $(if $(LABS),--labs $(LABS))

bench: env  ## every benchmark the labs declare, in lab order, each in a process of its own; the last line of each is JSON (cluster: after make cluster)
	names=$$($(PY) -m lab_utils bench --list); for name in $$names; do $(PY) -m lab_utils bench $$name; done

info: env  ## this machine's hardware and the rank plan for 1, 2, 4 ranks
	$(PY) -m lab_utils info

cluster: env  ## a real Slurm cluster on this machine for lab 11 (root; Debian's slurm-wlm and munge; accounting with mariadb-server and slurmdbd)
	$(PY) -m lab_utils cluster up

cluster-down: env  ## stop exactly what `make cluster` started, its accounting database included
	$(PY) -m lab_utils cluster down

classroom: env  ## a real JupyterHub here for N learner accounts (N=2 CPU_LIMIT=1 MEM_LIMIT=3G), each server in its own cgroup (root; Node and npm)
	$(PY) -c "import jupyterhub" 2>/dev/null || $(PY) -m pip install --quiet -e ".[classroom]" $(PIP_QUIET)
	$(PY) -m lab_utils classroom up --learners $(N) --cpu-limit $(CPU_LIMIT) --mem-limit $(MEM_LIMIT)

classroom-down: env  ## stop exactly what `make classroom` started and remove its accounts, homes, group and cgroups
	$(PY) -m lab_utils classroom down

gpu-check: env  ## every GPU branch of the course against its CPU result (QUICK=1: labs 01, 03, 05, 09); skipped without a GPU
	$(PY) -m lab_utils gpu-check $(if $(filter-out 0,$(QUICK)),--quick)

clean:  ## remove build/ and results/
	rm -rf build results
