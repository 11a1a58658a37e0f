# Everything runs from a local .venv that the first target creates and fills.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
EXTRAS := dev,server,client,observability
# Replicated purgatories' NATS client and nats-server binary (docs/scale-out.md).
EXTRAS := $(EXTRAS),cluster

.PHONY: help install serve test lint typecheck unit stubs check-stubs bench clean system-deps
.PHONY: sync-client check-sync-client
.PHONY: node-deps buf-lint buf-breaking node-build node-test clean-node
.PHONY: cluster

# Debian packages that some tests need (each feature appends its own line below).
# `make test` installs the missing ones when it runs as root; otherwise it says which are
# missing and the tests that need them say clearly that they are skipped.
APT_PACKAGES :=
APT_PACKAGES += chromium
# promtool checks the Prometheus exposition (tests/observability/test_scrape.py).
APT_PACKAGES += prometheus
# bench/service_bench.py's Redis baselines (run by tests/test_bench_smoke.py).
APT_PACKAGES += redis-server

help:
	@echo "make serve   - run the gRPC server on 127.0.0.1:50051 (the 'default' purgatory);"
	@echo "               ARGS='--listen 127.0.0.1:50061 --durable' passes server flags"
	@echo "make test    - lint, type-check, stub check and the full test suite"
	@echo "make stubs   - regenerate gRPC stubs from proto/"
	@echo "make sync-client - regenerate the blocking Python client from the asyncio one"
	@echo "make bench   - run the benchmarks (slow; not part of make test)"
	@echo "make cluster - 3 nats-server nodes + 2 purgatory servers sharing replicated 'orders'"
	@echo "               on 127.0.0.1:50051-50052 (CLUSTER_PORT=50061: 50061-50062)"
	@echo "make pipeline - Spark ingest + report over make serve's data directory"

