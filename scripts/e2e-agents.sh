#!/usr/bin/env bash
# Re-install the real coding agents into a scratch directory and re-record desk's agent corpus
# (tests/data/agents/), then check that prompts of every shape reach each agent through desk
# exactly once and whole (scripts/e2e-shapes.py). Optional and slow (about 40 minutes on 2
# cores): it needs the npm registry and PyPI, and desk's normal test run never calls it.
#
# Usage: scripts/e2e-agents.sh [agent-scenarios.py options, e.g. --agents codex --scenarios turn]
# Environment:
#   CLAUDE_CODE_VERSION, CODEX_VERSION, OPENCODE_VERSION  npm versions (default: the versions the
#                                                         committed corpus was recorded with;
#                                                         "latest" to try new releases)
#   DESK_AGENTS_DIR   scratch directory for the install (default: a new one under /tmp, removed
#                     at the end unless DESK_AGENTS_KEEP=1)
#   DESK_AGENTS_OUT   where to write the corpus (default: tests/data/agents in this repository)
#   DESK              the desk binary for the shapes check (default: target/release/desk)
#   DESK_SHAPES=0     skip the shapes check
#
# It uses /tmp/home and /tmp/work as the agents' neutral HOME and working directory, so that no
# path of this machine ends up in the recordings; see tests/data/agents/README.md.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
out=${DESK_AGENTS_OUT:-$repo/tests/data/agents}
# shellcheck source=scripts/agents-lib.sh
. "$here/agents-lib.sh"

if [[ -n ${DESK_AGENTS_DIR:-} ]]; then
    work=$DESK_AGENTS_DIR
    mkdir -p "$work"
else
    work=$(mktemp -d /tmp/desk-agents.XXXXXX)
    if [[ ${DESK_AGENTS_KEEP:-0} != 1 ]]; then
        trap 'rm -rf "$work"' EXIT
    fi
fi

install_agents "$work"
bin=$work/node_modules/.bin
for b in claude codex opencode; do
    printf '%-9s %s\n' "$b" "$("$bin/$b" --version 2>&1 | head -n1)" >&2
done

# The recorder's screen model (pyte) lives in a private virtualenv, not in the system Python.
if [[ ! -x $work/venv/bin/python ]]; then
    python3 -m venv "$work/venv"
    "$work/venv/bin/pip" install --quiet pyte
fi

"$work/venv/bin/python" "$here/agent-scenarios.py" --bin-dir "$bin" --out "$out" "$@"

# Each recorded file stays small, and nothing machine-specific leaks into it.
status=0
while IFS= read -r f; do
    echo "too large (> 300 KB): $f" >&2
    status=1
done < <(find "$out" -type f -size +300k)
host=$(hostname)
for needle in "$work" "$HOME" "$host"; do
    [[ -n $needle && $needle != / && ${#needle} -gt 3 ]] || continue
    if grep -rlF -- "$needle" "$out" >/dev/null 2>&1; then
        echo "machine-specific string '$needle' found in:" >&2
        grep -rlF -- "$needle" "$out" >&2
        status=1
    fi
done
# Prompts of every shape through desk into each agent: alone while idle, and queued mid-turn.
if [[ ${DESK_SHAPES:-1} != 0 ]]; then
    python3 "$here/e2e-shapes.py" --desk "${DESK:-$repo/target/release/desk}" --bin-dir "$bin" || status=1
fi
exit $status
