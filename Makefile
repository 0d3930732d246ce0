# The README's commands. `make test` is what CI runs (through .ci/run) on a fresh Debian
# machine, so it installs what the tests need when it is missing.

SHELL := /bin/bash
CARGO ?= cargo
APT_GET := DEBIAN_FRONTEND=noninteractive apt-get

.PHONY: demo test bench deps check-deps

## Quorum lock demo on five local masters started by the test kit.
demo: deps
	$(CARGO) run --release --locked --example demo

## Formatting, lints, the whole test suite, and the docs, all warnings as errors.
test: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	$(CARGO) test --workspace --locked
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --locked

## redis-server for the test kit's masters, a C compiler for its clock shim.
deps:
	@if ! command -v redis-server >/dev/null 2>&1; then \
		echo "redis-server is missing: installing it with apt-get"; \
		$(APT_GET) update -q && $(APT_GET) install -y -q redis-server; \
	fi
	@if ! command -v cc >/dev/null 2>&1; then \
		echo "cc is missing: installing gcc with apt-get"; \
		$(APT_GET) update -q && $(APT_GET) install -y -q gcc libc6-dev; \
	fi
	@redis-server --version
