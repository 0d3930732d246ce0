# The README's commands. `make test` is what CI runs (through .ci/run) on a fresh Debian
# machine, so it installs what the tests need when it is missing.

SHELL := /bin/bash
CARGO ?= cargo
APT_GET := DEBIAN_FRONTEND=noninteractive apt-get

.PHONY: demo test bench model deps check-deps

## `redquorum bench` on five local masters started by the test kit, once on loopback and
## once with one master in a far data centre (15 ms one way): two tables, and the latency
## CDFs of redquorum and of the raw-Redis floor in target/demo/latency.svg.
demo: deps
	@mkdir -p target/demo
	$(CARGO) run --release --locked -p redquorum-cli -- bench --workload latency \
		--profile loopback --profile one-far-dc --duration 6s --warmup 1s \
		--plot target/demo/latency.svg --json target/demo/bench.json

## Formatting, lints, the whole test suite, and the docs, all warnings as errors.
test: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	$(CARGO) test --workspace --locked
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --locked

## The quorum-latency benchmark on five spawned masters: every workload, on loopback, one
## far data centre and three regions (a few minutes). Results in target/bench/.
bench: deps
	@mkdir -p target/bench
	$(CARGO) run --release --locked -p redquorum-cli -- bench --workload all \
		--profile loopback --profile one-far-dc --profile three-regions \
		--duration 10s --warmup 2s \
		--plot target/bench/latency.svg --json target/bench/bench.json

## The model checker (model/): every protocol instance must hold over every interleaving
## of its bounded deployment, and every finding and negative control must produce its
## counterexample; exits non-zero otherwise. A few minutes on 2 cores; MODEL_SIZE=large
## for longer horizons and faults on every master (much longer).
model:
	MODEL_SIZE=$(MODEL_SIZE) $(CARGO) run --release --locked -p redquorum-model

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
