# Two entry points on a fresh machine: `make demo` (the main job on the local scheduler) and
# `make test` (the whole test suite, with every service it needs installed and started by our scripts).
# `make docs` builds the documentation site (docs/, mkdocs.yml).
PYTHON ?= python3
UV_VERSION := 0.13.8
TORCH_VERSION := 2.13.0
TORCH_WHEELS ?= /opt/wheels
TOOLS := .tools
UV := $(TOOLS)/bin/uv
VENV := .venv
PY := $(VENV)/bin/python
VENV_STAMP := $(VENV)/.synced
PYTEST_ARGS ?=

.PHONY: venv demo test test-fast matrix services-install lint typecheck venv-exists bench mutation clean \
	kfp-launcher-image docs extras-smoke

$(UV):
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install -q "uv==$(UV_VERSION)"

# The locked environment (all extras + dev tools). torch is not in the lock: the CPU build comes
# from the machine's wheel folder (PyPI's default torch is the multi-GB CUDA build).
# `make venv` (and every target needing the venv) syncs and byte-compiles only when
# `.venv/.synced` is missing or older than the lock, the project metadata or this file: when
# nothing changed it does nothing (`make -B venv` forces a sync).
venv: $(VENV_STAMP)

$(VENV_STAMP): uv.lock pyproject.toml Makefile | $(UV)
	UV_PYTHON_DOWNLOADS=never $(UV) sync --frozen --inexact --extra dev --python $(PYTHON) --compile-bytecode
	@# bytecode for our own (editable) sources too: CI sets PYTHONDONTWRITEBYTECODE, and every
	@# subprocess of the tests would otherwise recompile them
	@$(PY) -m compileall -q -j 0 torchx_core torchx_airflow torchx_kfp torchx_prefect examples >/dev/null
	@$(PY) -c "import torch" 2>/dev/null || { \
	  ls $(TORCH_WHEELS)/torch-$(TORCH_VERSION)+cpu-*.whl >/dev/null 2>&1 || \
	    { echo "no CPU torch $(TORCH_VERSION) wheel in $(TORCH_WHEELS) (PyPI's torch is the multi-GB CUDA build); set TORCH_WHEELS" >&2; exit 1; }; \
	  $(UV) pip install --python $(PY) --find-links $(TORCH_WHEELS) "torch==$(TORCH_VERSION)+cpu"; }
	@touch $(VENV_STAMP)

demo: venv
	$(PY) -m examples.main_job

services-install:
	bash scripts/services/install-all.sh

# the suite in the locked venv, each extra alone from the wheel, then the version matrix (all
# run; any failing fails `make test`)
test: venv services-install
	@rc=0; $(PY) -m pytest $(PYTEST_ARGS) || rc=1; \
	  UV=$(UV) $(PY) scripts/extras_smoke.py || rc=1; \
	  UV=$(UV) $(PY) scripts/matrix/run.py || rc=1; exit $$rc

# Each extra alone: the built wheel (metadata checked) with one extra in a fresh venv (plain pip),
# then that extra's smoke use (scripts/extras_smoke.py). EXTRAS=dashboard picks extras.
EXTRAS ?=
extras-smoke: $(UV)
	UV=$(UV) $(PYTHON) scripts/extras_smoke.py $(EXTRAS)

# The version matrix (scripts/matrix/cells.py): every supported engine release and Python, each in
# a venv built from the wheel the way a user installs (not our lock). MATRIX_CELLS=kfp picks cells.
MATRIX_CELLS ?=
matrix: $(UV)
	UV=$(UV) $(PYTHON) scripts/matrix/run.py $(MATRIX_CELLS)

test-fast: $(VENV_STAMP)
	$(PY) -m pytest -m "not integration" $(PYTEST_ARGS)

# The gates (CONTRIBUTING.md): run in the venv as it is, never re-syncing it (`make venv` does that).
LINT_PATHS := torchx_core torchx_airflow torchx_kfp torchx_prefect tests scripts benchmarks examples
venv-exists:
	@test -x $(PY) || { echo "no $(VENV): run 'make venv' first" >&2; exit 1; }

# The documentation site (mkdocs.yml, docs/) into build/site, strict: any warning fails it.
DOCS_PY ?= $(PY)
docs: venv-exists
	NO_MKDOCS_2_WARNING=1 $(DOCS_PY) -m mkdocs build --strict --site-dir build/site

lint: venv-exists
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)

# mypy --strict on the packages listed in pyproject.toml's [tool.mypy]
typecheck: venv-exists
	$(VENV)/bin/mypy

# The image KFP launcher steps run in (docker/kfp-launcher/); see the README's KFP section.
# make kfp-launcher-image KFP_LAUNCHER_IMAGE=registry.example.com/ml/torchx-kfp:0.1 [KFP_LAUNCHER_TARGET=slurm]
KFP_LAUNCHER_IMAGE ?= torchx-kfp-launcher:latest
KFP_LAUNCHER_TARGET ?= launcher
KFP_LAUNCHER_EXTRAS ?= kfp,kubernetes,aws
kfp-launcher-image: $(UV)
	TARGET=$(KFP_LAUNCHER_TARGET) EXTRAS=$(KFP_LAUNCHER_EXTRAS) UV=$(UV) \
	  bash docker/kfp-launcher/build.sh $(KFP_LAUNCHER_IMAGE)

# Mutation testing (mutmut) of the core logic with the unit tests; prints the score and the survivors.
# Slow (minutes per target), so not part of `make test`. MUTATION_TARGETS=specs runs one target.
MUTATION_TARGETS ?=
mutation: $(VENV_STAMP)
	$(PY) scripts/mutation.py $(MUTATION_TARGETS)

bench: venv
	for f in benchmarks/bench_*.py; do $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) $(TOOLS) .pytest_cache .hypothesis
