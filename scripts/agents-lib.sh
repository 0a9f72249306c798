# Sourced by scripts/e2e-agents.sh and scripts/e2e-keys.sh: the agent versions desk's corpus was
# recorded with (tests/data/agents/README.md), and their install. Not a script of its own.

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
