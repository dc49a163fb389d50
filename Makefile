# Orca queue module. `make run` starts Redis with the module; `make test`
# runs every test. Both install what is missing on Debian 12 first.

SHELL := /bin/bash
MODULE := target/release/liborca.so
APT_PACKAGES := redis-server libclang1-14 libclang-common-14-dev
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build run test unit-test integration-test lint bench clean

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
# against real redis-server processes started on free ports.
test: build
	cargo test --release

lint:
	cargo fmt --check
	cargo clippy --release --all-targets -- -D warnings

clean:
	cargo clean
