#!/usr/bin/env python3
"""Check that prompts of every shape reach the real agents exactly once and whole, through desk.

Part of `make e2e-agents`. Per agent (Claude Code, Codex, OpenCode; offline against
scripts/fake-model-api.py, set up by scripts/agents-lib.sh's agent_session), under its own
DESK_HOME with `desk serve` running, for each shape of scripts/prompt_shapes.py:

  alone   `desk send` while the agent is idle: the item must end `delivered`, and the model
          stand-in must receive exactly one request whose user text is the prompt (leading and
          trailing blank lines aside: every agent trims them), nothing more, nothing less;
  queued  `desk send` of a turn that takes 8 s, then, while it runs, the shape and a second
          short message, queued together (the session paused while they are sent, resumed
          mid-turn: otherwise Claude Code and OpenCode, which desk types into mid-turn, would
          get the first alone before the second came): both items must end `delivered` as one
          digest, and exactly one request must carry the digest, holding each message whole,
          once, in order.

and, for the shapes in UNSENT_SHAPES, desk's own paste left unsent in the box (issue 24):

  force   the agent's process group is stopped (SIGSTOP) while desk pastes, so the item ends
          `paste-missing`; it goes on (SIGCONT) and the paste lands in its box: the item must come
          to say it sits there unsent, and `desk force` must press Enter only — the stand-in
          receives it once and whole;
  drop    the same, then `desk drop`: it must say it cleared the box, and the agent must receive
          nothing of it.

Prints one PASS/FAIL line per check and a table; writes the results as JSON (--out). Exit
status 1 if any check failed.

Usage: e2e-shapes.py --desk target/release/desk --bin-dir DIR/node_modules/.bin
                     [--agents claude,codex,opencode] [--shapes paragraphs,...] [--out FILE]
                     [--keep]
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from prompt_shapes import SHAPES, text_of  # noqa: E402

# Generous: OpenCode took 50-100 s to draw its input box on a loaded 2-core machine.
READY_TIMEOUT = 180
# A delivery settles within its windows (4 s echo, 3 × 2.5 s submit); a turn of the stand-in
# takes 1 s plus the agent's own overhead (OpenCode: up to 40 s from Enter to request under load).
SETTLE_TIMEOUT = 90
LONG_TURN = 8


class Session:
    def __init__(self, desk, root, name):
        self.desk, self.root, self.name = desk, root, name
        self.home = os.path.join(root, "desk-home")
        os.makedirs(self.home, exist_ok=True)

    def run(self, *args, stdin=None, check=True):
        env = dict(os.environ, DESK_HOME=self.home)
        p = subprocess.run([self.desk, *args], input=stdin, capture_output=True, text=True, env=env)
        if check and p.returncode != 0:
            raise RuntimeError("desk %s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr.strip()))
        return p

    def json(self, *args):
        return json.loads(self.run(*args, "--json").stdout)

    def activity(self):
        for s in self.json("ls")["data"]:
            if s["name"] == self.name:
                return (s.get("state") or {}).get("activity", {}).get("value")
        return None

    def send(self, text):
        return self.run("send", self.name, "--file", "-", stdin=text).stdout.strip()

    def item(self, item_id):
        return self.json("item", item_id)["data"]


def wait_for(what, timeout, check, step=0.2):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(step)


class Api:
    """The model stand-in, on a port of its own, logging every request's whole user text."""

    def __init__(self, scratch):
        self.log = os.path.join(scratch, "api.jsonl")
        port_file = os.path.join(scratch, "port")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "fake-model-api.py"), "--port", "0", "--port-file", port_file,
             "--delay", "1", "--quiet", "--log-text", "--log", self.log, "--write-dir", scratch],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for("the model stand-in to start", 10, lambda: os.path.exists(port_file) and os.path.getsize(port_file))
        with open(port_file) as f:
            self.url = "http://127.0.0.1:%s" % f.read().strip()

    def requests(self):
        try:
            with open(self.log) as f:
                return [json.loads(line) for line in f if line.strip() and '"api"' in line]
        except FileNotFoundError:
            return []

    def idle(self):
        """Every request answered."""
        try:
            with open(self.log) as f:
                entries = [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return True
        started = {e["req"] for e in entries if "api" in e}
        done = {e["req"] for e in entries if e.get("done") or e.get("error")}
        return started <= done

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def settled(session, ids):
    items = [session.item(i) for i in ids]
    return items if all(i["state"] in ("delivered", "stuck", "dropped") for i in items) else None


def wait_settled(session, api, ids):
    items = wait_for("items %s to settle" % ids, SETTLE_TIMEOUT, lambda: settled(session, ids), 0.5)
    # Then the turn they started ends: every request answered and the agent idle again.
    wait_for("the agent to be idle", SETTLE_TIMEOUT, lambda: api.idle() and session.activity() == "idle", 0.5)
    return items


def carrying(api, token, since, start):
    """The agent's own turns since request `since` that carry `token`: requests that offer the
    model tools and whose user text starts as the prompt does. Side requests that quote the
    prompt (each agent asks the model for a title: Claude Code wraps it in <session>, Codex in
    "Generate a concise, single-line task title …", OpenCode sends it as it is, without tools)
    are not the agent's turn."""
    return [r for r in api.requests()[since:]
            if r.get("tools") and token in (r.get("text") or "")
            and r["text"].lstrip().startswith(start.strip()[:20])]


def arrived(session, api, token, since, start):
    """The agent's requests carrying `token`, once one came (an agent that queued the prompt
    mid-turn sends it after the turn, and "delivered" comes first), and the agent is idle again."""
    try:
        wait_for("the request carrying %s" % token, SETTLE_TIMEOUT, lambda: carrying(api, token, since, start), 0.5)
    except TimeoutError:
        return []
    wait_for("the agent to be idle", SETTLE_TIMEOUT, lambda: api.idle() and session.activity() == "idle", 0.5)
    return carrying(api, token, since, start)


def check_alone(session, api, shape, token):
    text = text_of(shape[2], token)
    since = len(api.requests())
    item_id = session.send(text)
    [item] = wait_settled(session, api, [item_id])
    got = arrived(session, api, token, since, text)
    exact = [r for r in got if r["text"].strip() == text.strip()]
    problems = []
    if item["state"] != "delivered":
        problems.append("item %s (%s)" % (item["state"], item.get("stuck")))
    if len(exact) != 1 or len(got) != 1:
        problems.append("%d request(s) carry it, %d of them exactly the prompt" % (len(got), len(exact)))
        for r in got:
            if r["text"].strip() != text.strip():
                problems.append("received %d chars %r" % (len(r["text"]), r["text"][:200]))
    return problems, {"item": item_id, "attempts": item.get("attempts")}


def check_queued(session, api, shape, token):
    text = text_of(shape[2], token)
    second = "Second message %s-b: a short note queued behind the first." % token
    since = len(api.requests())
    long_id = session.send("A long turn DESK_DELAY=%d %s-long" % (LONG_TURN, token))
    wait_for("the long turn's request", SETTLE_TIMEOUT, lambda: carrying(api, token + "-long", since, "A long turn"), 0.2)
    session.run("pause", session.name)
    ids = [session.send(text), session.send(second)]
    session.run("resume", session.name)
    items = wait_settled(session, api, [long_id] + ids)[1:]
    problems = []
    for item in items:
        if item["state"] != "delivered":
            problems.append("item %s %s (%s)" % (item["id"], item["state"], item.get("stuck")))
    if sorted(items[0].get("digest_with") or []) != [ids[1]]:
        problems.append("not one digest: digest_with %s" % items[0].get("digest_with"))
    got = arrived(session, api, token, since, "You have 2 messages")
    if len(got) != 1:
        problems.append("%d request(s) carry the digest" % len(got))
    for r in got[:1]:
        body = r["text"]
        for part in (text.strip(), second):
            if body.count(part) != 1:
                problems.append("the request holds %d whole copies of %r" % (body.count(part), part[:60]))
        if body.find(text.strip()) > body.find(second):
            problems.append("the messages are out of order")
    return problems, {"items": ids, "attempts": [i.get("attempts") for i in items]}


# Shapes checked for desk's own unsent paste: one the agents show inline or whole, one every
# agent collapses to a placeholder.
UNSENT_SHAPES = ("paragraphs", "long")
UNSENT = "the prompt sits unsent in the agent's input box"


def check_unsent(session, api, shape, token, action):
    text = text_of(shape[2], token)
    since = len(api.requests())
    master = next(s for s in session.json("ls")["data"] if s["name"] == session.name)["master_pid"]
    with open("/proc/%d/task/%d/children" % (master, master)) as f:
        group = int(f.read().split()[0])  # the agent leads its session's process group
    os.killpg(group, signal.SIGSTOP)
    try:
        item_id = session.send(text)
        wait_for("paste-missing", 30, lambda: session.item(item_id).get("stuck") == "paste-missing", 0.3)
    finally:
        os.killpg(group, signal.SIGCONT)
    problems = []
    try:
        wait_for("the item to say its prompt sits unsent", 30,
                 lambda: UNSENT in json.dumps(session.item(item_id)["evidence"], ensure_ascii=False), 0.5)
    except TimeoutError as e:
        item = session.item(item_id)
        return ["%s: %s (%s)" % (e, item["state"], item.get("stuck"))], {"item": item_id}
    out = session.run(action, item_id, check=False)
    said = (out.stdout + out.stderr).strip()
    if action == "force":
        if out.returncode != 0 or not said.startswith("pressed Enter; delivered"):
            problems.append("force: exit %d: %s" % (out.returncode, said[:200]))
        got = arrived(session, api, token, since, text)
        exact = [r for r in got if r["text"].strip() == text.strip()]
        if len(got) != 1 or len(exact) != 1:
            problems.append("%d request(s) carry it, %d exactly the prompt" % (len(got), len(exact)))
    else:
        if out.returncode != 0 or "cleared its prompt from the agent's input box" not in said:
            problems.append("drop: exit %d: %s" % (out.returncode, said[:200]))
        time.sleep(3)
        if [r for r in api.requests()[since:] if token in (r.get("text") or "")]:
            problems.append("the agent received the dropped prompt")
        screen = session.run("peek", session.name).stdout
        if token in screen or "Pasted" in screen:
            problems.append("the box still shows it")
    item = session.item(item_id)
    return problems, {"item": item_id, "attempts": item.get("attempts"), "said": said[:200]}


def agent_session(agent, bin_dir, api, home, work):
    script = ('. "%s/agents-lib.sh" && agent_session "$@" && printf "%%s\\0" "${#agent_flags[@]}" '
              '"${agent_flags[@]}" "${agent_cmd[@]}"' % HERE)
    out = subprocess.run(["bash", "-c", script, "agent_session", agent, bin_dir, api, home, work],
                         capture_output=True, text=True, check=True).stdout.split("\0")[:-1]
    n = int(out[0])
    return out[1:1 + n], out[1 + n:]


def run_agent(agent, opts, api, scratch, results):
    root = os.path.join(scratch, agent)
    home, work = os.path.join(root, "home"), os.path.join(root, "work")
    os.makedirs(home)
    os.makedirs(work)
    subprocess.run(["git", "init", "-q", work], check=True)
    flags, cmd = agent_session(agent, opts.bin_dir, api.url, home, work)
    s = Session(opts.desk, root, agent)
    s.run("serve")
    try:
        t0 = time.monotonic()
        s.run("new", agent, "--provider", agent, "--cwd", work, *flags, "--", *cmd)
        try:
            wait_for("idle", READY_TIMEOUT, lambda: s.activity() == "idle", 0.5)
        except TimeoutError:
            report(results, agent, "-", "ready", ["not idle after %d s" % READY_TIMEOUT], {})
            return
        print("     %s idle %.1f s after desk new" % (agent, time.monotonic() - t0), flush=True)
        for shape in [sh for sh in SHAPES if sh[0] in opts.shapes]:
            for mode, check in (("alone", check_alone), ("queued", check_queued)):
                token = "TOK%s%s%s" % (agent[:2], shape[0].replace("-", "")[:6], mode[0])
                try:
                    problems, detail = check(s, api, shape, token)
                except (TimeoutError, RuntimeError) as e:
                    problems, detail = ["%s: %s" % (type(e).__name__, e)], {}
                    with open(os.path.join(root, "%s-%s.screen" % (shape[0], mode)), "w") as f:
                        f.write(s.run("peek", agent, check=False).stdout)
                report(results, agent, shape[0], mode, problems, detail)
            if shape[0] not in UNSENT_SHAPES:
                continue
            for action in ("force", "drop"):
                token = "TOK%s%su%s" % (agent[:2], shape[0][:6], action[0])
                try:
                    problems, detail = check_unsent(s, api, shape, token, action)
                except (TimeoutError, RuntimeError) as e:
                    problems, detail = ["%s: %s" % (type(e).__name__, e)], {}
                report(results, agent, shape[0], "unsent-" + action, problems, detail)
    finally:
        s.run("kill", agent, "--grace", "3", check=False)
        s.run("serve", "--stop", check=False)


def report(results, agent, shape, mode, problems, detail):
    ok = not problems
    results.append({"agent": agent, "shape": shape, "mode": mode, "ok": ok, "problems": problems, **detail})
    print("%-4s %-9s %-12s %-7s %s" % ("PASS" if ok else "FAIL", agent, shape, mode, "; ".join(problems)), flush=True)


def table(results, agents):
    rows = ["| shape | " + " | ".join("%s alone | %s queued" % (a, a) for a in agents) + " |",
            "| --- |" + " --- |" * (2 * len(agents))]
    for name, what, _ in SHAPES:
        cells = []
        for a in agents:
            for mode in ("alone", "queued"):
                r = [x for x in results if x["agent"] == a and x["shape"] == name and x["mode"] == mode]
                cells.append("–" if not r else ("delivered once, whole" if r[0]["ok"] else "FAIL"))
        if any(c != "–" for c in cells):
            rows.append("| %s (%s) | %s |" % (name, what, " | ".join(cells)))
    return "\n".join(rows)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--desk", required=True)
    p.add_argument("--bin-dir", required=True, help="directory with the claude, codex, opencode executables")
    p.add_argument("--agents", default="claude,codex,opencode")
    p.add_argument("--shapes", default=",".join(s[0] for s in SHAPES))
    p.add_argument("--out", help="write the results as JSON here")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory (desk homes, screens)")
    opts = p.parse_args()
    opts.desk = os.path.abspath(opts.desk)
    opts.bin_dir = os.path.abspath(opts.bin_dir)
    opts.shapes = opts.shapes.split(",")
    agents = opts.agents.split(",")
    scratch = tempfile.mkdtemp(prefix="desk-shapes.")
    api = Api(scratch)
    results = []
    try:
        for agent in agents:
            run_agent(agent, opts, api, scratch, results)
    finally:
        api.stop()
        if opts.keep:
            print("kept %s" % scratch, file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    print()
    print(table(results, agents))
    if opts.out:
        with open(opts.out, "w") as f:
            json.dump(results, f, indent=1, ensure_ascii=False)
            f.write("\n")
    failed = [r for r in results if not r["ok"]]
    print("FAIL" if failed else "PASS")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
