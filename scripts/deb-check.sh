#!/bin/sh
# `make deb-check` (part of `make test`): build the Debian package, unpack it into a scratch root
# with dpkg -x, and check that every file is where it belongs and that the installed desk finds
# its master. Needs cargo-deb (cargo install cargo-deb --locked) and dpkg: under CI (CI=true) a
# missing one fails the check; elsewhere it is skipped, saying so.
set -eu
cd "$(dirname "$0")/.."
cargo="${CARGO:-cargo}"
target="${CARGO_TARGET_DIR:-target}"
profile=deb-check

missing() {
    if [ "${CI:-}" = true ]; then
        echo "deb-check: $1 is missing, and CI needs this check to run: $2" >&2
        exit 1
    fi
    echo "deb-check: SKIPPED, $1 is not installed ($2); the package was not checked" >&2
    exit 0
}
"$cargo" deb --version >/dev/null 2>&1 || missing cargo-deb "cargo install cargo-deb --locked"
command -v dpkg-deb >/dev/null 2>&1 || missing dpkg-deb "apt-get install dpkg"

echo "== deb-check: building the package's executables (profile $profile)"
"$cargo" build --locked --profile "$profile" --bins
sh scripts/deb-assets.sh "$target/$profile/desk" target/deb-assets
deb="$target/$profile/desk.deb"
rm -f "$deb"
"$cargo" deb --locked --no-build --profile "$profile" --fast --output "$deb" >/dev/null

root=$(mktemp -d /tmp/desk-deb-root.XXXXXX)
home=$(mktemp -d /tmp/desk-deb-home.XXXXXX)
cleanup() {
    # The session the check starts, by the pids its record names, then the scratch directories.
    for pid in $(sed -n 's/.*"master_pid": *\([0-9]*\).*/\1/p; s/.*"pid": *\([0-9]*\).*/\1/p' "$home"/run/*.json 2>/dev/null); do
        kill -9 "$pid" 2>/dev/null || true
    done
    rm -rf "$root" "$home"
}
trap cleanup EXIT
dpkg-deb -x "$deb" "$root"
fail() {
    echo "deb-check: FAILED: $*" >&2
    exit 1
}

# The control file: one package, desk, for this architecture, depending on libc.
info=$(dpkg-deb -f "$deb" Package Version Architecture Depends)
echo "$info" | grep -q '^Package: desk$' || fail "package name: $info"
echo "$info" | grep -q "^Architecture: $(dpkg --print-architecture)$" || fail "architecture: $info"
echo "$info" | grep -q '^Depends: .*libc6' || fail "no libc6 dependency: $info"

# Every file where it belongs, with its mode, and nothing else.
want=$(mktemp)
have=$(mktemp)
trap 'cleanup; rm -f "$want" "$have"' EXIT
{
    for bin in desk desk-master desk-demo-agent; do echo "755 usr/bin/$bin"; done
    echo "644 usr/share/bash-completion/completions/desk"
    echo "644 usr/share/zsh/vendor-completions/_desk"
    echo "644 usr/share/fish/vendor_completions.d/desk.fish"
    for page in target/deb-assets/man/*.1; do echo "644 usr/share/man/man1/$(basename "$page").gz"; done
    echo "644 usr/lib/systemd/user/desk.service"
    for doc in README.md cli.md operator-guide.md copyright; do echo "644 usr/share/doc/desk/$doc"; done
} | sort > "$want"
(cd "$root" && find . -type f -printf '%m %P\n') | sort > "$have"
if ! diff -u "$want" "$have"; then
    fail "the package's files differ from the expected ones (- expected, + in the package)"
fi
[ "$(grep -c 'usr/share/man/man1/' "$have")" -ge 20 ] || fail "too few manual pages"
zcat "$root/usr/share/man/man1/desk-send.1.gz" | grep -q '^.SH "EXIT STATUS"' || fail "desk-send.1 has no EXIT STATUS"
grep -q '^ExecStart=/usr/bin/desk serve --foreground$' "$root/usr/lib/systemd/user/desk.service" ||
    fail "the unit does not run /usr/bin/desk serve --foreground"
desk="$root/usr/bin/desk"
for shell in bash zsh fish; do
    case $shell in
    bash) file=usr/share/bash-completion/completions/desk ;;
    zsh) file=usr/share/zsh/vendor-completions/_desk ;;
    fish) file=usr/share/fish/vendor_completions.d/desk.fish ;;
    esac
    "$desk" completions "$shell" | cmp -s - "$root/$file" || fail "$file is not what the installed desk prints"
done

# The installed desk runs, starts each session's master from beside itself, and says so.
export DESK_HOME="$home" DESK_AUTOSTART=0
"$desk" --version | grep -q "^desk " || fail "the installed desk does not run"
"$desk" new probe -- sleep 60 >/dev/null || fail "the installed desk cannot start a session"
master=$(sed -n 's/.*"master_pid": *\([0-9]*\).*/\1/p' "$home/run/probe.json")
[ -n "$master" ] || fail "no master pid in the session's record"
exe=$(readlink "/proc/$master/exe")
[ "$exe" = "$root/usr/bin/desk-master" ] || fail "the session's master runs $exe, not $root/usr/bin/desk-master"
"$desk" doctor --json | grep -A2 '"check": "executables"' | grep -q '"status": "ok"' ||
    fail "desk doctor does not find desk-master beside the installed desk"
"$desk" kill probe --grace 2 >/dev/null
echo "== deb-check: ok ($(basename "$deb"): $(wc -l < "$have") files, the installed desk starts $exe)"
