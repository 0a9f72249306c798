#!/usr/bin/env bash
# Check desk's restart-with-resume against the real coding agents (Claude Code, Codex, OpenCode),
# offline against scripts/fake-model-api.py: the conversation desk captures from each agent's own
# evidence (Claude's hooks, Codex's notify and the rollout it holds open, OpenCode's session
# list) is the one a restart resumes, and the resumed agent's next request carries the earlier
# turn. Optional: it needs the npm registry to install the agents (DESK_AGENTS_DIR reuses an
# install); desk's normal test run never calls it (it replays the recordings instead:
# tests/it/resume_corpus.rs). Findings: docs/agents-observed.md §10.
#
# Per agent, under its own DESK_HOME, with the agent declared in a desk.toml (restart on-failure):
#   a  `desk up` starts it; it reaches idle
#   b  a prompt with TOKEN-first reaches the model
#   c  desk captured a conversation id from the agent (not for OpenCode: it is read at restart)
#   d  `desk restart` resumes that conversation (not afresh)
#   e  the resumed agent's next request carries TOKEN-first
#   f  the agent killed from outside (SIGKILL) is restarted by the daemon, resuming again
#   g  that generation's next request carries TOKEN-first too
# Each step prints PASS or FAIL; the exit status is 1 if any failed.
#
# Usage: scripts/e2e-resume.sh [--agents claude,codex,opencode]
# Environment:
#   DESK              the desk binary (default: target/release/desk of this repository)
#   CLAUDE_CODE_VERSION, CODEX_VERSION, OPENCODE_VERSION   npm versions (default: the pinned ones)
#   DESK_AGENTS_DIR   where the agents are (or get) installed (default: a scratch directory)
#   DESK_RESUME_KEEP=1  keep the scratch directory for reading
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
desk=${DESK:-$repo/target/release/desk}
# shellcheck source=scripts/agents-lib.sh
. "$here/agents-lib.sh"
agents=claude,codex,opencode
while [[ $# -gt 0 ]]; do
    case $1 in
        --agents) agents=$2; shift 2 ;;
        *) echo "usage: $0 [--agents claude,codex,opencode]" >&2; exit 2 ;;
    esac
done
[[ -x $desk ]] || { echo "no desk binary at $desk (cargo build --release, or set DESK)" >&2; exit 2; }
command -v jq >/dev/null || { echo "jq is needed" >&2; exit 2; }

scratch=$(mktemp -d /tmp/desk-resume.XXXXXX)
fake_pid=
desk_homes=()
cleanup() {
    local dh
    for dh in "${desk_homes[@]}"; do
        [[ -f $dh/fleet/desk.toml ]] && DESK_HOME=$dh "$desk" down --manifest "$dh/fleet/desk.toml" >/dev/null 2>&1 || true
        DESK_HOME=$dh "$desk" serve --stop >/dev/null 2>&1 || true
    done
    [[ -n $fake_pid ]] && kill "$fake_pid" 2>/dev/null || true
    if [[ ${DESK_RESUME_KEEP:-0} == 1 ]]; then echo "kept $scratch" >&2; else rm -rf "$scratch"; fi
}
trap cleanup EXIT

install=${DESK_AGENTS_DIR:-$scratch/agents}
mkdir -p "$install"
if [[ ! -x $install/node_modules/.bin/claude || ! -x $install/node_modules/.bin/codex ||
      ! -x $install/node_modules/.bin/opencode ]]; then
    install_agents "$install"
fi
bin=$install/node_modules/.bin

start_model_standin "$scratch"

failed=0
now_ms() { date +%s%3N; }
report() { # agent step PASS|FAIL detail
    printf '%-4s %-8s %s  %s\n' "$3" "$1" "$2" "$4"
    [[ $3 == PASS ]] || failed=1
}
wait_for() {
    local deadline=$(($(now_ms) + $1 * 1000))
    shift
    until eval "$@"; do
        (($(now_ms) < deadline)) || return 1
        sleep 0.2
    done
}
# The tokens carried by the agent's own turn (a request offering tools: not a title request)
# that names $2, from offset $1 of the model stand-in's log.
carried() { tail -c +"$(($1 + 1))" "$scratch/api.jsonl" 2>/dev/null | jq -rs --arg t "$2" \
    'map(select((.user // "") | contains($t)) | select((.tools // 0) > 0)) | first | (.tokens // []) | join(" ")'; }
api_size() { stat -c %s "$scratch/api.jsonl" 2>/dev/null || echo 0; }

