#!/bin/sh
# The files of the Debian package that desk writes itself (make deb, make deb-check): the
# completion scripts and the manual pages, from the desk that goes into the package, into
# target/deb-assets/ where [package.metadata.deb] in Cargo.toml takes them from.
# Usage: deb-assets.sh DESK OUT_DIR
set -eu
desk="$1"
out="$2"
rm -rf "$out"
mkdir -p "$out/completions" "$out/man"
"$desk" completions bash > "$out/completions/desk"
"$desk" completions zsh > "$out/completions/_desk"
"$desk" completions fish > "$out/completions/desk.fish"
"$desk" man --out-dir "$out/man" > /dev/null
