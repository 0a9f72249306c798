#!/usr/bin/env bash
# A fleet of N idle sessions, then `desk serve` starts and delivers a prompt: the measurement of
# docs/benchmarks.md §21 (masters once held an inotify instance each, and at Linux's default of
# 128 per user a fleet of 128 sessions kept `desk serve`, `desk dash` and `desk events --all`
# from starting). Prints how many inotify instances the fleet's masters hold, how long the
# fleet took to start, and how long `desk serve` took from its start to the prompt in the
# agent's log.
#
# Usage: scripts/inotify-fleet.sh [N]        (N defaults to 200)
#   BIN=target/release     where desk, desk-master and desk-demo-agent are
#   LIMIT=K                run it all in a user namespace of its own whose inotify limit is K
#                          (/proc/sys/user/max_inotify_instances): the limit of a user who has
#                          K instances left, without taking any from this machine's user
# Everything it starts runs under a temporary DESK_HOME and is killed by pid at the end.
set -euo pipefail
N=${1:-200}
BIN=${BIN:-target/release}
export DESK=$(realpath "$BIN/desk") DEMO=$(realpath "$BIN/desk-demo-agent") N
if [ -n "${LIMIT:-}" ] && [ -z "${INSIDE:-}" ]; then
    exec unshare --user --map-root-user -- env INSIDE=1 sh -c \
        "echo $LIMIT > /proc/sys/user/max_inotify_instances && exec bash '$0' '$N'"
fi
home=$(mktemp -d /tmp/dkfleet.XXXXXX)
export DESK_HOME=$home DESK_AUTOSTART=0
# The pids of field $1 (master_pid, pid) in the session records under $2.
pids_of() {
    python3 - "$1" $2 <<'PY'
import json, sys
for f in sys.argv[2:]:
    try:
        print(json.load(open(f))[sys.argv[1]])
    except Exception:
        pass
PY
}
cleanup() {
    [ -f "$home/state/delivery/serve.lock" ] && kill -9 "$(cat "$home/state/delivery/serve.lock")" 2>/dev/null || true
    for pid in $(pids_of master_pid "$home/run/*.json") $(pids_of pid "$home/run/*.json"); do
        kill -9 "$pid" 2>/dev/null || true
    done
    rm -rf "$home"
}
trap cleanup EXIT
now() { date +%s.%N; }
t0=$(now)
for i in $(seq 1 "$N"); do "$DESK" new "s$i" -- sleep 100000 >/dev/null || { echo "desk new s$i failed"; exit 1; }; done
t1=$(now)
held=0
for pid in $(pids_of master_pid "$home/run/s*.json"); do
    n=$(find "/proc/$pid/fd" -lname 'anon_inode:inotify' 2>/dev/null | wc -l)
    held=$((held + n))
done
"$DESK" new agent --provider demo -- "$DEMO" --prompt-log "$home/agent.prompts" >/dev/null
t2=$(now)
serve=$("$DESK" serve 2>&1) || { echo "desk serve failed: $serve"; exit 1; }
"$DESK" send agent "hello from a fleet of $N" >/dev/null
until grep -q "hello from a fleet" "$home/agent.prompts" 2>/dev/null; do
    if [ "$(echo "$(now) - $t2 > 60" | bc)" = 1 ]; then echo "the prompt did not arrive in 60 s"; exit 1; fi
    sleep 0.05
done
t3=$(now)
printf 'sessions %s, inotify instances held by their masters %s\n' "$N" "$held"
printf 'fleet started in %.1f s; desk serve started and delivered in %.2f s\n' \
    "$(echo "$t1 - $t0" | bc)" "$(echo "$t3 - $t2" | bc)"