run_agent() {
    local agent=$1 name=$1
    local root=$scratch/$agent
    local dh=$root/desk-home home=$root/home work=$root/work
    mkdir -p "$dh/fleet" "$home" "$work"
    desk_homes+=("$dh")
    git init -q "$work"
    agent_session "$agent" "$bin" "$api" "$home" "$work"
    # The agent declared: its command, directory and environment (agent_flags is --env K=V ...).
    local manifest=$dh/fleet/desk.toml env="" i
    for ((i = 1; i < ${#agent_flags[@]}; i += 2)); do
        local kv=${agent_flags[i]}
        env+=$(printf '%s = %s, ' "$(jq -Rn --arg s "${kv%%=*}" '$s')" "$(jq -Rn --arg s "${kv#*=}" '$s')")
    done
    {
        printf '[session.%s]\nprovider = "%s"\ncwd = %s\nrestart = "on-failure"\n' "$name" "$agent" "$(jq -Rn --arg s "$work" '$s')"
        printf 'command = %s\n' "$(printf '%s\n' "${agent_cmd[@]}" | jq -Rsc 'split("\n") | map(select(. != ""))')"
        printf 'env = { %s }\n' "${env%, }"
    } >"$manifest"
    d() { DESK_HOME=$dh "$desk" "$@"; }
    row() { d ls --json | jq -c --arg n "$name" '.data[] | select(.name == $n)'; }
    activity() { row | jq -r '.state.activity.value // "none"'; }
    generation() { row | jq -r '.generation // 0'; }

    d up --manifest "$manifest" >"$root/up.out"
    if wait_for 240 '[[ $(activity) == idle ]]'; then
        report "$agent" "a up" PASS "idle"
    else
        report "$agent" "a up" FAIL "activity $(activity) after 240 s"; d peek "$name" >"$root/a.screen" 2>&1 || true; return
    fi
    local at
    at=$(api_size)
    d send "$name" "Remember this TOKEN-first" >/dev/null
    if wait_for 120 '[[ -n $(carried "$at" TOKEN-first) ]]' && wait_for 120 '[[ $(activity) == idle ]]'; then
        report "$agent" "b turn" PASS "TOKEN-first reached the model"
    else
        report "$agent" "b turn" FAIL "no request with TOKEN-first"; return
    fi
    if [[ $agent != opencode ]]; then
        if wait_for 30 '[[ $(row | jq -r ".fleet.conversation.id // empty") != "" ]]'; then
            report "$agent" "c capture" PASS "$(row | jq -r '.fleet.conversation | "\(.id) from \(.source)"')"
        else
            report "$agent" "c capture" FAIL "no conversation captured: $(d ls --json | jq -c '.data[0].fleet')"
        fi
    fi
    d restart "$name" --manifest "$manifest" >"$root/restart.out" 2>&1 || true
    if grep -q "resumed conversation" "$root/restart.out"; then
        report "$agent" "d restart" PASS "$(cat "$root/restart.out" | tail -n1)"
    else
        report "$agent" "d restart" FAIL "$(tr '\n' ' ' <"$root/restart.out")"; return
    fi
    wait_for 240 '[[ $(activity) == idle ]]' || true
    at=$(api_size)
    d send "$name" "What did I ask you to remember TOKEN-second" >/dev/null
    local tokens=""
    wait_for 120 '[[ -n $(carried "$at" TOKEN-second) ]]' && tokens=$(carried "$at" TOKEN-second)
    if [[ $tokens == *TOKEN-first* ]]; then
        report "$agent" "e resumed" PASS "the next request carried: $tokens"
    else
        report "$agent" "e resumed" FAIL "the next request carried: ${tokens:-nothing}"
    fi
    wait_for 120 '[[ $(activity) == idle ]]' || true
    local gen pid
    gen=$(generation)
    pid=$(row | jq -r '.pid')
    kill -KILL "$pid" 2>/dev/null || true
    if wait_for 120 '(( $(generation) > gen ))' && [[ $(row | jq -r '.fleet.start.resume') == resume ]]; then
        report "$agent" "f crash" PASS "restarted by its policy as generation $(generation), resuming $(row | jq -r '.fleet.start.conversation')"
    else
        report "$agent" "f crash" FAIL "generation $(generation), start $(row | jq -c '.fleet.start'), health $(row | jq -r '.fleet.health')"; return
    fi
    wait_for 240 '[[ $(activity) == idle ]]' || true
    at=$(api_size)
    d send "$name" "And now TOKEN-third" >/dev/null
    tokens=""
    wait_for 120 '[[ -n $(carried "$at" TOKEN-third) ]]' && tokens=$(carried "$at" TOKEN-third)
    if [[ $tokens == *TOKEN-first* ]]; then
        report "$agent" "g resumed" PASS "the next request carried: $tokens"
    else
        report "$agent" "g resumed" FAIL "the next request carried: ${tokens:-nothing}"
    fi
    d down --manifest "$manifest" >/dev/null 2>&1 || true
    d serve --stop >/dev/null 2>&1 || true
}

IFS=, read -r -a list <<<"$agents"
for agent in "${list[@]}"; do
    case $agent in
        claude | codex | opencode) run_agent "$agent" ;;
        *) echo "unknown agent $agent" >&2; exit 2 ;;
    esac
done
if ((failed)); then echo "FAIL"; else echo "PASS"; fi
exit $failed
