# desk — the two commands a newcomer needs are `make demo` and `make test`.

CARGO ?= cargo
# Where cargo builds (CARGO_TARGET_DIR when set, as cargo itself does).
TARGET_DIR := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)
RELEASE := $(TARGET_DIR)/release
DESK_DEMO_HOME ?= $(CURDIR)/target/demo-home

.PHONY: build check-rust demo demo-shell demo-stop native test lint doc man deb deb-check msrv fuzz-build check-all bench soak fuzz e2e-agents e2e-keys e2e-resume clean

# Rust >= the workspace's rust-version, or a message that says how to get it (README: Quick start).
check-rust:
	@sh scripts/check-rust.sh "$(CARGO)" "$(MSRV)"

build: check-rust
	$(CARGO) build --release --bins

# Build, `desk up` the demo manifest (scripts/demo.toml: three demo agents, one in a git
# worktree, the #release channel), list them, and open the dashboard over them (q quits it, the
# fleet keeps running; `make demo-stop` runs `desk down` on it). It prints the line that puts
# this desk and the demo's DESK_HOME into your shell; `make demo-shell` opens a shell with both
# set.
demo: build
	@DESK_HOME=$(DESK_DEMO_HOME) sh scripts/demo.sh $(RELEASE)

# A shell with the demo's desk first on PATH and DESK_HOME set to the demo fleet's home
# (`exit` leaves it; the fleet keeps running).
demo-shell:
	@test -x $(RELEASE)/desk || { echo "make demo-shell: run make demo first" >&2; exit 1; }
	@echo "a shell with DESK_HOME=$(DESK_DEMO_HOME) and $(RELEASE) first on PATH; exit leaves it"
	@PATH="$(RELEASE):$$PATH" DESK_HOME="$(DESK_DEMO_HOME)" exec "$${SHELL:-/bin/sh}"

demo-stop:
	@DESK_HOME=$(DESK_DEMO_HOME) sh scripts/demo.sh $(RELEASE) stop

# The C99 implementation of the wire protocol (native/README.md): build/deskc, build/test_vectors.
native:
	$(MAKE) -C native

# The C codec against the wire vectors (under ASan/UBSan when the compiler has them), then unit
# tests, integration tests on real PTYs (the C client against a live master among them), wire
# vectors and the fuzz corpus replay, then the Debian package's layout (deb-check).
test:
	$(MAKE) -C native test
	$(CARGO) test --workspace --locked
	$(MAKE) deb-check

# The Debian package, target/debian/desk_VERSION-1_ARCH.deb (needs cargo-deb: cargo install
# cargo-deb --locked): desk and desk-master together, the demo agent, bash/zsh/fish completions,
# the manual pages and the systemd user unit (packaging/desk.service). Install it with
# sudo apt install ./target/debian/desk_*.deb
deb: build
	sh scripts/deb-assets.sh $(RELEASE)/desk target/deb-assets
	$(CARGO) deb --locked --no-build

# Build the package from a quicker profile, unpack it into a scratch root and check every file
# and that the installed desk finds its master (scripts/deb-check.sh; under CI=true a missing
# cargo-deb fails it, elsewhere it is skipped with a word).
deb-check:
	CARGO="$(CARGO)" sh scripts/deb-check.sh

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --workspace --locked --all-targets -- -D warnings

# The API docs of every crate, private items included (they are for people working on desk),
# with every rustdoc warning an error. Output: target/doc/desk/index.html.
doc:
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --document-private-items --locked

# The manual pages, generated from the same definitions as --help: target/man/desk.1 and one
# page per command (desk-new.1, ...). Read one with: man -l target/man/desk.1
man:
	$(CARGO) run --quiet --locked --bin desk -- man --out-dir target/man

# A build with the oldest Rust the workspace declares (`rust-version` in Cargo.toml), so the
# declaration stays true. Installs that toolchain with rustup if it is missing.
MSRV := $(shell sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
msrv:
	rustup toolchain list | grep -q '^$(MSRV)' || rustup toolchain install $(MSRV) --profile minimal
	$(CARGO) +$(MSRV) build --workspace --locked --target-dir target/msrv

# The fuzz targets, built on stable without the fuzzer's instrumentation: they must keep
# compiling against the codec and scanner APIs. (`make fuzz` runs them; it needs cargo-fuzz.)
fuzz-build:
	$(CARGO) build --manifest-path fuzz/Cargo.toml --locked

# What CI runs besides the tests.
check-all: lint doc msrv fuzz-build

# Side-by-side benchmarks against dtach and tmux (needs: apt-get install dtach tmux) — fan-out,
# attach, idle memory, keystroke echo and detached starts (docs/benchmarks.md §1-3, §19) —, and
# the dashboard over 100 demo agents (docs/benchmarks.md §10).
bench:
	$(CARGO) bench --locked --bench sessions
	$(CARGO) bench --locked --bench delivery
	$(CARGO) bench --locked --bench channels
	$(CARGO) bench --locked --bench screen_model
	$(CARGO) bench --locked --bench dash
	$(CARGO) bench --locked --bench fleet
	$(CARGO) bench --locked --bench handover

# Randomized crash soak of prompt delivery (benches/soak.rs): hundreds of prompts of every shape
# to demo agents while the daemon, masters and agents are killed at random (--profile mixed,
# restarts or slow-agents); exits 1 if any prompt was lost, duplicated (also by forcing every
# stuck item), sent to the wrong session, stuck although submitted, or left queued. Pass
# options with SOAK_ARGS="--profile restarts --seed 7".
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
# registry, ~40 min) into tests/data/agents/, check that prompts of every shape reach each of
# them through desk once and whole (scripts/e2e-shapes.py), then check desk's provider rules
# against the new recordings. Not part of `make test`: it needs the network.
e2e-agents: build
	bash scripts/e2e-agents.sh
	$(CARGO) test --locked --test it corpus::

# Check `desk keys`, notifications and the approvals inbox against the same real agents, run
# under desk (needs the npm registry, a few minutes): approve, refuse and dismiss each one's
# dialog with keys, then list it with `desk inbox` and answer it with `desk approve`/`deny`,
# and refuse an answer to a dialog that changed between listing and answering.
e2e-keys: build
	bash scripts/e2e-keys.sh

# Check restart-with-resume against the same real agents declared in a desk.toml (needs the npm
# registry, several minutes): desk captures each one's conversation, `desk restart` and a crash
# restarted by the daemon both resume it (the next request carries the earlier turn); then replay
# the capture rules against the resume recordings.
e2e-resume: build
	bash scripts/e2e-resume.sh
	$(CARGO) test --locked --test it resume_corpus::

clean:
	$(CARGO) clean
	$(MAKE) -C native clean
