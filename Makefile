# fedrepro: `make reproduce` regenerates every figure and table; `make test` runs the tests.
# Both set up what is missing first (a .venv with pinned packages, Fashion-MNIST from Debian).

SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.fedrepro-installed
FMNIST := /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
PROFILE ?= laptop
# Where torch and torchvision come from; empty: PyPI, whose Linux wheels are the CUDA 13 build (about
# 4 GB of nvidia and triton packages beside torch). make setup-cpu sets PyTorch's CPU-only index.
TORCH_INDEX ?=
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
# Debian packages: the offline default data, and the allocator that fedrepro.env.allocator preloads.
APT_PACKAGES := dataset-fashion-mnist libtcmalloc-minimal4
# Only the site's browser test (tests/test_site.py) needs these; make test installs them, nothing else does.
BROWSER_PACKAGES := chromium chromium-driver
# The output root (runs/, output/, figures/, docs/results/; see docs/outputs.md): the repository,
# unless given on the command line (make reproduce OUTPUT=/elsewhere). Outside make, fedrepro writes
# to FEDREPRO_OUTPUT if set, else ~/.local/share/fedrepro.
OUTPUT := $(CURDIR)
OUTPUT_ENV = FEDREPRO_OUTPUT=$(OUTPUT)
# Smoke runs and figures never touch the committed figures/ or the default runs/ folder; a figure
# that fedrepro.env.figure_check enforces stops its notebook when it breaks a rule.
SMOKE_ENV = $(OUTPUT_ENV) FEDREPRO_PROFILE=smoke FEDREPRO_RUNS=$(OUTPUT)/output/smoke/runs MPLBACKEND=Agg FEDREPRO_FIGURE_CHECK=strict
# The data root bench-rehearse reads: the rehearsal's synthetic images of each dataset's shape.
REHEARSAL_DATA ?= rehearsal:
# Jupyter refuses to start as root (containers) unless told to.
ALLOW_ROOT = $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: help setup setup-cpu data browser lint test test-unit test-notebooks reproduce figures archive smoke rehearse bench-rehearse book pretrain lab bench clean distclean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  make %-15s %s\n", $$1, $$2}'

setup: $(STAMP) data ## create .venv with pinned packages and install fedrepro (editable; about 6.8 GB, minutes); idempotent

setup-cpu: ## setup with PyTorch's CPU-only torch/torchvision wheels (download.pytorch.org): no CUDA, about 4 GB smaller
	$(MAKE) setup TORCH_INDEX=$(TORCH_CPU_INDEX)

$(STAMP): requirements.txt constraints.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(if $(TORCH_INDEX),$(PY) -m pip install --quiet --disable-pip-version-check --index-url $(TORCH_INDEX) \
		$$(grep -E '^(torch|torchvision)==' requirements.txt))
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt -c constraints.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	$(PY) -c "import torch, torchvision, fedrepro; print('torch', torch.__version__, 'torchvision', torchvision.__version__, 'cuda', torch.cuda.is_available())"
	@touch $@

data: ## install Debian's dataset-fashion-mnist (offline default data) and tcmalloc (faster training) when apt exists and we are root
	@if [ -f $(FMNIST) ] && [ -n "$$(ldconfig -p 2>/dev/null | grep libtcmalloc_minimal)" ]; then :; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		echo "installing $(APT_PACKAGES) with apt-get"; \
		(apt-get install -y -q $(APT_PACKAGES) >/dev/null 2>&1 || \
		 (apt-get update -q >/dev/null && apt-get install -y -q $(APT_PACKAGES) >/dev/null)); \
	else [ -f $(FMNIST) ] || echo "note: Fashion-MNIST not found at $(FMNIST); see docs/data.md (FEDREPRO_DATA)"; fi

browser: ## install Debian's chromium and chromium-driver (the site's browser test) when apt exists and we are root
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		echo "installing $(BROWSER_PACKAGES) with apt-get"; \
		(apt-get install -y -q --no-install-recommends $(BROWSER_PACKAGES) >/dev/null 2>&1 || \
		 (apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $(BROWSER_PACKAGES) >/dev/null)); \
	else echo "note: chromium/chromedriver not found; tests/test_site.py's browser checks will be skipped"; fi

test: setup browser lint test-unit test-notebooks ## set up, then lint, then run pytest and nbval on every notebook (smoke profile)

lint: $(STAMP) ## ruff, with the rules in pyproject.toml
	$(PY) -m ruff check fedrepro tests bench

# pytest's worker processes (pytest-xdist, one test file each at a time): the cores, at most 4, which
# keeps the suite's memory near 4 torch processes. Two workers took pytest from 18.0 to 13.6 min on the
# quiet 2-core VM (docs/speed.md). nbval stays one process: two notebooks at once took it from 6.2 to 8.9 min.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$(( n < 4 ? n : 4 )))
test-unit: $(STAMP)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=25 tests

