# desk — the two commands a newcomer needs are `make demo` and `make test`.

CARGO ?= cargo
DESK_DEMO_HOME ?= $(CURDIR)/target/demo-home
DESK := $(CURDIR)/target/release/desk

.PHONY: build demo demo-stop test lint bench fuzz e2e-agents clean

build:
	$(CARGO) build --release --bins

# Build, start a small fleet of demo agents, list them, and attach to the first one
# (detach with Ctrl-\ ; `make demo-stop` ends the fleet).
demo: build
	@DESK_HOME=$(DESK_DEMO_HOME) sh scripts/demo.sh $(CURDIR)/target/release

demo-stop:
	@DESK_HOME=$(DESK_DEMO_HOME) sh scripts/demo.sh $(CURDIR)/target/release stop

# Unit tests, integration tests on real PTYs, wire vectors and the fuzz corpus replay.
test:
	$(CARGO) test --locked

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --locked --all-targets -- -D warnings

# Side-by-side benchmarks against dtach and tmux (needs: apt-get install dtach tmux).
bench:
	$(CARGO) bench --locked --bench sessions
	$(CARGO) bench --locked --bench delivery
	$(CARGO) bench --locked --bench screen_model

# Coverage-guided fuzzing of the wire decoder (needs: cargo install cargo-fuzz).
fuzz:
	cd fuzz && $(CARGO) fuzz run wire_decode -s none -- -max_total_time=300

clean:
	$(CARGO) clean
