# Sourced by scripts/e2e-agents.sh, e2e-keys.sh and e2e-shapes.sh: the agent versions desk's corpus
# was recorded with (tests/data/agents/README.md), their install, and their set-up for a session
# under desk. Not a script of its own.

# npm versions; the environment may ask for others ("latest" to try new releases).
claude_v=${CLAUDE_CODE_VERSION:-2.1.197}
codex_v=${CODEX_VERSION:-0.171.0}
opencode_v=${OPENCODE_VERSION:-1.18.33}

# install_agents DIR: the three agents at those versions into DIR/node_modules, with npm.
install_agents() {
    echo "installing agents into $1" >&2
    (
        cd "$1"
        [[ -f package.json ]] || npm init -y >/dev/null
        npm install --no-fund --no-audit \
            "@anthropic-ai/claude-code@$claude_v" "@openai/codex@$codex_v" "opencode-ai@$opencode_v" >&2
    )
}

# agent_session AGENT BIN API HOME WORK: set AGENT (claude, codex or opencode) up to run under desk
# offline against the model stand-in at API (http://127.0.0.1:PORT), with HOME as its home and
# WORK (trusted) as its working directory, touching no global config. Sets agent_cmd (the
# command) and agent_flags (`desk new` --env flags: HOME, a plain PATH, LANG, and the agent's
# own variables).
agent_session() {
    local agent=$1 bin=$2 api=$3 home=$4 work=$5
    local -a env
    case $agent in
        claude)
            printf '{"hasCompletedOnboarding": true, "projects": {"%s": {"hasTrustDialogAccepted": true}}}\n' \
                "$work" >"$home/.claude.json"
            env=(ANTHROPIC_BASE_URL="$api" ANTHROPIC_AUTH_TOKEN=fake-token
                 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1
                 DISABLE_AUTOUPDATER=1 DISABLE_ERROR_REPORTING=1)
            agent_cmd=("$bin/claude")
            ;;
        codex)
            mkdir -p "$home/.codex"
            cat >"$home/.codex/config.toml" <<EOF
model = "fake-model"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "Fake"
base_url = "$api/v1"
env_key = "FAKE_API_KEY"
wire_api = "responses"

[projects."$work"]
trust_level = "trusted"
EOF
            env=(CODEX_HOME="$home/.codex" FAKE_API_KEY=fake-key)
            agent_cmd=("$bin/codex" --no-daemon)
            ;;
        opencode)
            mkdir -p "$home/desk-opencode"
            cat >"$home/desk-opencode/opencode.json" <<EOF
{"provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
   "options": {"baseURL": "$api/v1", "apiKey": "fake-key"},
   "models": {"fake-model": {"name": "Fake Model", "tool_call": true}}}},
 "model": "fake/fake-model", "small_model": "fake/fake-model",
 "autoupdate": false, "share": "disabled",
 "permission": {"bash": "ask", "edit": "ask"}}
EOF
            env=(OPENCODE_CONFIG_DIR="$home/desk-opencode" OPENCODE_DISABLE_MODELS_FETCH=1
                 OPENCODE_DISABLE_AUTOUPDATE=1)
            agent_cmd=("$bin/opencode")
            ;;
        *) echo "agent_session: unknown agent $agent" >&2; return 2 ;;
    esac
    agent_flags=(--env "HOME=$home" --env "PATH=/usr/local/bin:/usr/bin:/bin" --env LANG=C.UTF-8)
    local e
    for e in "${env[@]}"; do agent_flags+=(--env "$e"); done
}

# start_model_standin DIR: scripts/fake-model-api.py on a port of its own, logging into
# DIR/api.jsonl (DIR/fake.log: its stderr). Sets fake_pid and api (http://127.0.0.1:PORT).
start_model_standin() {
    local dir=$1 lib
    lib=$(dirname "${BASH_SOURCE[0]}")
    python3 "$lib/fake-model-api.py" --port 0 --port-file "$dir/port" --delay 1 --quiet \
        --log "$dir/api.jsonl" >"$dir/fake.log" 2>&1 &
    fake_pid=$!
    for _ in $(seq 100); do [[ -s $dir/port ]] && break; sleep 0.1; done
    [[ -s $dir/port ]] || { echo "the model stand-in did not start" >&2; return 1; }
    api=http://127.0.0.1:$(cat "$dir/port")
}
