# Everything runs from a local .venv that the first target creates and fills.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
EXTRAS := dev,server,client

.PHONY: help install serve test lint typecheck unit stubs check-stubs bench clean

help:
	@echo "make serve   - run the gRPC server on 127.0.0.1:50051 (the 'default' purgatory)"
	@echo "make test    - lint, type-check, stub check and the full test suite"
	@echo "make stubs   - regenerate gRPC stubs from proto/"
	@echo "make bench   - run the benchmarks (slow; not part of make test)"

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[$(EXTRAS)]'
	touch $(STAMP)

install: $(STAMP)

serve: $(STAMP)
	$(BIN)/python -m purgatory_server

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	@if ls Dockerfile >/dev/null 2>&1; then $(BIN)/hadolint Dockerfile; fi

typecheck: $(STAMP)
	$(BIN)/mypy

stubs: $(STAMP)
	$(BIN)/python proto/generate.py

check-stubs: $(STAMP)
	$(BIN)/python proto/generate.py --check

unit: $(STAMP)
	$(BIN)/python -m pytest

test: lint typecheck check-stubs unit

bench: $(STAMP)
	$(BIN)/python -m bench.timer_scaling
	$(BIN)/python -m bench.purgatory_perf
	$(BIN)/python -m bench.service_bench

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .pytest_cache .ruff_cache
