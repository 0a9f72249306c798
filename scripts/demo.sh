#!/bin/sh
# `make demo`: a small fleet of demo agents under desk, a few prompts delivered to them, then the
# dashboard (`desk dash`) over them. `make demo-stop` ends it. DESK_HOME (set by the Makefile)
# keeps the demo's files out of your own desk state.
set -eu
bin="$1"
action="${2:-start}"
# This build's desk and demo agent come first on PATH, so everything below (and every hint it
# prints) says plain `desk`, as you will type it.
PATH="$bin:$PATH"
export PATH
desk=desk
agent=desk-demo-agent
fleet="demo-alpha demo-beta demo-gamma"

if [ "$action" = stop ]; then
    for s in $fleet; do
        "$desk" kill "$s" --grace 2 >/dev/null 2>&1 || true
        "$desk" rm "$s" >/dev/null 2>&1 || true
    done
    for s in $fleet; do
        "$desk" channel remove release "$s" >/dev/null 2>&1 || true
    done
    "$desk" serve --stop >/dev/null 2>&1 || true
    echo "demo fleet stopped"
    exit 0
fi

echo "== desk serve (the delivery daemon)"
"$desk" serve 2>/dev/null || echo "already running"

echo "== starting the fleet: $fleet"
for s in $fleet; do
    # Forget an exited session of the same name (a running one is kept, and reused).
    "$desk" rm "$s" >/dev/null 2>&1 || true
    # Each agent answers a channel's root messages in their thread (desk channel post).
    "$desk" new "$s" --provider demo -- "$agent" --prompt-log "$DESK_HOME/$s.prompts" \
        --title "$s" --work-ms 6000 --reply-lines 4 --channel-reply root \
        --channel-reply-text "{me} on {message}: on it @human" 2>/dev/null || echo "$s is already running"
done

echo "== a channel: the fleet and you (human) in #release"
"$desk" channel new release --goal "ship the demo release" >/dev/null 2>&1 || true
for s in $fleet; do
    "$desk" channel add release "$s" >/dev/null
done
"$desk" channel post release "Kickoff: who takes the changelog, the tests and the docs?" >/dev/null

echo "== sending prompts (desk send prints each item's id)"
"$desk" send demo-alpha "Summarise the repository layout in three bullet points."
"$desk" send demo-beta "Run the test suite - approve-me - and report failures."
"$desk" send demo-gamma --when idle "When you are idle: tidy the changelog."
"$desk" send demo-gamma "Meanwhile, list the open issues."

# Let the prompts land before showing the fleet.
sleep 2
echo
"$desk" ls
echo
"$desk" queue
echo
"$desk" channel read release
cat <<MSG

To use this desk on the demo fleet from your shell, paste this line (or run: make demo-shell):

    export PATH="$bin:\$PATH" DESK_HOME="$DESK_HOME"

Then try:
      desk dash                  (the fleet dashboard; q quits, the fleet keeps running)
      desk explain demo-beta     (it is blocked on an approval dialog)
      desk events demo-alpha -f  (follow its events; Ctrl-C to stop)
      desk send demo-alpha "another prompt"; desk item <id>
      desk attach demo-beta      (answer its dialog with Enter; detach with Ctrl-\\)
      desk channel read release -f   (the agents' replies come in as their turns end)
      desk channel post release "@demo-alpha and the release notes?"
      desk new sh1 -- bash; desk attach sh1   (a shell of your own beside the agents)
      desk doctor                (is everything in place: executables, directories, agents)
      make demo-stop             (end the demo)
MSG
if [ -t 0 ] && [ -t 1 ]; then
    printf '\nOpening the dashboard in 3 s: q quits it, the fleet keeps running (Enter attaches,\n'
    printf 'Ctrl-\\ detaches back to it; n jumps to the agent that needs you)...\n'
    sleep 3
    exec "$desk" dash
fi
