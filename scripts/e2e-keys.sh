#!/usr/bin/env bash
# Check `desk keys` and `[notify] command` against the real coding agents (Claude Code, Codex,
# OpenCode), offline against scripts/fake-model-api.py. Optional: it needs the npm registry to
# install the agents (and OpenCode fetches one npm package on its first start); desk's normal
# test run never calls it. Findings: docs/agents-observed.md, section 8.
#
# Per agent, under its own DESK_HOME with `desk serve` running and a notify command that appends
# its JSON to a file:
#   a  the agent reaches idle
#   b  a DESK_TOOL prompt (desk send) makes it show its approval dialog; desk says blocked
#   c  the notify command gets a `blocked` notification
#   d  `desk keys NAME Enter` approves: the tool's file appears; desk goes working -> idle
#   e  a second DESK_TOOL prompt answered "No" with keys (Claude/Codex: Down Down Enter,
#      OpenCode: Right Right Enter): no file, desk idle again (not stuck blocked)
#   f  a third DESK_TOOL prompt dismissed with `desk keys NAME Esc`: no file, desk idle again
#   h  `desk inbox --json` reads a DESK_TOOL dialog (what it asks, its options) and `desk approve
#      NAME --seen FP` answers it with the agent's own keys: the tool runs, desk idle again
#   i  the same dialog refused with `desk deny NAME --seen FP`: no file, desk idle again
#   j  a dialog that changes between listing and answering (Esc, then another command): the
#      approve with the first listing's fingerprint is refused (dialog-changed), nothing typed
#   g  `desk kill NAME` sends no `exited` notification (a requested stop)
# Each step prints PASS or FAIL with its timing; the exit status is 1 if any failed.
#
# Usage: scripts/e2e-keys.sh [--agents claude,codex,opencode]
# Environment:
#   DESK              the desk binary (default: target/release/desk of this repository)
#   CLAUDE_CODE_VERSION, CODEX_VERSION, OPENCODE_VERSION   npm versions (default: the pinned ones)
#   DESK_AGENTS_DIR   where the agents are (or get) installed (default: a scratch directory,
#                     removed at the end)
#   DESK_KEYS_KEEP=1  keep the scratch directory (desk homes, notify logs, screens) for reading
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

scratch=$(mktemp -d /tmp/desk-keys.XXXXXX)
fake_pid=
desk_homes=()
cleanup() {
    local dh s
    for dh in "${desk_homes[@]}"; do
        for s in $(DESK_HOME=$dh "$desk" ls --json 2>/dev/null |
                   jq -r '.data[] | select(.status == "running") | .name' 2>/dev/null); do
            DESK_HOME=$dh "$desk" kill "$s" --grace 3 >/dev/null 2>&1 || true
        done
        DESK_HOME=$dh "$desk" serve --stop >/dev/null 2>&1 || true
    done
    [[ -n $fake_pid ]] && kill "$fake_pid" 2>/dev/null || true
    if [[ ${DESK_KEYS_KEEP:-0} == 1 ]]; then
        echo "kept $scratch" >&2
    else
        rm -rf "$scratch"
    fi
}
trap cleanup EXIT

if [[ -n ${DESK_AGENTS_DIR:-} ]]; then
    install=$DESK_AGENTS_DIR
else
    install=$scratch/agents
fi
mkdir -p "$install"
if [[ ! -x $install/node_modules/.bin/claude || ! -x $install/node_modules/.bin/codex ||
      ! -x $install/node_modules/.bin/opencode ]]; then
    install_agents "$install"
fi
bin=$install/node_modules/.bin

# The model stand-in, on a port of its own.
start_model_standin "$scratch"

# The notify command: one line per notification, with the time it ran.
cat >"$scratch/notify.sh" <<'EOF'
#!/bin/sh
line=$(cat)
printf '{"recv_ms":%s,"n":%s}\n' "$(date +%s%3N)" "$line" >>"$1"
EOF
chmod +x "$scratch/notify.sh"

