# Everything runs from a local .venv that the first target creates and fills.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
EXTRAS := dev,server,client,observability

.PHONY: help install serve test lint typecheck unit stubs check-stubs bench clean system-deps

# Debian packages that some tests need (each feature appends its own line below).
# `make test` installs the missing ones when it runs as root; otherwise it says which are
# missing and the tests that need them say clearly that they are skipped.
APT_PACKAGES :=
# promtool checks the Prometheus exposition (tests/observability/test_scrape.py).
APT_PACKAGES += prometheus

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

system-deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  else echo "not root: missing Debian packages:$$missing (tests needing them are skipped)"; fi; \
	fi

test: system-deps lint typecheck check-stubs unit

bench: $(STAMP)
	$(BIN)/python -m bench.timer_scaling
	$(BIN)/python -m bench.purgatory_perf
	$(BIN)/python -m bench.service_bench

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .pytest_cache .ruff_cache
