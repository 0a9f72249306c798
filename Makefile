# desk — the two commands a newcomer needs are `make demo` and `make test`.

CARGO ?= cargo
DESK_DEMO_HOME ?= $(CURDIR)/target/demo-home
DESK := $(CURDIR)/target/release/desk

.PHONY: build demo demo-stop test lint bench soak fuzz e2e-agents clean

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
	$(CARGO) test --workspace --locked

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --workspace --locked --all-targets -- -D warnings

# Side-by-side benchmarks against dtach and tmux (needs: apt-get install dtach tmux).
bench:
	$(CARGO) bench --locked --bench sessions
	$(CARGO) bench --locked --bench delivery
	$(CARGO) bench --locked --bench screen_model

# Randomized crash soak of prompt delivery (benches/soak.rs): hundreds of prompts of every shape
# to demo agents while the daemon, masters and agents are SIGKILLed at random; exits 1 if any
# prompt was lost or duplicated. Pass options with SOAK_ARGS="--prompts 500 --seed 7".
SOAK_ARGS ?=
soak:
	$(CARGO) bench --locked --bench soak -- $(SOAK_ARGS)

# Coverage-guided fuzzing of the wire decoder and the screen model's output events (needs: cargo install
# cargo-fuzz; runs on stable without a sanitizer). New inputs go to target/fuzz-corpus/.
fuzz:
	mkdir -p target/fuzz-corpus/wire_decode target/fuzz-corpus/output_events
	cd fuzz && $(CARGO) fuzz run wire_decode -s none ../target/fuzz-corpus/wire_decode corpus/wire_decode -- -max_total_time=300 -max_len=16384
	cd fuzz && $(CARGO) fuzz run output_events -s none ../target/fuzz-corpus/output_events corpus/output_events -- -max_total_time=300 -max_len=4096

# Re-record the real agents (Claude Code, Codex, OpenCode, pinned versions; needs the npm
# registry, ~30 min) into tests/data/agents/, then check desk's provider rules against the new
# recordings. Not part of `make test`: it needs the network.
e2e-agents:
	bash scripts/e2e-agents.sh
	$(CARGO) test --locked --test it corpus::

clean:
	$(CARGO) clean
