#!/bin/sh
# `make demo`: `desk up` on the demo manifest (scripts/demo.toml: three demo agents, one in a git
# worktree, the #release channel), a kickoff message in the channel, then the dashboard (`desk
# dash`) over them. `make demo-stop` ends it (`desk down`). DESK_HOME (set by the Makefile) keeps
# the demo's files, its scratch repository and worktree out of your own desk state.
set -eu
bin="$1"
action="${2:-start}"
here=$(cd "$(dirname "$0")" && pwd)
# This build's desk and demo agent come first on PATH (the manifest names `desk-demo-agent`), so
# everything below (and every hint it prints) says plain `desk`, as you will type it.
PATH="$bin:$PATH"
export PATH
demo="$DESK_HOME/demo"
manifest="$demo/desk.toml"

if [ "$action" = stop ]; then
    if [ -f "$manifest" ]; then
        desk down --manifest "$manifest" --remove-worktree || true
        for s in demo-alpha demo-beta demo-gamma; do desk rm "$s" >/dev/null 2>&1 || true; done
    fi
    desk serve --stop >/dev/null 2>&1 || true
    echo "demo fleet stopped"
    exit 0
fi

# The manifest beside a scratch repository for demo-gamma's worktree (made once).
mkdir -p "$demo"
cp "$here/demo.toml" "$manifest"
if [ ! -d "$demo/repo/.git" ]; then
    mkdir -p "$demo/repo"
    git -C "$demo/repo" init -q -b main
    printf '# demo repository\n\nThe changelog demo-gamma tidies.\n' > "$demo/repo/CHANGELOG.md"
    git -C "$demo/repo" add CHANGELOG.md
    git -C "$demo/repo" -c user.name=desk-demo -c user.email=demo@desk.invalid commit -q -m "first"
fi

echo "== desk up --manifest $manifest"
desk up --manifest "$manifest"

echo "== a kickoff message in #release"
desk channel post release "Kickoff: who takes the changelog, the tests and the docs?" >/dev/null

# Let the prompts land before showing the fleet.
sleep 2
echo
desk ls
echo
desk queue
echo
desk channel read release
cat <<MSG

To use this desk on the demo fleet from your shell, paste this line (or run: make demo-shell):

    export PATH="$bin:\$PATH" DESK_HOME="$DESK_HOME"

Then try:
      desk dash                  (the fleet dashboard; q quits, the fleet keeps running)
      desk explain demo-beta     (it is blocked on an approval dialog)
      desk restart demo-alpha    (it comes back resuming its conversation: desk peek demo-alpha)
      desk send demo-alpha crash-now   (it crashes; its restart policy brings it back)
      desk events demo-alpha -f  (follow its events; Ctrl-C to stop)
      desk attach demo-beta      (answer its dialog with Enter; detach with Ctrl-\\)
      desk channel read release -f   (the agents' replies come in as their turns end)
      desk channel post release "@demo-alpha and the release notes?"
      desk worktree ls --manifest "\$DESK_HOME/demo/desk.toml"   (demo-gamma's git worktree)
      desk up --manifest "\$DESK_HOME/demo/desk.toml"   (nothing to do: it runs as declared)
      desk new sh1 -- bash; desk attach sh1   (a shell of your own beside the agents)
      desk doctor                (is everything in place: executables, directories, agents)
      make demo-stop             (end the demo)
MSG
if [ -t 0 ] && [ -t 1 ]; then
    printf '\nOpening the dashboard in 3 s: q quits it, the fleet keeps running (Enter attaches,\n'
    printf 'Ctrl-\\ detaches back to it; n jumps to the agent that needs you)...\n'
    sleep 3
    exec desk dash
fi
