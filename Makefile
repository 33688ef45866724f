# The two commands of the README's quick start:
#   make demo   install gpuwatch into .venv and run the agent on the simulated demo fleet
#               (SPEED=60: 60 simulated seconds per real second, the first window in 30 s)
#   make test   install the test dependencies (Python, Debian's prometheus, poppler and Slurm) and run every check
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
LISTEN ?= 127.0.0.1:9842
SPEED ?=

.PHONY: demo test lint typecheck unit bench prometheus report-tools image-tools slurm bindings mutation

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The distribution is gpuwatch-fleet: a `gpuwatch` distribution in .venv (this project's old
# name, or PyPI's unrelated GPU monitor) would shadow the `gpuwatch` package and command, so
# it goes before each install (with the old name's build metadata).
DROP_OLD_NAME = -@$(BIN)/python -m pip uninstall --quiet --yes gpuwatch >/dev/null 2>&1; rm -rf src/gpuwatch.egg-info

demo: $(BIN)/python
	$(DROP_OLD_NAME)
	$(BIN)/python -m pip install --quiet .
	@echo "gpuwatch: metrics at http://$(LISTEN)/metrics (Ctrl-C stops)"
	@echo 'gpuwatch: every GPU shows state "pending" and $$0 idle for the first 30 simulated minutes (the analysis window);'
	@echo '  to see the states now: $(BIN)/gpuwatch status --simulate demo --at 2000 (a few seconds),'
	@echo '  or run the demo faster: make demo SPEED=60 (the window fills in 30 s)'
	$(BIN)/gpuwatch run --simulate demo --listen $(LISTEN)$(if $(SPEED), --speed $(SPEED))

# Debian's prometheus gives both prometheus and promtool, prometheus-alertmanager the
# Alertmanager the alert rules are delivered to, victoria-metrics the single-node
# VictoriaMetrics (the fleet report's tests); tests use the real binaries.
prometheus:
	@command -v promtool >/dev/null && command -v prometheus >/dev/null && command -v prometheus-alertmanager >/dev/null && command -v victoria-metrics >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends prometheus prometheus-alertmanager victoria-metrics >/dev/null; }

# The report's PDF: WeasyPrint (the pdf/test extras) needs Pango; the tests render the PDF
# to PNG with poppler's pdftoppm.
report-tools:
	@command -v pdftoppm >/dev/null && ldconfig -p | grep -q libpangoft2-1.0 && ldconfig -p | grep -q libharfbuzz-subset || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends \
	    poppler-utils libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0 fonts-dejavu-core >/dev/null; }

# The Slurm tests (tests/slurm/) start a real one-node cluster from Debian's packages:
# munged, slurmctld and slurmd, and the clients (sbatch, squeue, scontrol, scancel).
slurm:
	@command -v sbatch >/dev/null && [ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/slurmd ] && [ -x /usr/sbin/munged ] || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null; }

# The container image test (tests/image/) builds the Dockerfile and runs it as root with
# Debian's podman and runc (crun fails on a hybrid cgroup layout), on a Python base that
# debootstrap makes from Debian's packages; rootful with --network=host, so no uidmap,
# slirp4netns or fuse-overlayfs.
image-tools:
	@command -v podman >/dev/null && command -v debootstrap >/dev/null && [ -x /usr/sbin/runc ] || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends podman runc debootstrap >/dev/null; }

# The old nvidia-ml-py releases the binding tests load side by side (wheels of ~40 KB
# from PyPI, kept in .cache/nvidia-ml-py; tests/bindings/fetch.py lists them).
bindings: $(BIN)/python
	$(BIN)/python -m tests.bindings.fetch

test: $(BIN)/python prometheus report-tools image-tools slurm
	$(DROP_OLD_NAME)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -m tests.bindings.fetch
	$(BIN)/ruff check src tests bench dashboards
	$(BIN)/ruff format --check src tests bench dashboards
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m pytest -q -n 2

bench: $(BIN)/python
	$(DROP_OLD_NAME)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	$(BIN)/python bench/run_all.py

# Mutation testing of gpuwatch.nvml and gpuwatch.collectors (slow, not part of `make test`):
# hand-made mutants plus GENERIC drawn operator mutants, JOBS at once (docs/benchmarks.md).
GENERIC ?= 30
JOBS ?= 2
mutation: $(BIN)/python
	$(DROP_OLD_NAME)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -m tests.mutation.harness --generic $(GENERIC) --jobs $(JOBS)
