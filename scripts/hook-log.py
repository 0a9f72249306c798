#!/usr/bin/env python3
"""Append one agent hook invocation to a JSON-lines log, and do nothing else.

Usage: hook-log.py LOGFILE LABEL [ARGS...]

Wired as the command of every Claude Code hook (stdin carries the hook's JSON), as Codex's
`notify` program (the JSON is the last argument) and as Codex hooks (stdin). It writes
{"t": epoch seconds, "label": LABEL, "argv": [ARGS...], "stdin": <parsed JSON or text>,
"env": {names of CLAUDE*/CODEX*/OPENCODE* variables it saw, with CLAUDE_PROJECT_DIR's value}}
and prints nothing, so that the agent takes no decision from it (exit 0, empty stdout).
Standard input is read only when it is not a terminal, so the hook can never steal keystrokes.
"""

import json
import os
import select
import sys
import time


def main():
    if len(sys.argv) < 3:
        sys.stderr.write(__doc__)
        return 0
    log, label, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    stdin = None
    try:
        if not os.isatty(0):
            r, _, _ = select.select([0], [], [], 2.0)
            if r:
                raw = sys.stdin.buffer.read()
                text = raw.decode("utf-8", "replace")
                try:
                    stdin = json.loads(text) if text.strip() else None
                except ValueError:
                    stdin = text
    except (OSError, ValueError):
        pass
    parsed_args = []
    for a in args:
        try:
            parsed_args.append(json.loads(a) if a[:1] in "{[" else a)
        except ValueError:
            parsed_args.append(a)
    env = {}
    for k, v in sorted(os.environ.items()):
        if k.startswith(("CLAUDE", "CODEX", "OPENCODE")):
            env[k] = v if k in ("CLAUDE_PROJECT_DIR", "CLAUDE_CODE_ENTRYPOINT") else "(set)"
    entry = {"t": round(time.time(), 3), "label": label, "argv": parsed_args, "stdin": stdin, "env": env}
    with open(log, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