# The engine is compiled with mypyc where a C compiler exists (setup.py; pure Python
# otherwise, or with PURGATORY_PURE_PYTHON=1): the editable install builds it in place, and
# `make engine` rebuilds it after an edit (`make unit`/`make test` do that themselves).
# The service's hot-path modules are compiled with it (server/purgatory_server/_service/
# native_modules.py lists them; their sources are read from that list here).
SERVICE_NATIVE := server/purgatory_server/_service/native_modules.py
HOT_SRC      := $(shell sed -n 's/^    "purgatory_server\.\(.*\)",$$/\1/p' $(SERVICE_NATIVE) | tr . / | sed 's|^|server/purgatory_server/|; s|$$|.py|')
ENGINE_SRC   := $(wildcard server/purgatory_server/_engine/*.py) $(SERVICE_NATIVE) $(HOT_SRC)
ENGINE_STAMP := $(VENV)/.engine-stamp

# After `make serve` installed these very sources (its stamp newer than every file the
# build reads), only the extras' requirements are added: the project, and mypyc's compile
# of the engine and the hot path, are not built a second time (harness/extras.py).
$(STAMP): pyproject.toml setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	if [ -f $(SERVE_STAMP) ] && [ -z "$$(find pyproject.toml setup.py $(ENGINE_SRC) -newer $(SERVE_STAMP))" ]; then \
	  $(BIN)/python harness/extras.py $(EXTRAS) \
	    | $(BIN)/python -m pip install --quiet --disable-pip-version-check -r /dev/stdin; \
	else \
	  $(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[$(EXTRAS)]'; \
	fi
	touch $(STAMP) $(ENGINE_STAMP)

install: $(STAMP)

# `make serve` installs only what the server (and the `purgatory` CLI) needs: no compilers,
# linters or test tools. `make test`/`make install` add the dev tools to the same .venv.
SERVE_EXTRAS := server,client
SERVE_STAMP  := $(VENV)/.serve-stamp

# The first run takes a while (1-6 minutes: downloads, and mypyc compiling the engine where
# a C compiler exists), so it says what it is doing; pip's own lines show its progress.
$(SERVE_STAMP): pyproject.toml setup.py $(ENGINE_SRC)
	@test -x $(BIN)/python || { echo "make serve: creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv $(VENV); }
	@echo "make serve: installing the server and the CLI into $(VENV) (extras $(SERVE_EXTRAS));"
	@echo "make serve: the first time this takes 1-6 minutes (downloads; the engine is compiled with mypyc)"
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar off -e '.[$(SERVE_EXTRAS)]' \
	  | grep --line-buffered -E '^(Collecting|Building|Installing|Successfully|ERROR)' || true
	@$(BIN)/python -c 'import purgatory_server, grpc' || { echo "make serve: the installation failed (see above)"; exit 1; }
	@touch $(SERVE_STAMP)
	@echo "make serve: installed"

# ARGS: flags for purgatory-server, e.g. make serve ARGS="--listen 0.0.0.0:50051 --durable"
# (`.venv/bin/purgatory-server --help` lists them; PURGATORY_* variables work too).
ARGS ?=
serve: $(SERVE_STAMP)
	$(BIN)/python -m purgatory_server $(ARGS)

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

# Most of the blocking Python client is generated from the asyncio one (the modules named
# in client/generate_sync.py); `make test` fails when a generated module has drifted.
sync-client: $(STAMP)
	$(BIN)/python client/generate_sync.py

check-sync-client: $(STAMP)
	$(BIN)/python client/generate_sync.py --check

# The tests run in PYTEST_WORKERS processes (pytest-xdist), whole modules per process
# (--dist loadfile), so a module's shared server, Spark session or wheel is built once.
# Most tests wait on servers they start, so two processes fill a 2-core machine.
PYTEST_WORKERS ?= 2
PYTEST_PARALLEL := -n $(PYTEST_WORKERS) --dist loadfile

# bench/node: BullMQ and ioredis for bench.bullmq_bench (its smoke run is in tests/).
BENCH_NODE_STAMP := bench/node/node_modules/.ci-stamp
$(BENCH_NODE_STAMP): bench/node/package-lock.json
	cd bench/node && npm ci --no-audit --no-fund --loglevel=error
	touch $@

unit: $(ENGINE_STAMP) $(BENCH_NODE_STAMP)
	$(BIN)/python -m pytest $(PYTEST_PARALLEL) --durations=25

# The engine and the service on the pure-Python engine too (the fallback where no C
# compiler exists), from the same installation: the variable makes the engine load its
# sources (server/purgatory_server/_engine/_native.py). test_build.py is left out: it runs
# both builds itself, in child processes, from `make unit`.
unit-pure: $(ENGINE_STAMP)
	PURGATORY_PURE_PYTHON=1 $(BIN)/python -m pytest $(PYTEST_PARALLEL) -q tests/engine tests/service \
	  --ignore=tests/engine/test_build.py

.PHONY: engine unit-pure
engine: $(ENGINE_STAMP)

$(ENGINE_STAMP): $(ENGINE_SRC) setup.py | $(STAMP)
	$(BIN)/python setup.py --quiet build_ext --inplace
	touch $(ENGINE_STAMP)

system-deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  else echo "not root: missing Debian packages:$$missing (tests needing them are skipped)"; fi; \
	fi

test: system-deps lint typecheck check-stubs check-sync-client buf-lint buf-breaking unit unit-pure node-test

# A replicated deployment on loopback (docs/scale-out.md §12): three nats-server nodes
# (JetStream, R3) and two purgatory servers on 127.0.0.1:50051-50052 sharing the replicated
# purgatory `orders`; runs in the foreground, Ctrl-C stops everything. State in .cluster/.
# CLUSTER_PORT moves the two servers (CLUSTER_PORT and CLUSTER_PORT+1).
CLUSTER_PORT ?= 50051
cluster: $(STAMP)
	$(BIN)/python -m purgatory_server._cluster.local --dir .cluster --port $(CLUSTER_PORT)

bench: $(STAMP)
	$(BIN)/python -m bench.timer_scaling
	$(BIN)/python -m bench.purgatory_perf
	$(BIN)/python -m bench.service_bench

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .pytest_cache .ruff_cache
	find server/purgatory_server -name '*.so' -delete

# ---------------------------------------------------------------- Node.js client and buf
# client/node holds the Node.js client and the toolchain that checks the proto (the buf
# CLI comes from the @bufbuild/buf npm package). `npm ci` installs exactly the committed
# lockfile; the stamp re-runs it when the lockfile changes.
NODE_DIR   := client/node
NODE_STAMP := $(NODE_DIR)/node_modules/.ci-stamp
BUF        := $(NODE_DIR)/node_modules/.bin/buf

$(NODE_STAMP): $(NODE_DIR)/package-lock.json
	cd $(NODE_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

node-deps: $(NODE_STAMP)

# buf's STANDARD lint rules (exceptions, with reasons, in proto/buf.yaml).
buf-lint: $(NODE_STAMP)
	$(BUF) lint proto
	@echo "buf lint: proto/ passes the STANDARD rules"

# Fails on a change that breaks the contract main published (proto/check-breaking.sh).
buf-breaking: $(NODE_STAMP)
	BUF=$(BUF) proto/check-breaking.sh

# Compile the TypeScript client into client/node/dist: dist/cjs (CommonJS) and dist/esm (ES
# modules), each with type declarations (client/node/scripts/build.js; `npm ci` runs it too,
# as the package's `prepare` script).
node-build: $(NODE_STAMP)
	cd $(NODE_DIR) && npm run --silent build

# node --test against real Python servers (from .venv) on 127.0.0.1:0; prints the runner's
# summary and fails if any test fails. DEP0123: grpc-js sends an IP target (127.0.0.1) as
# the TLS ServerName, which Node warns about; the certificate is still checked against the
# IP, so the TLS tests silence that one warning (test/security.test.mjs checks it is).
NODE_TESTS := $(NODE_DIR)/test/*.test.mjs
node-test: $(STAMP) node-build
	node --disable-warning=DEP0123 --test --test-reporter=spec --test-concurrency=1 \
	  --test-timeout=120000 $(NODE_TESTS)

# The Node.js client's and bench/node's installed packages and build outputs (`make clean` leaves them).
clean-node:
	rm -rf $(NODE_DIR)/node_modules $(NODE_DIR)/dist $(NODE_DIR)/proto $(NODE_DIR)/src/gen bench/node/node_modules

# The batching dispatcher against one RPC per signal (docs/benchmarks.md §9).
.PHONY: bench-dispatcher
bench-dispatcher: $(STAMP)
	$(BIN)/python -m bench.dispatcher_bench

# The Spark pipeline (docs/pipeline.md): ingest the journals of `make serve`'s data
# directory (durable purgatories only) and write the report. Local Spark (local[*]).
.PHONY: pipeline
PIPELINE_DATA ?= data
PIPELINE_OUT  ?= pipeline-out
# Spark's and py4j's logs go to each output's _logs/spark-*.log: the console is one line
# per step.
pipeline: $(STAMP)
	$(BIN)/purgatory-pipeline ingest --journal $(PIPELINE_DATA) --out $(PIPELINE_OUT)/tables
	$(BIN)/purgatory-pipeline report --tables $(PIPELINE_OUT)/tables --out $(PIPELINE_OUT)/report
	@echo "open $(PIPELINE_OUT)/report/report.html"