test-notebooks: $(STAMP)
	$(SMOKE_ENV) $(VENV)/bin/fedrepro reproduce --profile smoke --no-render
	$(SMOKE_ENV) $(PY) -m pytest -q --nbval-lax -p no:cacheprovider notebooks

reproduce: setup ## set up, then train every notebook's runs in one pool and render the notebooks at PROFILE (default laptop); outputs under OUTPUT (default: this repository): figures -> figures/, results pages -> docs/results/$(PROFILE)/
	$(OUTPUT_ENV) $(VENV)/bin/fedrepro reproduce --profile $(PROFILE)
	$(OUTPUT_ENV) $(VENV)/bin/fedrepro results --profile $(PROFILE)
	$(OUTPUT_ENV) $(VENV)/bin/fedrepro compare --profile $(PROFILE)

figures: setup ## render every notebook and the results pages at PROFILE (default laptop) from the reference archive results/$(PROFILE)/ (runs it lacks, and what needs model weights, train); outputs as reproduce
	$(OUTPUT_ENV) FEDREPRO_ARCHIVE=read $(VENV)/bin/fedrepro reproduce --profile $(PROFILE)
	$(OUTPUT_ENV) $(VENV)/bin/fedrepro results --profile $(PROFILE)

archive: setup ## write the reference archive results/$(PROFILE)/<paper>.jsonl.gz of the runs the last pass's notebooks read (after make reproduce)
	$(OUTPUT_ENV) $(VENV)/bin/fedrepro archive --profile $(PROFILE)

smoke: setup ## every notebook at the smoke profile: one seed, the smallest sizes (minutes in all; docs/speed.md); outputs under output/smoke/
	$(SMOKE_ENV) $(VENV)/bin/fedrepro reproduce --profile smoke

rehearse: setup ## the paper profile rehearsed: every notebook on the papers' full-size models (random weights), 2 rounds of one local step, verdicts REHEARSAL; predicted cost of the paper profile -> output/paper/notebooks/rehearsal_cost.json; outputs under OUTPUT/rehearsal (docs/speed.md); on 2 CPU cores its CLIP and ViT-B/16 notebooks take many hours (docs/paper-profile.md)
	$(OUTPUT_ENV) MPLBACKEND=Agg $(VENV)/bin/fedrepro reproduce --profile paper --rehearse

bench-rehearse: setup ## one client step on each full-size model, and the paper profile's notebooks costed from it -> bench/rehearsal_steps.json (REHEARSAL_DATA: a data root of the paper datasets' shapes)
	$(OUTPUT_ENV) $(PY) bench/rehearsal_steps.py --data $(REHEARSAL_DATA) --json bench/rehearsal_steps.json

book: setup ## the static teaching site of the notebooks reproduce executed at PROFILE -> output/$(PROFILE)/book/index.html (docs/site.md)
	$(OUTPUT_ENV) $(PY) -m fedrepro.app.book --profile $(PROFILE)

pretrain: setup ## regenerate the committed backbone checkpoints (fedrepro/models/weights/; minutes on a CPU)
	$(VENV)/bin/fedrepro pretrain vit
	$(VENV)/bin/fedrepro pretrain clip
	$(VENV)/bin/fedrepro pretrain clip_patch

# The notebooks read their profile from FEDREPRO_PROFILE (fedrepro.config.resolve_profile); smoke runs
# go to the folder make smoke trains into, so that Lab reuses them and never touches runs/. Running a
# notebook in Lab modifies no tracked file: its figures go to output/<profile>/figures, never over the
# committed figures/, and etc/jupyter_server_config.py saves no outputs into notebooks/ (an executed
# copy goes to output/<profile>/lab/ instead). --config replaces ~/.jupyter/jupyter_server_config.py.
LAB_ENV = $(OUTPUT_ENV) FEDREPRO_PROFILE=$(PROFILE) FEDREPRO_FIGURES=$(OUTPUT)/output/$(PROFILE)/figures \
	$(if $(filter smoke,$(PROFILE)),FEDREPRO_RUNS=$(OUTPUT)/output/smoke/runs)
LAB_CONFIG := etc/jupyter_server_config.py

lab: setup ## JupyterLab on the notebooks at PROFILE (default laptop; make lab PROFILE=smoke for minutes); outputs under OUTPUT (default: this repository), never into tracked files
	$(LAB_ENV) $(VENV)/bin/jupyter lab $(ALLOW_ROOT) --config=$(CURDIR)/$(LAB_CONFIG) notebooks/

bench: setup ## engine vs a bare loop, one worker vs the pool, peak memory; kernel options -> bench/*.json
	$(PY) -m fedrepro.app.bench --out bench/results.json
	$(PY) bench/kernels.py --json bench/kernels.json

clean: ## remove run folders, executed notebooks and caches (keeps .venv and committed figures)
	rm -rf runs output .pytest_cache .hypothesis
	find . -name __pycache__ -not -path './$(VENV)/*' -prune -exec rm -rf {} +

distclean: clean ## clean, and remove .venv
	rm -rf $(VENV)
