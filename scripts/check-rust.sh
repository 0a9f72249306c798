#!/bin/sh
# `make build` (and so `make demo`) runs this first: without a Rust toolchain new enough for desk
# it says how to get one, rather than failing in the middle of a build.
# Usage: check-rust.sh CARGO MIN_VERSION
set -eu
cargo="$1"
need="$2"

explain() {
    cat >&2 <<MSG

desk is built with Rust $need or newer. Install the current Rust with rustup (Debian 12's own
rustc is 1.63 and Ubuntu 24.04's 1.75, both too old for desk):

    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh
    . "\$HOME/.cargo/env"

or, where rustup is installed already: rustup update stable
desk also needs a C toolchain and git (sudo apt-get install build-essential git); its first
build downloads crates from crates.io (network access), and its final link wants ~1.1 GB of
free memory. Then run make again.
MSG
    exit 1
}

if ! command -v "$cargo" >/dev/null 2>&1; then
    echo "make: cargo (Rust's build tool) is not on PATH." >&2
    explain
fi
have=$("$cargo" --version 2>/dev/null | sed -n 's/^cargo \([0-9][0-9.]*\).*/\1/p')
if [ -z "$have" ]; then
    echo "make: $cargo --version did not say which Rust it is." >&2
    explain
fi
# The older of the two first: then the toolchain is old.
oldest=$(printf '%s\n%s\n' "$have" "$need" | sort -t. -k1,1n -k2,2n -k3,3n | head -n 1)
if [ "$oldest" = "$have" ] && [ "$have" != "$need" ] && [ "${have%.0}" != "$need" ]; then
    echo "make: $(command -v "$cargo") is Rust $have." >&2
    explain
fi