failed=0
now_ms() { date +%s%3N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f s", (b - a) / 1000 }'; }
report() { # agent step PASS|FAIL detail
    printf '%-4s %-8s %s  %s\n' "$3" "$1" "$2" "$4"
    [[ $3 == PASS ]] || failed=1
}

# Poll COMMAND (evaluated) until it succeeds or SECONDS pass.
wait_for() {
    local deadline=$(($(now_ms) + $1 * 1000))
    shift
    until eval "$@"; do
        (($(now_ms) < deadline)) || return 1
        sleep 0.1
    done
}

run_agent() {
    local agent=$1 name=$1
    local root=$scratch/$agent
    local dh=$root/desk-home home=$root/home work=$root/work notes=$root/notify.jsonl
    mkdir -p "$dh/config" "$home" "$work"
    desk_homes+=("$dh")
    git init -q "$work"
    printf '[notify]\ncommand = %s\n' "'$scratch/notify.sh $notes'" >"$dh/config/config.toml"
    d() { DESK_HOME=$dh "$desk" "$@"; }
    activity() { d ls --json | jq -r --arg n "$name" '.data[] | select(.name == $n) | .state.activity.value // "none"'; }
    act_since() { d ls --json | jq -r --arg n "$name" '.data[] | select(.name == $n) | .state.activity.since_ms'; }
    last_seq() { d events "$name" --json | jq -s 'map(.seq) | max // 0'; }
    # The activity values desk recorded after sequence number $1, in order.
    transitions() {
        d events "$name" --json --since "$1" --type state |
            jq -rs 'map(select(.axis == "activity") | .to) | join(" -> ")'
    }
    blocked_notes() { [[ -f $notes ]] && jq -s --arg n "$name" 'map(select(.n.kind == "blocked" and .n.session == $n)) | length' "$notes" || echo 0; }

    agent_session "$agent" "$bin" "$api" "$home" "$work"
    local -a no_keys
    case $agent in
        opencode) no_keys=(Right Right Enter) ;;
        *) no_keys=(Down Down Enter) ;;
    esac

    d serve >/dev/null
    local t0 t1
    t0=$(now_ms)
    d new "$name" --provider "$agent" --cwd "$work" "${agent_flags[@]}" -- "${agent_cmd[@]}" >/dev/null
    # a. idle (OpenCode's first start installs an npm package into its config dir: up to a minute)
    if wait_for 180 '[[ $(activity) == idle ]]'; then
        report "$agent" "a idle" PASS "$(secs "$t0" "$(act_since)") after desk new"
    else
        report "$agent" "a idle" FAIL "activity $(activity) after 180 s"
        d peek "$name" >"$root/a.screen" 2>&1 || true
        return
    fi

    # Three turns that each ask to run `touch desk-approved.txt`, answered differently.
    local turn keys_label seq tb tk n0 detail
    for turn in approve no escape; do
        rm -f "$work/desk-approved.txt"
        seq=$(last_seq)
        n0=$(blocked_notes)
        t0=$(now_ms)
        d send "$name" "DESK_TOOL please run the command (TOKEN-$turn)" >/dev/null
        if ! wait_for 90 '[[ $(activity) == blocked ]]'; then
            report "$agent" "b blocked ($turn)" FAIL "activity $(activity) after 90 s: $(transitions "$seq")"
            d peek "$name" >"$root/b-$turn.screen" 2>&1 || true
            return
        fi
        tb=$(act_since)
        d peek "$name" >"$root/dialog-$turn.screen"
        local ckm
        ckm=$(d peek "$name" --json | jq -r '.data.modes.app_cursor_keys')
        report "$agent" "b blocked ($turn)" PASS "$(secs "$t0" "$tb") after send; $(transitions "$seq"); app cursor keys $ckm"
        if [[ $turn == approve ]]; then
            # c. the notify command runs (only the first time: one kind per minute per session)
            if wait_for 30 '(( $(blocked_notes) > n0 ))'; then
                detail=$(jq -rs --arg n "$name" 'map(select(.n.kind == "blocked" and .n.session == $n)) | last |
                    "\(.n.message) (wait \(.n.state.wait))"' "$notes")
                local recv
                recv=$(jq -s --arg n "$name" 'map(select(.n.kind == "blocked" and .n.session == $n)) | last | .recv_ms' "$notes")
                report "$agent" "c notify" PASS "$(secs "$tb" "$recv") after blocked: $detail"
            else
                report "$agent" "c notify" FAIL "no blocked notification within 30 s"
            fi
        fi
        case $turn in
            approve) keys=(Enter) ;;
            no) keys=("${no_keys[@]}") ;;
            escape) keys=(Esc) ;;
        esac
        keys_label="keys ${keys[*]}"
        seq=$(last_seq)
        tk=$(now_ms)
        d keys "$name" "${keys[@]}" >/dev/null
        if [[ $turn == approve ]]; then
            # d. approved: the tool runs, desk goes working -> idle
            if wait_for 30 '[[ -e $work/desk-approved.txt ]]'; then
                t1=$(now_ms)
                if ! wait_for 60 '[[ $(activity) == idle ]]'; then
                    report "$agent" "d $keys_label" FAIL "file made, but activity $(activity) after 60 s: $(transitions "$seq")"
                elif [[ $(transitions "$seq") != working* ]]; then
                    report "$agent" "d $keys_label" FAIL "file made, idle, but not working first: $(transitions "$seq")"
                else
                    report "$agent" "d $keys_label" PASS "file $(secs "$tk" "$t1"), idle $(secs "$tk" "$(act_since)") after keys; $(transitions "$seq")"
                fi
            else
                report "$agent" "d $keys_label" FAIL "no desk-approved.txt within 30 s; activity $(activity): $(transitions "$seq")"
                d peek "$name" >"$root/d.screen" 2>&1 || true
            fi
        else
            # e/f. refused: no file, desk idle again (not left blocked)
            local step=e
            [[ $turn == escape ]] && step=f
            if wait_for 30 '[[ $(activity) == idle ]]'; then
                t1=$(act_since)
                # the tool would have run by now; give it a moment all the same
                wait_for 2 '[[ -e $work/desk-approved.txt ]]' || true
                if [[ -e $work/desk-approved.txt ]]; then
                    report "$agent" "$step $keys_label" FAIL "desk-approved.txt was made: the tool ran"
                elif d peek "$name" | grep -qE 'Do you want to proceed|Would you like to run|Permission required'; then
                    report "$agent" "$step $keys_label" FAIL "desk says idle but the dialog is on screen"
                else
                    report "$agent" "$step $keys_label" PASS "idle $(secs "$tk" "$t1") after keys, no file; $(transitions "$seq")"
                fi
            else
                report "$agent" "$step $keys_label" FAIL "activity $(activity) 30 s after keys: $(transitions "$seq")"
                d peek "$name" >"$root/$step.screen" 2>&1 || true
            fi
        fi
    done
    # h-j. The approvals inbox.
    listing() { d inbox --json | jq -c --arg n "$name" '.data[] | select(.session == $n)'; }
    ask_file() { # FILE: a turn that asks to run `touch FILE`; true once desk says blocked
        d send "$name" "DESK_TOOL DESK_TOOL_FILE=$1 please run the command (TOKEN-$1)" >/dev/null
        wait_for 90 '[[ $(activity) == blocked ]]'
    }
    local open fp fp2 out answer
    for turn in approve deny; do
        local file=desk-inbox-$turn.txt step=h
        [[ $turn == deny ]] && step=i
        rm -f "$work/$file"
        seq=$(last_seq)
        if ! ask_file "$file"; then
            report "$agent" "$step inbox $turn" FAIL "not blocked after 90 s: $(transitions "$seq")"
            d peek "$name" >"$root/$step.screen" 2>&1 || true
            continue
        fi
        open=$(listing)
        fp=$(jq -r '.fingerprint // empty' <<<"$open")
        detail="asks $(jq -r '.asks' <<<"$open"); options $(jq -r '[.options[] | "\(.number). \(.label)"] | join(" / ")' <<<"$open")"
        if [[ -z $fp ]] || ! jq -e --arg f "touch $file" '.asks | contains($f)' <<<"$open" >/dev/null; then
            report "$agent" "$step inbox $turn" FAIL "the inbox did not read the dialog: ${open:-nothing listed}"
            d peek "$name" >"$root/$step.screen" 2>&1 || true
            d keys "$name" Esc >/dev/null 2>&1 || true
            wait_for 30 '[[ $(activity) == idle ]]' || true
            continue
        fi
        tk=$(now_ms)
        if [[ $turn == approve ]]; then
            out=$(d approve "$name" --seen "$fp" --json 2>&1) || true
        else
            out=$(d deny "$name" --seen "$fp" --json 2>&1) || true
        fi
        answer="keys $(jq -r '.data.keys | join(" ")' <<<"$out" 2>/dev/null), gone after $(jq -r '.data.gone_after_ms' <<<"$out" 2>/dev/null) ms"
        if ! jq -e '.data.gone_after_ms != null' <<<"$out" >/dev/null 2>&1; then
            report "$agent" "$step inbox $turn" FAIL "$detail; the answer: $out"
        elif ! wait_for 60 '[[ $(activity) == idle ]]'; then
            report "$agent" "$step inbox $turn" FAIL "$detail; $answer; activity $(activity) after 60 s"
        elif [[ $turn == approve && ! -e $work/$file ]]; then
            report "$agent" "$step inbox $turn" FAIL "$detail; $answer; idle but no $file: the tool did not run"
        elif [[ $turn == deny ]] && { wait_for 2 '[[ -e $work/$file ]]' || [[ -e $work/$file ]]; }; then
            report "$agent" "$step inbox $turn" FAIL "$detail; $answer; $file was made: the tool ran"
        else
            report "$agent" "$step inbox $turn" PASS "$detail; $answer; idle $(secs "$tk" "$(act_since)") after the answer"
        fi
    done
    # j. the dialog listed goes (Esc) and another one comes before the answer
    rm -f "$work/desk-first.txt" "$work/desk-second.txt"
    seq=$(last_seq)
    if ask_file desk-first.txt && fp=$(listing | jq -r '.fingerprint') && [[ -n $fp ]] &&
        d keys "$name" Esc >/dev/null && wait_for 30 '[[ $(activity) == idle ]]' && ask_file desk-second.txt; then
        open=$(listing)
        fp2=$(jq -r '.fingerprint' <<<"$open")
        out=$(d approve "$name" --seen "$fp" --json 2>/dev/null) && answer=typed || answer=refused
        local code
        code=$(jq -r '.error.code // "none"' <<<"$out")
        sleep 2 # the keys, had any been typed, would have run the tool by now
        if [[ $answer == typed || $code != dialog-changed ]]; then
            report "$agent" "j changed dialog" FAIL "answer $answer ($code): $out"
        elif [[ -e $work/desk-second.txt || $(activity) != blocked ]]; then
            report "$agent" "j changed dialog" FAIL "refused, but the tool ran or the dialog went: activity $(activity)"
        else
            report "$agent" "j changed dialog" PASS "refused: $(jq -r '.error.message' <<<"$out")"
        fi
        d deny "$name" --seen "$fp2" >/dev/null 2>&1 || true
        wait_for 30 '[[ $(activity) == idle ]]' || true
    else
        report "$agent" "j changed dialog" FAIL "could not set up the two dialogs: activity $(activity): $(transitions "$seq")"
        d peek "$name" >"$root/j.screen" 2>&1 || true
    fi
    # g. `desk kill` is a requested stop: no `exited` notification, whatever code the agent
    #    exits with after its SIGTERM
    t0=$(now_ms)
    d kill "$name" --grace 5 >/dev/null 2>&1 || true
    local code
    code=$(d ls --json | jq -r --arg n "$name" '.data[] | select(.name == $n) | "code \(.exit.code) signal \(.exit.signal)"')
    if wait_for 3 '[[ -f $notes ]] && jq -e -s --arg n "$name" "any(.n.kind == \"exited\" and .n.session == \$n)" "$notes" >/dev/null'; then
        report "$agent" "g kill" FAIL "an exited notification for desk kill ($code): $(jq -r -s 'last | .n.message' "$notes")"
    else
        report "$agent" "g kill" PASS "no exited notification ($code; $(secs "$t0" "$(now_ms)"))"
    fi
    d events "$name" --json >"$root/events.jsonl" 2>&1 || true
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
