#!/usr/bin/env python3
"""Record desk's agent corpus: run Claude Code, Codex and OpenCode through scripted scenarios.

Each scenario starts the agent fresh on a 120x40 PTY (scripts/record-agent.py) in a neutral
directory (/tmp/work, a fresh git repository) with HOME=/tmp/home (wiped before every run), against
the local model stand-in (scripts/fake-model-api.py on 127.0.0.1:8765), with hooks wired per
session (Claude: --settings FILE; Codex: hooks.json and notify in a temporary CODEX_HOME plus
--dangerously-bypass-hook-trust; OpenCode: a plugin in OPENCODE_CONFIG_DIR). It writes, per
scenario, tests/data/agents/<agent>/<scenario>.{cast,events.jsonl,screens.txt} from the recorder,
.api.jsonl (requests the stand-in saw), .hooks.jsonl (hook/notify/plugin payloads) and
.results.json (what the scenario measured), with times relative to the agent's spawn.

Usage:
  agent-scenarios.py --bin-dir DIR [--out tests/data/agents] [--agents claude,codex,opencode]
                     [--scenarios startup,turn,...] [--list]

DIR holds the agents' executables (claude, codex, opencode), e.g. node_modules/.bin of an npm
install made outside the repository. /tmp/home and /tmp/work are created and deleted by this
script: it refuses to run if they exist without its marker file.
"""

import argparse
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import importlib.util  # noqa: E402

_spec = importlib.util.spec_from_file_location("record_agent", os.path.join(HERE, "record-agent.py"))
record_agent = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(record_agent)
Recorder = record_agent.Recorder
from prompt_shapes import SHAPES, text_of  # noqa: E402

# Overridable only for side experiments run next to a recording; the corpus uses the defaults.
HOME = os.environ.get("DESK_CORPUS_HOME", "/tmp/home")
WORK = os.environ.get("DESK_CORPUS_WORK", "/tmp/work")
HOOKS_DIR = HOME + "/desk-hooks"
HOOK_LOG = HOOKS_DIR + "/hooks.jsonl"
MARKER = ".desk-agent-corpus"
PORT = int(os.environ.get("DESK_CORPUS_PORT", "8765"))
API = "http://127.0.0.1:%d" % PORT
WORKING_RE = r"esc (to )?interrupt"


# ---------------------------------------------------------------------------------------------
# Agents: how to set each one up for a session without touching any global config
# ---------------------------------------------------------------------------------------------

class Agent:
    name = None
    idle_re = None          # screen text that shows the input box is ready and the agent idle

    def __init__(self, bin_dir):
        self.bin_dir = bin_dir

    def setup(self, scenario):
        """Write per-session config under HOME; return (argv, env)."""
        raise NotImplementedError


CLAUDE_EVENTS = ["PreToolUse", "PostToolUse", "PostToolUseFailure", "PostToolBatch", "Notification",
                 "UserPromptSubmit", "UserPromptExpansion", "SessionStart", "SessionEnd", "Stop",
                 "StopFailure", "SubagentStart", "SubagentStop", "PreCompact", "PostCompact",
                 "PermissionRequest", "PermissionDenied", "Setup", "TeammateIdle", "TaskCreated",
                 "TaskCompleted", "Elicitation", "ElicitationResult", "ConfigChange", "InstructionsLoaded",
                 "CwdChanged", "FileChanged", "MessageDisplay"]
# WorktreeCreate/WorktreeRemove are left out on purpose: a hook there replaces Claude's own
# worktree handling instead of observing it.


class Claude(Agent):
    name = "claude"
    idle_re = r"\? for shortcuts"

    def setup(self, scenario):
        os.makedirs(HOOKS_DIR, exist_ok=True)
        settings = {"hooks": {}}
        for ev in CLAUDE_EVENTS:
            settings["hooks"][ev] = [{"hooks": [{
                "type": "command",
                "command": "python3 %s/hook-log.py %s claude %s" % (HOOKS_DIR, HOOK_LOG, ev)}]}]
        settings_file = HOOKS_DIR + "/claude-settings.json"
        with open(settings_file, "w") as f:
            json.dump(settings, f, indent=1)
        state = {"hasCompletedOnboarding": True, "projects": {WORK: {"hasTrustDialogAccepted": True}}}
        if scenario == "first-run":
            state = None
        elif scenario == "trust-dialog":
            state = {"hasCompletedOnboarding": True}
        if state is not None:
            with open(HOME + "/.claude.json", "w") as f:
                json.dump(state, f)
        env = {"ANTHROPIC_BASE_URL": API, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
               "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1"}
        if scenario == "api-key-dialog":
            env["ANTHROPIC_API_KEY"] = "sk-ant-fake-key-0000"
        else:
            env["ANTHROPIC_AUTH_TOKEN"] = "fake-token"
        return [os.path.join(self.bin_dir, "claude"), "--settings", settings_file], env


CODEX_EVENTS = ["SessionStart", "SessionEnd", "PreToolUse", "PostToolUse", "PermissionRequest",
                "UserPromptSubmit", "Stop", "PreCompact", "PostCompact", "SubagentStart", "SubagentStop"]


class Codex(Agent):
    name = "codex"
    idle_re = r"\? for shortcuts"

    def setup(self, scenario):
        codex_home = HOME + "/.codex"
        os.makedirs(codex_home, exist_ok=True)
        os.makedirs(HOOKS_DIR, exist_ok=True)
        lines = [
            'model = "fake-model"',
            'model_provider = "fake"',
        ] + ([] if scenario == "daemon" else ['check_for_update_on_startup = false']) + [
            'notify = ["python3", "%s/hook-log.py", "%s", "codex-notify"]' % (HOOKS_DIR, HOOK_LOG),
            '',
            '[model_providers.fake]',
            'name = "Fake"',
            'base_url = "%s/v1"' % API,
            'env_key = "FAKE_API_KEY"',
            'wire_api = "responses"',
        ]
        if scenario != "first-run":
            lines += ['', '[projects."%s"]' % WORK, 'trust_level = "trusted"']
        with open(codex_home + "/config.toml", "w") as f:
            f.write("\n".join(lines) + "\n")
        hooks = {"hooks": {ev: [{"hooks": [{
            "type": "command", "timeout": 3,
            "command": "python3 %s/hook-log.py %s codex-hook %s" % (HOOKS_DIR, HOOK_LOG, ev)}]}]
            for ev in CODEX_EVENTS}}
        argv = [os.path.join(self.bin_dir, "codex")]
        if scenario == "daemon":
            # Codex's plain default: no daemon-related flags, no hooks (hooks.json would need
            # the bypass flag or a trust review), no update-check setting
            return argv, {"CODEX_HOME": codex_home, "FAKE_API_KEY": "fake-key"}
        with open(codex_home + "/hooks.json", "w") as f:
            json.dump(hooks, f, indent=1)
        argv.append("--no-daemon")
        if scenario != "first-run":
            argv.append("--dangerously-bypass-hook-trust")
        return argv, {"CODEX_HOME": codex_home, "FAKE_API_KEY": "fake-key"}


OPENCODE_PLUGIN = r"""
// desk corpus: log every OpenCode plugin event and hook call to a JSON-lines file.
import { appendFileSync } from "node:fs"
const LOG = process.env.DESK_PLUGIN_LOG
function put(kind, name, data) {
  let text
  try { text = JSON.stringify(data) } catch (e) { text = JSON.stringify(String(e)) }
  if (text && text.length > 1500) text = JSON.stringify(text.slice(0, 1500) + "…")
  appendFileSync(LOG, `{"t":${Date.now() / 1000},"label":"opencode-${kind}","name":${JSON.stringify(name)},"data":${text}}\n`)
}
export const DeskLog = async (ctx) => {
  put("plugin", "init", { directory: ctx.directory, worktree: ctx.worktree, keys: Object.keys(ctx) })
  return {
    event: async ({ event }) => put("event", event.type, event.properties),
    "chat.message": async (input, output) => put("hook", "chat.message", { input, output }),
    "permission.ask": async (input, output) => put("hook", "permission.ask", { input, output }),
    "tool.execute.before": async (input, output) => put("hook", "tool.execute.before", { input, output }),
    "tool.execute.after": async (input, output) => put("hook", "tool.execute.after", { input }),
  }
}
"""


OPENCODE_DEPS_CACHE = "/tmp/desk-agents-cache/opencode-config-deps"


def keep_opencode_deps():
    cfg_dir = HOME + "/desk-opencode"
    if os.path.isdir(OPENCODE_DEPS_CACHE) or not os.path.isdir(cfg_dir + "/node_modules"):
        return
    os.makedirs(OPENCODE_DEPS_CACHE)
    for name in ("node_modules", "package.json", "package-lock.json", ".gitignore"):
        src = os.path.join(cfg_dir, name)
        if os.path.exists(src):
            (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, os.path.join(OPENCODE_DEPS_CACHE, name))


class OpenCode(Agent):
    name = "opencode"
    idle_re = r"ctrl\+p commands"

    def setup(self, scenario):
        cfg_dir = HOME + "/desk-opencode"
        os.makedirs(cfg_dir + "/plugin", exist_ok=True)
        os.makedirs(HOOKS_DIR, exist_ok=True)
        config = {
            "$schema": "https://opencode.ai/config.json",
            "provider": {"fake": {
                "npm": "@ai-sdk/openai-compatible", "name": "Fake",
                "options": {"baseURL": API + "/v1", "apiKey": "fake-key"},
                "models": {"fake-model": {"name": "Fake Model", "tool_call": True}}}},
            "model": "fake/fake-model",
            "small_model": "fake/fake-model",
            "autoupdate": False,
            "share": "disabled",
            "permission": {"bash": "ask", "edit": "ask"},
        }
        if scenario == "first-run":
            config.pop("model")
            config.pop("small_model")
        with open(cfg_dir + "/opencode.json", "w") as f:
            json.dump(config, f, indent=1)
        if scenario != "startup-noplugin":
            with open(cfg_dir + "/plugin/desk-log.js", "w") as f:
                f.write(OPENCODE_PLUGIN)
        # OpenCode installs @opencode-ai/plugin from npm into a config dir that has none (about
        # 20 s here). desk's config dir would persist; here HOME is new for every run, so the
        # installed dependencies are kept aside after the first run and put back (not for
        # first-run, which records the install).
        if scenario != "first-run" and os.path.isdir(OPENCODE_DEPS_CACHE):
            for name in os.listdir(OPENCODE_DEPS_CACHE):
                src = os.path.join(OPENCODE_DEPS_CACHE, name)
                (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, os.path.join(cfg_dir, name))
        env = {"OPENCODE_CONFIG_DIR": cfg_dir, "OPENCODE_DISABLE_MODELS_FETCH": "1",
               "OPENCODE_DISABLE_AUTOUPDATE": "1", "DESK_PLUGIN_LOG": HOOK_LOG}
        return [os.path.join(self.bin_dir, "opencode")], env


AGENTS = {"claude": Claude, "codex": Codex, "opencode": OpenCode}


# ---------------------------------------------------------------------------------------------
# One run: neutral directories, the stand-in, the recorder, the scenario, saving
# ---------------------------------------------------------------------------------------------

def reset_dirs():
    for d in (HOME, WORK):
        if os.path.exists(d):
            if not os.path.exists(os.path.join(d, MARKER)):
                sys.exit("%s exists and was not made by this script; move it away first" % d)
            shutil.rmtree(d)
        os.makedirs(d)
        open(os.path.join(d, MARKER), "w").close()
    subprocess.run(["git", "init", "-q", WORK], check=True)
    os.makedirs(HOOKS_DIR)
    shutil.copy(os.path.join(HERE, "hook-log.py"), HOOKS_DIR + "/hook-log.py")


class Run:
    """What a scenario function gets: the recorder plus evidence readers."""

    def __init__(self, agent, rec, api_log, wall0, fake, run_id=None, argv=None, env=None, prefix=None):
        self.run_id = run_id
        # the agent's command and environment, and where its files go: for a second process
        # of the same run (the resume scenarios), recorded as <prefix>-<label>.*
        self.argv = argv
        self.env = env
        self.prefix = prefix
        self.extra = []
        self.agent = agent
        self.rec = rec
        self.api_log = api_log
        self.wall0 = wall0
        self.fake = fake
        self.results = {}

    def api(self):
        try:
            with open(self.api_log) as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def hooks(self):
        try:
            with open(HOOK_LOG) as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def api_saw(self, token, since=0):
        for e in self.api()[since:]:
            if token in (e.get("user") or ""):
                return e
        return None

    def wait_api(self, token, timeout, since=0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            e = self.api_saw(token, since)
            if e:
                return e
            time.sleep(0.05)
        return None

    def main_request(self, prefix, since=0, timeout=2.0):
        """The request whose user text starts with prefix (the agent's own turn, not a side
        request such as title generation, which wraps the prompt); [] if none comes."""
        deadline = time.monotonic() + timeout
        while True:
            found = [x for x in self.api()[since:] if (x.get("user") or "").startswith(prefix)]
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.05)

    def rel(self, epoch):
        return round(epoch - self.wall0, 3)

    def wait_idle(self, timeout=60):
        """The agent is idle: every request answered, no working marker, the idle marker shown."""
        rec = self.rec
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            log = self.api()
            started = {e["req"] for e in log if "api" in e}
            done = {e["req"] for e in log if e.get("done") or e.get("error")}
            if started <= done and rec.wait(WORKING_RE, 0.05, absent=True) and \
                    rec.wait(self.agent.idle_re, 0.05):
                rec.wait_quiet(300, 5)
                return True
            time.sleep(0.1)
        return False

    def wait_ready(self, timeout=60):
        ok = self.rec.wait(self.agent.idle_re, timeout)
        self.rec.mark("ready" if ok else "ready TIMEOUT")
        return ok

    def prompt(self, text, how="type"):
        """Type (one write) or paste text, then Enter 300 ms later as its own write."""
        if how == "type":
            self.rec.type(text)
        else:
            self.rec.paste(text)
        time.sleep(0.3)
        self.rec.key("enter")


def start_fake(api_log, delay, slow, log_text=False):
    # Something already answering on the port would silently take this run's requests (and
    # another run's hooks would land in this run's files): refuse instead.
    try:
        socket.create_connection(("127.0.0.1", PORT), 0.2).close()
        sys.exit("port %d is already in use (another recording running?)" % PORT)
    except OSError:
        pass
    cmd = [sys.executable, os.path.join(HERE, "fake-model-api.py"), "--port", str(PORT),
           "--delay", str(delay), "--slow", str(slow), "--log", api_log, "--quiet",
           "--write-dir", WORK] + (["--log-text"] if log_text else [])
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, cwd=WORK)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", PORT), 0.2).close()
            return p
        except OSError:
            time.sleep(0.05)
    p.kill()
    sys.exit("fake-model-api did not start")


def kill_leftovers(run_id):
    """End processes this run started that outlived the agent (found by a marker variable)."""
    killed = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = f.read()
        except OSError:
            continue
        if ("DESK_CORPUS_RUN=" + run_id).encode() in env:
            try:
                os.kill(int(pid), signal.SIGKILL)
                killed.append(int(pid))
            except OSError:
                pass
    return killed


def shorten(value, limit=300):
    """Long strings (pasted prompts echoed in hook payloads) cut to their head and tail, so that
    a recording stays small; the cut is marked with the original length."""
    if isinstance(value, str) and len(value) > limit:
        return value[:200] + "…[%d chars]…" % len(value) + value[-60:]
    if isinstance(value, list):
        return [shorten(v, limit) for v in value]
    if isinstance(value, dict):
        return {k: shorten(v, limit) for k, v in value.items()}
    return value


def relativize(entries, wall0):
    out = []
    for e in entries:
        e = dict(e)
        if "t" in e:
            e["t"] = round(e["t"] - wall0, 3)
        out.append(e)
    return out


def make_sanitizer(bin_dir):
    repl = []
    root = os.path.dirname(os.path.dirname(os.path.abspath(bin_dir)))  # dir holding node_modules
    repl.append((root, "<agents-install>"))
    host = socket.gethostname()
    if host and len(host) > 3:
        repl.append((host, "<host>"))

    def sanitize(s):
        for a, b in repl:
            s = s.replace(a, b)
        return s
    return sanitize


def run_scenario(agent, scenario, fn, opts, out_dir, sanitize):
    reset_dirs()
    run_id = uuid.uuid4().hex
    spec = SCENARIO_SPECS.get(scenario, {})
    api_log = "/tmp/desk-agents-api-%d.jsonl" % PORT
    if os.path.exists(api_log):
        os.remove(api_log)
    fake = start_fake(api_log, spec.get("delay", 2.0), spec.get("slow", 8.0), spec.get("log_text", False))
    argv, env = agent.setup(scenario)
    if scenario == "resume-unknown":
        argv = resume_argv(agent.name, argv, UNKNOWN_ID[agent.name])
    full_env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "TERM": "xterm-256color",
                "HOME": HOME, "DESK_CORPUS_RUN": run_id, **env}
    prefix = os.path.join(out_dir, agent.name, scenario)
    os.makedirs(os.path.dirname(prefix), exist_ok=True)
    print("== %s/%s" % (agent.name, scenario), flush=True)
    wall0 = time.time()
    rec = Recorder(argv, prefix, env=full_env, cwd=WORK, answer=spec.get("answer", True),
                   kitty=spec.get("kitty", False))
    run = Run(agent, rec, api_log, wall0, fake, run_id, argv=argv, env=full_env, prefix=prefix)
    error = None
    try:
        fn(run)
    except Exception as e:  # keep the recording of a failed scenario, say so in results
        error = repr(e)
        import traceback
        traceback.print_exc()
    finally:
        rec.stop()
        for extra, _ in run.extra:
            extra.stop()
        time.sleep(0.5)
        rec.save(header_extra={"agent": agent.name, "scenario": scenario,
                               "command": [os.path.basename(argv[0])] + argv[1:]},
                 sanitize=sanitize)
        for extra, extra_argv in run.extra:
            extra.save(header_extra={"agent": agent.name, "scenario": scenario,
                                     "command": [os.path.basename(extra_argv[0])] + extra_argv[1:],
                                     # its times count from its own spawn, this many seconds
                                     # after the first process's
                                     "spawned_at": round(extra.t0 - rec.t0, 3)},
                       sanitize=sanitize)
        fake.terminate()
        fake.wait(5)
        leftovers = kill_leftovers(run_id)
        if agent.name == "opencode":
            keep_opencode_deps()
    results = dict(run.results)
    if error:
        results["error"] = error
    if leftovers:
        results["leftover_processes_killed"] = len(leftovers)
    results["exit"] = rec.exit_status
    for extra, _ in run.extra:
        results.setdefault("exits_of_later_processes", []).append(extra.exit_status)
    for suffix, entries in ((".api.jsonl", run.api()), (".hooks.jsonl", shorten(run.hooks()))):
        path = prefix + suffix
        if entries:
            with open(path, "w") as f:
                for e in relativize(entries, wall0):
                    f.write(sanitize(json.dumps(e, ensure_ascii=False)) + "\n")
        elif os.path.exists(path):
            os.remove(path)
    with open(prefix + ".results.json", "w") as f:
        f.write(sanitize(json.dumps(results, indent=1, ensure_ascii=False)) + "\n")
    print("   %s" % json.dumps(results, ensure_ascii=False)[:600], flush=True)


# ---------------------------------------------------------------------------------------------
# Scenarios
# ---------------------------------------------------------------------------------------------

SCENARIO_SPECS = {
    "noanswer": {"answer": False},
    "kitty": {"kitty": True},
    "turn": {"delay": 4.0},
    "paste-enter": {"delay": 0.5},
    "paste-enter-repeat": {"delay": 0.5},
    "type-enter": {"delay": 0.5},
    "paste-placeholder": {"delay": 0.3},
    "queue": {"delay": 1.0, "slow": 8.0},
    "quoted-dialog": {"delay": 1.0},
    "shapes-alone": {"delay": 0.5, "log_text": True},
    "shapes-queued": {"delay": 0.5, "slow": 6.0, "log_text": True},
    "shapes-queued-more": {"delay": 0.5, "slow": 6.0, "log_text": True},
}


def sc_first_run(run):
    """Nothing pre-seeded (no onboarding, no trust): record what shows, answer the defaults."""
    rec = run.rec
    rec.wait_quiet(1500, 30)
    for i in range(6):
        text = rec.snap("screen-%d" % i)
        if rec.closed or rec.wait(run.agent.idle_re, 0.1):
            break
        rec.key("enter")
        rec.mark("enter (accept the default)")
        # wait for the screen to change, then to settle
        rec.wait_until(lambda: rec.text() != text or rec.closed, 10)
        rec.wait_quiet(1500, 30)
    run.results["reached_idle"] = rec.wait(run.agent.idle_re, 0.1)
    run.results["exited"] = rec.closed


def sc_dialog_then_idle(run):
    """One pre-session dialog (trust or API key): snapshot it, accept with Enter, snapshot."""
    rec = run.rec
    rec.wait_quiet(2000, 20)
    rec.snap("dialog")
    rec.key("enter")
    rec.mark("enter")
    rec.wait_quiet(2000, 20)
    rec.snap("after-enter")
    run.results["reached_idle"] = rec.wait(run.agent.idle_re, 5)


def milestones(rec, idle_re):
    """Times of the readiness signals seen so far."""
    ev = rec.events
    out = {}
    for e in ev:
        if e["ev"] == "mode" and e.get("mode") == "2004" and e.get("on") and "bracketed_paste_on" not in out:
            out["bracketed_paste_on"] = e["t"]
        if e["ev"] == "title" and "first_title" not in out:
            out["first_title"] = e["t"]
            out["first_title_text"] = e["title"]
        if e["ev"] == "mark" and e["label"] == "ready":
            out["idle_marker_on_screen"] = e["t"]
    return out


def sc_startup(run):
    """Start to idle; note when bracketed paste, the title and the idle screen appear."""
    rec = run.rec
    run.wait_ready(60)
    rec.wait_quiet(1500, 20)
    rec.snap("idle")
    time.sleep(3)
    rec.snap("idle+3s")
    run.results.update(milestones(rec, run.agent.idle_re))
    hooks = run.hooks()
    if hooks:
        run.results["first_hook"] = {"t": run.rel(hooks[0]["t"]), "label": hooks[0]["label"],
                                     "name": (hooks[0].get("argv") or [hooks[0].get("name")])[0]}


def sc_noanswer(run):
    """Start with a terminal that answers no query: does the agent wait for answers?"""
    rec = run.rec
    ok = run.wait_ready(30)
    rec.wait_quiet(1500, 10)
    rec.snap("after-start")
    run.results.update(milestones(rec, run.agent.idle_re))
    run.results["reached_idle_without_answers"] = ok
    if ok:
        run.prompt("hello TOKEN-noanswer")
        run.results["prompt_submitted"] = run.wait_api("TOKEN-noanswer", 10) is not None
        run.wait_idle(30)
        rec.snap("after-turn")


def sc_kitty(run):
    """Start with a terminal that claims the kitty keyboard protocol; is Enter still CR?"""
    rec = run.rec
    run.wait_ready(60)
    rec.wait_quiet(1000, 10)
    rec.snap("idle")
    run.results.update(milestones(rec, run.agent.idle_re))
    run.results["kitty_events"] = [e for e in rec.events if e["ev"] == "kitty-keyboard"]
    run.prompt("hello TOKEN-kitty")
    run.results["cr_submits"] = run.wait_api("TOKEN-kitty", 8) is not None
    if not run.results["cr_submits"]:
        rec.snap("cr-did-not-submit")
        rec.write(b"\x1b[13u")
        rec.mark("CSI 13 u")
        run.results["csi_13u_submits"] = run.wait_api("TOKEN-kitty", 8) is not None
    run.wait_idle(30)
    rec.snap("after-turn")


def sc_turn(run):
    """A typed prompt, Enter, a 4 s streamed reply, idle again."""
    rec = run.rec
    run.wait_ready(60)
    rec.wait_quiet(1000, 10)
    rec.snap("idle-before")
    rec.mark("type prompt")
    rec.type("Say hello TOKEN-turn")
    time.sleep(0.5)
    rec.snap("typed")
    rec.mark("enter")
    rec.key("enter")
    e = run.wait_api("TOKEN-turn", 10)
    run.results["submitted"] = e is not None
    time.sleep(1.5)
    rec.snap("working")
    run.results["idle_again"] = run.wait_idle(60)
    rec.snap("idle-after")


def sc_approval(run):
    """A prompt whose reply asks to run a shell command: the approval dialog, approved with Enter."""
    rec = run.rec
    run.wait_ready(60)
    rec.wait_quiet(1000, 10)
    checks = {}
    for label, text in (("bash", "Please run the command DESK_TOOL TOKEN-approval"),
                        ("write", "Please write the note DESK_WRITE TOKEN-write")):
        if run.agent.name == "codex" and label == "write":
            continue  # Codex writes files through exec_command; nothing new to see
        rec.mark("prompt " + label)
        run.prompt(text)
        submitted = run.wait_api(text.split()[-1], 10) is not None
        # the dialog: give it time to render completely
        time.sleep(2.5)
        rec.wait_quiet(700, 5)
        rec.snap("dialog-" + label)
        title = rec.last_title[1] if rec.last_title else None
        rec.mark("approve with Enter")
        rec.key("enter")
        time.sleep(0.5)
        rec.snap("after-approve-" + label)
        idle = run.wait_idle(30)
        rec.snap("idle-after-" + label)
        checks[label] = {"submitted": submitted, "title_in_dialog": title, "idle_after": idle,
                         "file_made": os.path.exists(os.path.join(WORK, "desk-approved.txt" if label == "bash"
                                                                  else "desk-note.txt"))}
    run.results["dialogs"] = checks


def sc_question(run):
    """A reply that asks the operator a multiple-choice question (where the agent has a tool)."""
    rec = run.rec
    run.wait_ready(60)
    rec.wait_quiet(1000, 10)
    run.prompt("Ask me something DESK_ASK TOKEN-question")
    run.results["submitted"] = run.wait_api("TOKEN-question", 10) is not None
    time.sleep(2.5)
    rec.wait_quiet(700, 5)
    rec.snap("question")
    run.results["title_in_question"] = rec.last_title[1] if rec.last_title else None
    rec.mark("answer with Enter (first option)")
    rec.key("enter")
    time.sleep(1.0)
    rec.snap("after-enter")
    if not run.wait_idle(10):
        # some question UIs need a second confirmation (e.g. a submit step)
        rec.key("enter")
        rec.mark("second enter")
        time.sleep(1.0)
        rec.snap("after-second-enter")
    run.results["idle_after"] = run.wait_idle(30)
    rec.snap("idle-after")


def sc_focus_out(run):
    """Report focus-out (CSI O) to the agent, then a turn and an approval held 12 s: does the
    agent notify (OSC 9/777/99, bell, Notification hook) when it thinks nobody is looking?"""
    rec = run.rec
    run.wait_ready(60)
    rec.wait_quiet(1000, 10)
    run.results["focus_reporting_on"] = rec.modes.get("1004")
    rec.write(b"\x1b[O")
    rec.mark("focus out")
    time.sleep(0.5)
    run.prompt("hello TOKEN-focus")
    run.wait_api("TOKEN-focus", 10)
    run.wait_idle(30)
    time.sleep(2.0)
    rec.mark("approval prompt")
    run.prompt("run it DESK_TOOL TOKEN-focustool")
    run.wait_api("TOKEN-focustool", 10)
    time.sleep(12.0)
    rec.snap("approval")
    rec.write(b"\x1b[I")
    rec.mark("focus in")
    time.sleep(0.5)
    rec.key("enter")
    rec.mark("approved")
    run.wait_idle(30)
    rec.snap("idle-after")
    run.results["notifications"] = [e for e in rec.events if e["ev"] in ("osc", "bell")
                                    and e.get("osc") not in (12, 22, 66, 1337)]
    run.results["notification_hooks"] = [[run.rel(h["t"]), (h.get("stdin") or {}).get("notification_type")]
                                         for h in run.hooks() if (h.get("argv") or [None])[0] == "Notification"]


def prompt_lines(n, token):
    if n == 1:
        return "Summarise this request %s in one line please" % token
    return "\n".join("%s line %02d of a pasted prompt with some words in it" % (token, i + 1) for i in range(n))


ENTER_VARIANTS = ["same", 0, 20, 50, 100, 200, 500]


def paste_trial(run, size, enter, how="paste", rep=None):
    rec = run.rec
    label = "same" if enter == "same" else "%dms" % enter
    token = "TOKEN-%s%d-%s" % ("p" if how == "paste" else "t", size, label)
    if rep is not None:
        token += "-r%d" % rep
    text = prompt_lines(size, token)
    since = len(run.api())
    rec.mark("%s %d line(s), enter %s" % (how, size, label))
    if how == "paste":
        rec.paste(text, enter)
    else:  # typed: the whole text in one write, Enter in the same write or later
        if enter == "same":
            rec.write(text + "\r")
        else:
            rec.write(text)
            if enter:
                time.sleep(enter / 1000.0)
            rec.write("\r")
    t_sent = rec.now()
    e = run.wait_api(token, 4, since)
    trial = {"how": how, "lines": size, "chars": len(text), "enter": label, "submitted": e is not None}
    if e is None:
        rec.snap("not-submitted-%s-%d-%s" % (how, size, label))
        rec.key("enter")
        rec.mark("extra enter")
        e2 = run.wait_api(token, 4, since)
        trial["extra_enter_submitted"] = e2 is not None
        if e2 is None:
            rec.snap("still-not-submitted-%s-%d-%s" % (how, size, label))
            rec.key("enter")
            rec.mark("second extra enter")
            trial["second_extra_enter_submitted"] = run.wait_api(token, 4, since) is not None
    else:
        trial["request_after_s"] = round(run.rel(e["t"]) - t_sent, 3)
        # Did the text arrive whole? Compare with the agent's main request (the stand-in logs
        # the first 160 and last 40 characters and the length of the user text).
        main = run.main_request(text[:40], since)
        trial["text_intact"] = bool(main) and main[0].get("user_len") == len(text) and \
            main[0].get("user_tail") == text[-40:]
        if main and not trial["text_intact"]:
            trial["arrived_len"] = main[0].get("user_len")
    trial["idle_after"] = run.wait_idle(30)
    time.sleep(0.8)
    return trial


def sc_paste_enter(run):
    """Bracketed paste of 1 and 20 lines, then Enter in the same write or after a delay."""
    rec = run.rec
    run.wait_ready(60)
    rec.wait_quiet(1000, 10)
    trials = []
    for size in (1, 20):
        for enter in ENTER_VARIANTS:
            trials.append(paste_trial(run, size, enter, "paste"))
    run.results["trials"] = trials


# OpenCode redraws its whole screen on every change, so its recordings grow fastest; two
# rounds keep its cast under the corpus's 300 KB per file.
REPEAT_ROUNDS = {"opencode": 2}


def sc_paste_enter_repeat(run):
    """The 20-line bracketed paste with Enter in the same write or soon after, five times each
    (two for OpenCode): how often is the Enter lost?"""
    rec = run.rec
    run.wait_ready(60)
    rec.wait_quiet(1000, 10)
    trials = []
    for rep in range(REPEAT_ROUNDS.get(run.agent.name, 5)):
        for enter in ["same", 0, 20, 50, 100]:
            t = paste_trial(run, 20, enter, "paste", rep)
            trials.append(t)
    run.results["trials"] = trials
    summary = {}
    for t in trials:
        s = summary.setdefault(t["enter"], {"trials": 0, "submitted": 0})
        s["trials"] += 1
        s["submitted"] += 1 if t["submitted"] else 0
    run.results["summary"] = summary


def sc_type_enter(run):
    """Unbracketed text (as a program typing would send it) in one write, then Enter."""
    rec = run.rec
    run.wait_ready(60)
    rec.wait_quiet(1000, 10)
    trials = []
    for enter in ["same", 0, 20, 50, 100, 200, 500]:
        trials.append(paste_trial(run, 1, enter, "type"))
    run.results["trials"] = trials


def sc_paste_placeholder(run):
    """Paste prompts of growing size without Enter; snapshot the input box each time."""
    rec = run.rec
    run.wait_ready(60)
    rec.wait_quiet(1000, 10)
    shapes = [("1x40", 1, 40), ("1x150", 1, 150), ("1x151", 1, 151), ("1x200", 1, 200), ("1x800", 1, 800), ("1x801", 1, 801), ("1x1000", 1, 1000), ("1x1001", 1, 1001),
              ("1x1500", 1, 1500), ("1x3000", 1, 3000),
              ("2 lines", 2, 0), ("3 lines", 3, 0), ("4 lines", 4, 0), ("5 lines", 5, 0),
              ("10 lines", 10, 0), ("20 lines", 20, 0), ("100 lines", 100, 0)]
    out = []
    for i, (label, lines, chars) in enumerate(shapes):
        token = "TOKEN-ph%02d" % i
        if lines == 1:
            body = (token + " " + "x" * chars)[:max(chars, len(token))]
        else:
            body = "\n".join("%s l%03d" % (token, j + 1) for j in range(lines))
        rec.mark("paste " + label)
        rec.paste(body)
        time.sleep(0.8)
        rec.wait_quiet(300, 3)
        screen = rec.snap("pasted " + label)
        shown = [ln for ln in screen.splitlines() if "Pasted" in ln or "pasted" in ln or token in ln]
        since = len(run.api())
        rec.key("enter")
        got = run.wait_api(token, 6, since)
        main = run.main_request(token, since)
        out.append({"shape": label, "chars": len(body), "lines": lines, "placeholder_lines": shown[:4],
                    "submitted": got is not None,
                    "arrived_intact": bool(main) and main[0].get("user_len") == len(body)
                    and main[0].get("user_tail") == body[-40:]})
        run.wait_idle(30)
        time.sleep(0.5)
    run.results["pastes"] = out


def sc_queue(run):
    """Type (then paste) a second prompt while a turn is running: queued, steered or lost?"""
    rec = run.rec
    run.wait_ready(60)
    rec.wait_quiet(1000, 10)
    out = {}
    for how in ("type", "paste"):
        a, b = "TOKEN-qa-" + how, "TOKEN-qb-" + how
        since = len(run.api())
        rec.mark("prompt A (slow)")
        run.prompt("First task DESK_SLOW %s" % a)
        ea = run.wait_api(a, 10, since)
        time.sleep(2.0)
        rec.snap("working-before-B-" + how)
        rec.mark("prompt B while working (%s)" % how)
        t_b = rec.now()
        run.prompt("Second task %s" % b, how=how)
        time.sleep(1.0)
        rec.snap("B-entered-while-working-" + how)
        eb = run.wait_api(b, 25, since)
        time.sleep(0.3)
        rec.snap("after-B-request-" + how)
        log = run.api()[since:]
        a_done = [e for e in log if e.get("done") and ea and e.get("req") == ea.get("req")]
        out[how] = {
            "A_request_t": run.rel(ea["t"]) if ea else None,
            "B_entered_t": t_b,
            "B_request_t": run.rel(eb["t"]) if eb else None,
            "A_stream_done_t": run.rel(a_done[0]["t"]) if a_done else None,
            # A's stream cut short by the client (not "done") means the agent abandoned it
            "A_stream_aborted": any(e.get("error") and ea and e.get("req") == ea.get("req") for e in log),
            "B_sent_while_A_streaming": bool(eb and ((a_done and eb["t"] < a_done[0]["t"]) or not a_done)),
        }
        run.wait_idle(40)
        rec.snap("idle-after-" + how)
        time.sleep(1.0)
    run.results["queue"] = out


def sc_early(run, when):
    rec = run.rec
    if when == "2004":
        rec.wait_until(lambda: rec.modes.get("2004") is True, 30, 0.002)
    rec.mark("type early prompt (%s)" % when)
    rec.write("hello TOKEN-early")
    time.sleep(0.3)
    rec.key("enter")
    rec.mark("enter")
    got = run.wait_api("TOKEN-early", 15)
    run.results["when"] = when
    run.results["submitted"] = got is not None
    run.wait_ready(30)
    rec.wait_quiet(1500, 10)
    rec.snap("after")
    run.results["text_left_in_input"] = "TOKEN-early" in rec.text() and got is None
    run.results.update(milestones(rec, run.agent.idle_re))


def sc_early_t0(run):
    """A prompt and Enter written right after spawn, before the agent set up its terminal."""
    sc_early(run, "t0")


def sc_early_2004(run):
    """A prompt and Enter written the moment the agent enables bracketed paste (2004)."""
    sc_early(run, "2004")


def run_processes(run):
    """Processes of this run (found by the marker variable), as the agent's process tree."""
    out = []
    for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open("/proc/%d/environ" % pid, "rb") as f:
                marked = ("DESK_CORPUS_RUN=" + run.run_id).encode() in f.read()
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
            # a daemon may clear its environment; it still runs from under this run's HOME
            if not marked and not (argv and argv[0].startswith(HOME + "/")):
                continue
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ppid, sid = int(fields[1]), int(fields[3])
        out.append({"pid": pid, "is_agent": pid == run.rec.pid, "parent_is_agent": ppid == run.rec.pid,
                    "in_agent_session": sid == run.rec.pid,
                    "cmd": " ".join([os.path.basename(argv[0])] + argv[1:])[:160] if argv else "?"})
    return out


def sc_daemon(run):
    """Codex without --no-daemon: which processes it starts, and which outlive the TUI."""
    rec = run.rec
    run.wait_ready(60)
    rec.wait_quiet(1000, 10)
    run.prompt("hello TOKEN-daemon")
    run.results["submitted"] = run.wait_api("TOKEN-daemon", 15) is not None
    run.wait_idle(30)
    rec.snap("idle")
    # the daemon is installed and started in the background; give it time
    rec.wait_until(lambda: len(run_processes(run)) > 2, 30, 0.5)
    run.results["while_running"] = run_processes(run)
    rec.mark("SIGHUP to the agent's process group")
    rec.stop()
    time.sleep(3.0)
    run.results["after_agent_exit"] = run_processes(run)


def sc_hooks(run):
    """A whole session for the hook log: prompt, tool approval, compaction, exit command."""
    rec = run.rec
    agent = run.agent.name
    run.wait_ready(60)
    rec.wait_quiet(1000, 10)
    rec.mark("prompt")
    run.prompt("hello TOKEN-hooks")
    run.wait_api("TOKEN-hooks", 10)
    run.wait_idle(30)
    rec.mark("tool prompt")
    run.prompt("run it DESK_TOOL TOKEN-hooktool")
    run.wait_api("TOKEN-hooktool", 10)
    # hold the dialog a while: some agents notify about a pending approval only after a delay
    time.sleep(12.0)
    rec.snap("approval")
    rec.key("enter")
    rec.mark("approved")
    run.wait_idle(30)
    rec.snap("after-tool")
    if agent == "claude":
        # Notification idle_prompt is sent after a minute without input
        rec.mark("wait 65 s idle")
        time.sleep(65)
        rec.snap("after-65s-idle")
    rec.mark("compact")
    rec.type("/compact")
    time.sleep(0.6)
    rec.key("enter")
    time.sleep(1.0)
    rec.snap("compact-entered")
    run.wait_idle(40)
    time.sleep(1.0)
    rec.snap("after-compact")
    rec.mark("exit command")
    rec.type("/exit" if agent != "codex" else "/quit")
    time.sleep(0.6)
    rec.key("enter")
    rec.wait_until(lambda: rec.closed, 10)
    if not rec.closed:
        rec.snap("after-exit-enter")
        rec.key("enter")
        rec.wait_until(lambda: rec.closed, 10)
    time.sleep(1.5)  # SessionEnd hooks may land just after the exit
    run.results["exited_by_command"] = rec.closed
    names = []
    for h in run.hooks():
        n = h.get("name") or ((h.get("argv") or [None])[0] if isinstance((h.get("argv") or [None])[0], str)
                              else (h.get("argv") or [{}])[0].get("type"))
        names.append([run.rel(h["t"]), h["label"], n])
    run.results["hook_sequence"] = names


# Start-up allowance for the newer scenarios: OpenCode took 50-100 s to draw its input box on
# this 2-core machine under a load of ~7 (it took 6-25 s for the first corpus).
READY_TIMEOUT = 180

# What each agent's tool-approval dialog shows while it is up (tests/data/agents/*/approval).
DIALOG_RE = {
    "claude": r"Do you want to proceed\?",
    "codex": r"Would you like to run the following command\?",
    "opencode": r"Permission required",
}
# The keys that pick each dialog's "No" option: Claude "3. No", Codex "3. No, and tell Codex
# what to do differently", OpenCode "Reject" (its options sit on one row, moved with ← →).
NO_KEYS = {
    "claude": ["down", "down", "enter"],
    "codex": ["down", "down", "enter"],
    "opencode": ["right", "right", "enter"],
}


def hook_names(run, since_t=None):
    """[t, label, name] of every hook delivery so far (after since_t, relative seconds)."""
    out = []
    for h in run.hooks():
        argv0 = (h.get("argv") or [None])[0]
        if h.get("name"):
            n = h["name"]
        elif isinstance(argv0, dict):  # Codex notify: the JSON payload is the argument
            n = argv0.get("type")
        else:
            n = argv0
        t = run.rel(h["t"])
        if since_t is None or t >= since_t:
            out.append([t, h["label"], n])
    return out


def sc_dismiss(run, how, hold):
    """A tool approval dialog held `hold` seconds, then dismissed with `how` (esc, ctrl-c or
    no); then wait for idle and watch a few more seconds."""
    rec = run.rec
    agent = run.agent.name
    dialog = DIALOG_RE[agent]
    run.wait_ready(READY_TIMEOUT)
    rec.wait_quiet(1000, 10)
    rec.snap("idle-before")
    rec.mark("prompt")
    run.prompt("Please run the command DESK_TOOL TOKEN-dismiss")
    # generous: OpenCode took 40 s from Enter to its request under load
    res = {"submitted": run.wait_api("TOKEN-dismiss", 60) is not None}
    shown = rec.wait(dialog, 60)
    t_shown = rec.now()
    rec.mark("dialog-shown" if shown else "dialog-shown TIMEOUT")
    res["dialog_shown_t"] = t_shown if shown else None
    time.sleep(hold)
    rec.snap("dialog")
    res["title_in_dialog"] = rec.last_title[1] if rec.last_title else None
    if how == "no":
        for k in NO_KEYS[agent][:-1]:
            rec.key(k)
            time.sleep(0.3)
        rec.snap("no-selected")
        rec.key(NO_KEYS[agent][-1])
    else:
        rec.key(how)
    t_dismiss = rec.now()
    rec.mark("dismiss", how=how)
    res["dismiss_t"] = t_dismiss
    gone = rec.wait(dialog, 4, absent=True)
    if not gone and how != "no" and not rec.closed:
        # Claude Code ignores a single Ctrl-C in its dialog: a person would press it again
        rec.snap("still-shown")
        res["dialog_stayed_after_first_key"] = True
        rec.key(how)
        res["dismiss_again_t"] = rec.now()
        rec.mark("dismiss-again", how=how)
        gone = rec.wait(dialog, 10, absent=True)
    t_gone = rec.now()
    rec.mark("dialog-gone" if gone else "dialog-gone TIMEOUT")
    res["dialog_gone_t"] = t_gone if gone else None
    time.sleep(0.5)
    rec.snap("after-dismiss")
    res["title_after_dismiss"] = rec.last_title[1] if rec.last_title else None
    idle = run.wait_idle(20)
    rec.mark("idle" if idle else "idle TIMEOUT")
    res["idle_t"] = rec.now() if idle else None
    res["exited"] = rec.closed
    rec.snap("idle-after")
    time.sleep(5.0)
    rec.snap("idle-after+5s")
    res["title_at_end"] = rec.last_title[1] if rec.last_title else None
    res["hooks_from_dialog"] = hook_names(run, t_shown - 2.0)
    res["reports"] = [[e["t"], e.get("body")] for e in rec.events
                      if e["ev"] == "osc" and e.get("osc") == 7501 and e["t"] >= t_shown - 2.0]
    run.results.update(res)


def sc_dismiss_escape(run):
    """Tool approval dialog held 10 s (past Claude's Notification hook), dismissed with Escape."""
    sc_dismiss(run, "esc", 10.0)


def sc_dismiss_escape_early(run):
    """Tool approval dialog dismissed with Escape 1.5 s after it shows."""
    sc_dismiss(run, "esc", 1.5)


def sc_dismiss_ctrlc(run):
    """Tool approval dialog held 10 s, dismissed with Ctrl-C."""
    sc_dismiss(run, "ctrl-c", 10.0)


def sc_dismiss_no(run):
    """Tool approval dialog held 10 s, answered with its "No" option (arrows + Enter)."""
    sc_dismiss(run, "no", 10.0)


def sc_multi_turn(run):
    """Three typed turns of about 5, 1 and 8 s, each from idle; then an 8 s turn with a fifth
    prompt typed 3 s into it (mid-turn)."""
    rec = run.rec
    run.wait_ready(READY_TIMEOUT)
    rec.wait_quiet(1000, 10)
    rec.snap("idle-before")
    turns = []

    def send(n, delay):
        token = "TOKEN-mt%d" % n
        since = len(run.api())
        rec.type("Turn %d DESK_DELAY=%d %s" % (n, delay, token))
        time.sleep(0.5)
        rec.key("enter")
        t_sent = rec.now()
        return token, since, t_sent

    for n, delay in ((1, 5), (2, 1), (3, 8)):
        token, since, t_sent = send(n, delay)
        rec.mark("turn-%d-sent" % n)
        e = run.wait_api(token, 10, since)
        time.sleep(min(delay / 2.0, 2.0))
        rec.snap("turn-%d-working" % n)
        idle = run.wait_idle(60)
        rec.mark("turn-%d-done" % n if idle else "turn-%d-done TIMEOUT" % n)
        rec.snap("turn-%d-done" % n)
        turns.append({"turn": n, "delay": delay, "sent_t": t_sent,
                      "request_t": run.rel(e["t"]) if e else None, "idle_t": rec.now() if idle else None})
        time.sleep(2.0)
    token4, since4, t4 = send(4, 8)
    rec.mark("turn-4-sent")
    e4 = run.wait_api(token4, 10, since4)
    time.sleep(3.0)
    rec.snap("turn-4-working")
    token5, since5, t5 = send(5, 3)
    rec.mark("midturn-sent")
    time.sleep(1.0)
    rec.snap("midturn-entered")
    e5 = run.wait_api(token5, 30, since5)
    rec.mark("turn-5-request" if e5 else "turn-5-request TIMEOUT")
    idle = run.wait_idle(60)
    rec.mark("turn-5-done" if idle else "turn-5-done TIMEOUT")
    rec.snap("turn-5-done")
    log = run.api()
    done4 = [x for x in log if x.get("done") and e4 and x.get("req") == e4.get("req")]
    turns.append({"turn": 4, "delay": 8, "sent_t": t4, "request_t": run.rel(e4["t"]) if e4 else None,
                  "stream_done_t": run.rel(done4[0]["t"]) if done4 else None,
                  "aborted": any(x.get("error") and e4 and x.get("req") == e4.get("req") for x in log)})
    turns.append({"turn": 5, "delay": 3, "sent_t": t5, "request_t": run.rel(e5["t"]) if e5 else None,
                  "idle_t": rec.now() if idle else None})
    time.sleep(2.0)
    rec.snap("end-idle")
    run.results["turns"] = turns
    run.results["hooks"] = hook_names(run)
    run.results["reports"] = [[e["t"], e.get("body")] for e in rec.events
                              if e["ev"] == "osc" and e.get("osc") == 7501]


def sc_draft(run):
    """What an empty and a non-empty input box look like: a typed draft, erased; a pasted
    3-line draft, erased; never submitted."""
    rec = run.rec
    run.wait_ready(READY_TIMEOUT)
    rec.wait_quiet(1000, 10)
    rec.snap("empty")
    out = {}
    for kind, text in (("typed", "half typed draftword"),
                       ("pasted", "draft line one TOKEN-draft\ndraft line two\ndraft line three")):
        since = len(run.api())
        if kind == "typed":
            rec.type(text)
        else:
            rec.paste(text)
        time.sleep(0.8)
        rec.wait_quiet(400, 5)
        rec.mark("draft-typed" if kind == "typed" else "draft-pasted")
        rec.snap("draft-" + kind)
        # erase as a person would: backspace, once per character (more than enough for a
        # placeholder, which one backspace removes whole)
        rec.write(b"\x7f" * (len(text) + 4))
        time.sleep(0.8)
        rec.wait_quiet(400, 5)
        screen = rec.text()
        left = "draftword" in screen if kind == "typed" else ("draft line" in screen or "Pasted" in screen)
        if left:
            rec.snap("not-erased-" + kind)
            rec.key("ctrl-u")
            rec.mark("ctrl-u")
            time.sleep(0.8)
        rec.mark("draft-cleared")
        rec.snap("cleared-" + kind)
        out[kind] = {"backspaces_left_text": left, "submitted": len(run.api()) > since}
        time.sleep(1.0)
    rec.snap("empty-end")
    run.results["drafts"] = out


# The words of every dialog desk's provider rules look for (crates/desk-core/src/state/rules/),
# quoted in prompts: each agent gets all of them, its own among them.
QUOTED_DIALOGS = [
    ("claude-codex", "Quote TOKEN-quote1: Do you want to proceed? Would you like to run the following command?"),
    ("codex-claude", "Quote TOKEN-quote2: Press enter to confirm or esc to cancel. Is this a project you created or one you trust?"),
    ("opencode-codex", "Quote TOKEN-quote3: \u25b3 Permission required, then \u2191\u2193 select  enter submit  esc dismiss. Trust this folder? Hooks need review"),
    ("claude-question", "Quote TOKEN-quote4: Enter to select \u00b7 \u2191/\u2193 to navigate \u00b7 Esc to cancel. Do you want to run this command?"),
    ("claude-lines", "Quote TOKEN-quote5:\nDo you want to proceed?\n1. Yes\n2. No"),
]


def sc_quoted_dialog(run):
    """Prompts that quote the agents' own dialogs, pasted: each shown in the input box
    (`quoted-in-box-N`), submitted, answered, and shown in the transcript
    (`quoted-in-transcript-N`). No dialog is ever up; a rule that takes the echo for one is wrong."""
    rec = run.rec
    run.wait_ready(READY_TIMEOUT)
    rec.wait_quiet(1000, 10)
    out = {}
    for i, (label, text) in enumerate(QUOTED_DIALOGS, 1):
        token = "TOKEN-quote%d" % i
        since = len(run.api())
        rec.paste(text)
        time.sleep(0.8)
        rec.wait_quiet(400, 5)
        rec.mark("quoted-in-box-%d" % i, quotes=label)
        rec.snap("quoted-in-box-%d" % i)
        rec.key("enter")
        rec.mark("enter")
        submitted = run.wait_api(token, 10, since) is not None
        idle = run.wait_idle(60)
        rec.wait_quiet(700, 5)
        rec.mark("quoted-in-transcript-%d" % i, quotes=label)
        rec.snap("quoted-in-transcript-%d" % i)
        out[label] = {"submitted": submitted, "idle_after": idle}
    run.results["quoted"] = out


def digest_of(texts):
    """Several prompts as one, the way desk's digest reads (crates/desk-core/src/delivery/text.rs,
    `digest`): a header line, then each message under its own line, sender and time."""
    out = "You have %d messages (oldest first):\n" % len(texts)
    for i, t in enumerate(texts):
        out += "\n--- message %d of %d · from operator · 2026-01-01 12:00:0%d UTC ---\n" % (i + 1, len(texts), i)
        out += t.rstrip() + "\n"
    return out


def sc_shapes(run, how, shapes=SHAPES):
    """Every shape of scripts/prompt_shapes.py pasted as desk pastes it (bracketed, then Enter as
    its own write 50 ms later): alone while idle, or as a two-message digest, for Claude and
    OpenCode pasted mid-turn (they queue it), for Codex once the turn ended (desk holds while it
    works). Snapshots before each paste, with the text in the box, and after it was submitted."""
    rec = run.rec
    agent = run.agent.name
    run.wait_ready(READY_TIMEOUT)
    rec.wait_quiet(1000, 10)
    out = []
    for name, _what, shape in shapes:
        token = "TOK%s%s" % (name.replace("-", "")[:6], how[0])
        text = text_of(shape, token)
        if how == "digest":
            text = digest_of([text, "Second message %s-b: a short note queued behind the first." % token])
            since = len(run.api())
            rec.mark("long turn for %s" % name)
            run.prompt("A long turn %s %s-long" % (QUEUED_TURN.get(agent, "DESK_SLOW"), token))
            run.wait_api(token + "-long", 60, since)
            if agent == "codex":
                run.wait_idle(60)
                rec.wait_quiet(500, 5)
            else:
                time.sleep(1.0)
        label = "%s-%s" % (name, how)
        rec.snap("before-" + label)
        since = len(run.api())
        rec.mark("paste " + label)
        rec.paste(text)
        time.sleep(0.8)
        rec.wait_quiet(400, 5)
        rec.snap("pasted-" + label)
        time.sleep(0.05)
        rec.key("enter")
        rec.mark("enter " + label)
        got = run.wait_api(token, 60, since)
        idle = run.wait_idle(60)
        rec.snap("sent-" + label)
        # The agent's own turn: side requests for a title quote the prompt (OpenCode's as it is,
        # but without tools).
        main = [r for r in run.api()[since:]
                if r.get("tools") and (r.get("text") or "").lstrip().startswith(text.strip()[:20])]
        out.append({"shape": name, "how": how, "label": label, "text": text, "submitted": got is not None,
                    "requests": len(main),
                    "arrived_whole": len(main) == 1 and main[0]["text"].strip() == text.strip(),
                    "idle_after": idle})
        time.sleep(0.5)
    run.results["shapes"] = out


def sc_shapes_alone(run):
    """Every prompt shape pasted alone while idle, then Enter (see sc_shapes)."""
    sc_shapes(run, "alone")


# The digests go in two recordings, and OpenCode's turns are 3 s instead of 6: it redraws its
# whole screen on every spinner frame of the turns they are pasted into, and all seven in one cast
# came to 560 KB, four in 6 s turns to 358 KB (the corpus keeps each file under 300 KB).
QUEUED_TURN = {"opencode": "DESK_DELAY=3"}
def sc_shapes_queued(run):
    """The first four prompt shapes, each in a two-message digest pasted during (Codex: right
    after) a turn."""
    sc_shapes(run, "digest", SHAPES[:4])


def sc_shapes_queued_more(run):
    """The other prompt shapes, each in a digest pasted during (Codex: right after) a turn."""
    sc_shapes(run, "digest", SHAPES[4:])


# ---------------------------------------------------------------------------------------------
# Resume: what each agent reports about its conversation, and what it does when asked to resume
# one (desk's restart-with-resume, docs/fleet.md; findings in docs/agents-observed.md §10)
# ---------------------------------------------------------------------------------------------

EXIT_COMMAND = {"claude": "/exit", "codex": "/quit", "opencode": "/exit"}


def resume_argv(agent, argv, conversation):
    """The agent's command resuming `conversation` by id, as desk builds it."""
    if agent == "claude":
        return argv + ["--resume", conversation]
    if agent == "codex":
        # `resume` is a subcommand; the TUI flags desk's user gave stay before it.
        return argv + ["resume", conversation]
    return argv + ["--session", conversation]


def conversation_reports(run):
    """[t, source, id, transcript] of every report of the conversation id the hooks carried:
    Claude/Codex SessionStart (source startup/resume/clear/compact), Codex notify thread-ids,
    OpenCode session.created (with its parentID)."""
    out = []
    for h in run.hooks():
        t = run.rel(h["t"])
        label = h.get("label")
        argv0 = (h.get("argv") or [None])[0]
        stdin = h.get("stdin") if isinstance(h.get("stdin"), dict) else {}
        if label in ("claude", "codex-hook") and argv0 == "SessionStart":
            out.append([t, "%s SessionStart(%s)" % (label, stdin.get("source")), stdin.get("session_id"),
                        stdin.get("transcript_path")])
        elif label == "codex-notify" and isinstance(argv0, dict):
            out.append([t, "codex-notify", argv0.get("thread-id"), None])
        elif label == "opencode-event" and h.get("name") == "session.created":
            info = (h.get("data") or {}).get("info") or {}
            out.append([t, "opencode session.created parent=%s" % info.get("parentID"),
                        (h.get("data") or {}).get("sessionID"), info.get("directory")])
    return out


def process_tree(root):
    """pids of root and its descendants (from /proc)."""
    children = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(pid))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def agent_evidence(run, rec):
    """What the agent's own files say about its conversation while it runs: the files under
    HOME its processes hold open (Codex's rollout), Claude's per-process session files, and
    the transcripts on disk with their line counts."""
    held = set()
    for pid in process_tree(rec.pid):
        try:
            for fd in os.listdir("/proc/%d/fd" % pid):
                try:
                    target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
                except OSError:
                    continue
                if target.startswith(HOME) and (target.endswith(".jsonl") or target.endswith(".json")
                                                or target.endswith(".db")):
                    held.add(target)
        except OSError:
            continue
    sessions = {}
    sess_dir = HOME + "/.claude/sessions"
    if os.path.isdir(sess_dir):
        for name in sorted(os.listdir(sess_dir)):
            try:
                with open(os.path.join(sess_dir, name)) as f:
                    data = json.load(f)
            except (OSError, ValueError):
                continue
            # which of the run's processes the file is named after
            pid = name.split(".")[0]
            sessions[name] = {"pid_is_agent_process": pid.isdigit() and int(pid) in process_tree(rec.pid),
                              "keys": sorted(data), "sessionId": data.get("sessionId"),
                              "cwd": data.get("cwd")}
    transcripts = {}
    for base in (HOME + "/.claude/projects", HOME + "/.codex/sessions"):
        for dirpath, _, files in os.walk(base):
            for name in files:
                if name.endswith(".jsonl"):
                    path = os.path.join(dirpath, name)
                    with open(path, errors="replace") as f:
                        lines = f.read().splitlines()
                    kinds = {}
                    for line in lines:
                        try:
                            k = json.loads(line).get("type")
                        except ValueError:
                            k = "?"
                        kinds[k] = kinds.get(k, 0) + 1
                    transcripts[path] = {"lines": len(lines), "types": kinds}
                    try:
                        first = json.loads(lines[0]) if lines else {}
                    except ValueError:
                        first = {}
                    if first.get("type") == "session_meta":
                        # what the rollout says of itself (its id, directory, and whether it is
                        # a subagent's), without the long instructions
                        payload = first.get("payload") or {}
                        transcripts[path]["session_meta"] = shorten(
                            {k: v for k, v in payload.items() if not isinstance(v, str) or len(v) < 300}, 200)
    return {"held_open": sorted(held), "claude_sessions": sessions, "transcripts": transcripts}


def opencode_sessions(run):
    """`opencode session list --format json` as the agent's own environment sees it."""
    if run.agent.name != "opencode":
        return None
    try:
        p = subprocess.run([run.argv[0], "session", "list", "--format", "json"], env=run.env, cwd=WORK,
                           capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return {"error": "timeout"}
    try:
        return {"code": p.returncode, "sessions": json.loads(p.stdout or "null")}
    except ValueError:
        return {"code": p.returncode, "stdout": p.stdout[-2000:], "stderr": p.stderr[-2000:]}


def exit_agent(run, rec):
    """The agent's own exit command; True once it exited."""
    rec.type(EXIT_COMMAND[run.agent.name])
    time.sleep(0.6)
    rec.key("enter")
    rec.wait_until(lambda: rec.closed, 15)
    if not rec.closed:
        rec.key("enter")
        rec.wait_until(lambda: rec.closed, 15)
    time.sleep(1.5)  # SessionEnd hooks land just after the exit
    return rec.closed


def turn(run, rec, text, token):
    since = len(run.api())
    run.prompt(text)
    e = run.wait_api(token, 60, since)
    idle = run.wait_idle(60)
    return {"token": token, "request": bool(e), "carried": (e or {}).get("tokens"), "idle": idle}


def second_life(run, argv, label):
    """Start the agent again (a new process, recorded into <scenario>-<label>.*)."""
    rec2 = Recorder(argv, run.prefix + "-" + label, env=run.env, cwd=WORK)
    run.extra.append((rec2, argv))
    return rec2


def sc_resume(run):
    """A first conversation (one turn with TOKEN-first), the agent's exit command; then the agent
    started again resuming that conversation by the id its hooks reported (recorded as
    `resume-resumed`): is it resumed, does the next turn's request carry the first turn, which
    id do the hooks report now?"""
    rec = run.rec
    agent = run.agent.name
    run.wait_ready(READY_TIMEOUT)
    rec.wait_quiet(1000, 10)
    rec.mark("first prompt")
    run.results["first_turn"] = turn(run, rec, "Remember this TOKEN-first", "TOKEN-first")
    rec.snap("first-done")
    run.results["evidence_first_life"] = agent_evidence(run, rec)
    reports = conversation_reports(run)
    run.results["reports_first_life"] = reports
    rec.mark("exit command")
    run.results["exited_by_command"] = exit_agent(run, rec)
    run.results["evidence_after_exit"] = agent_evidence(run, rec)
    run.results["opencode_sessions"] = opencode_sessions(run)
    main_ids = [r[2] for r in reports if "SessionStart" in r[1] or "session.created parent=None" in r[1]]
    if not main_ids:
        run.results["resumed"] = "no conversation id reported"
        return
    conversation = main_ids[-1]
    run.results["resuming"] = conversation
    argv = resume_argv(agent, run.argv, conversation)
    t_second = run.rel(time.time())
    rec2 = second_life(run, argv, "resumed")
    rec2.mark("resume %s" % conversation)
    ok = rec2.wait(run.agent.idle_re, READY_TIMEOUT)
    rec2.mark("ready" if ok else "ready TIMEOUT")
    rec2.wait_quiet(1500, 15)
    rec2.snap("resumed")
    # the run's helpers act on rec
    run.rec = rec2
    rec2.mark("second prompt")
    run.results["second_turn"] = turn(run, rec2, "What did I ask you to remember TOKEN-second", "TOKEN-second")
    rec2.snap("second-done")
    run.results["evidence_second_life"] = agent_evidence(run, rec2)
    run.results["reports_second_life"] = [r for r in conversation_reports(run) if r[0] >= t_second]
    rec2.mark("exit command")
    run.results["second_exited_by_command"] = exit_agent(run, rec2)
    run.results["opencode_sessions_after"] = opencode_sessions(run)
    run.results["hooks"] = hook_names(run)


def sc_clear(run):
    """/clear between two turns (TOKEN-before, TOKEN-after): which id do the hooks report after
    it; then the agent started again resuming the last reported id (recorded as
    `clear-resumed`): which conversation comes back?"""
    rec = run.rec
    agent = run.agent.name
    run.wait_ready(READY_TIMEOUT)
    rec.wait_quiet(1000, 10)
    run.results["before_turn"] = turn(run, rec, "Before the clear TOKEN-before", "TOKEN-before")
    run.results["evidence_before_clear"] = agent_evidence(run, rec)
    rec.mark("clear")
    rec.type("/clear" if agent != "opencode" else "/new")
    time.sleep(0.6)
    rec.key("enter")
    time.sleep(3.0)
    rec.wait_quiet(1000, 10)
    rec.snap("cleared")
    run.results["after_turn"] = turn(run, rec, "After the clear TOKEN-after", "TOKEN-after")
    run.results["evidence_after_clear"] = agent_evidence(run, rec)
    reports = conversation_reports(run)
    run.results["reports"] = reports
    rec.mark("exit command")
    run.results["exited_by_command"] = exit_agent(run, rec)
    run.results["opencode_sessions"] = opencode_sessions(run)
    main_ids = [r[2] for r in reports if "SessionStart" in r[1] or "session.created parent=None" in r[1]]
    if not main_ids:
        return
    conversation = main_ids[-1]
    run.results["resuming"] = conversation
    t_second = run.rel(time.time())
    rec2 = second_life(run, resume_argv(agent, run.argv, conversation), "resumed")
    ok = rec2.wait(run.agent.idle_re, READY_TIMEOUT)
    rec2.mark("ready" if ok else "ready TIMEOUT")
    rec2.wait_quiet(1500, 15)
    rec2.snap("resumed")
    run.rec = rec2
    run.results["resumed_turn"] = turn(run, rec2, "Which conversation is this TOKEN-third", "TOKEN-third")
    run.results["reports_second_life"] = [r for r in conversation_reports(run) if r[0] >= t_second]
    exit_agent(run, rec2)
    run.results["hooks"] = hook_names(run)


UNKNOWN_ID = {
    "claude": "5a0e2f1c-6d3b-4e8a-9f21-0c7d4b9e3a18",
    "codex": "019ad3e1-7c2b-7a44-9d10-3f6e5b2c8a91",
    "opencode": "ses_2c7e9a41f3ffeD3skUnKn0wnId0",
}


def sc_resume_unknown(run):
    """The agent started resuming an id that names no conversation (well-formed for the agent):
    does it exit, with which message and status, how fast; or does it start blank?"""
    rec = run.rec
    t0 = time.monotonic()
    rec.wait_until(lambda: rec.closed or rec.wait(run.agent.idle_re, 0.05), READY_TIMEOUT, 0.2)
    gone = rec.closed
    time.sleep(1.0)
    run.results["exited"] = gone or rec.closed
    run.results["exited_after_s"] = round(time.monotonic() - t0 - (0 if gone else 1.0), 2) if run.results["exited"] else None
    rec.snap("after-start")
    if not rec.closed:
        run.results["idle_shown"] = bool(rec.wait(run.agent.idle_re, 1))
        rec.wait_quiet(1500, 15)
        rec.snap("idle")
        run.results["turn"] = turn(run, rec, "Hello TOKEN-unknown", "TOKEN-unknown")
        run.results["reports"] = conversation_reports(run)
        exit_agent(run, rec)
    run.results["hooks"] = hook_names(run)


SCENARIOS = {
    "first-run": sc_first_run,
    "trust-dialog": sc_dialog_then_idle,
    "api-key-dialog": sc_dialog_then_idle,
    "startup": sc_startup,
    "startup-noplugin": sc_startup,
    "noanswer": sc_noanswer,
    "kitty": sc_kitty,
    "turn": sc_turn,
    "approval": sc_approval,
    "question": sc_question,
    "paste-enter": sc_paste_enter,
    "paste-enter-repeat": sc_paste_enter_repeat,
    "type-enter": sc_type_enter,
    "paste-placeholder": sc_paste_placeholder,
    "queue": sc_queue,
    "early-t0": sc_early_t0,
    "early-2004": sc_early_2004,
    "hooks": sc_hooks,
    "focus-out": sc_focus_out,
    "daemon": sc_daemon,
    "dismiss-escape": sc_dismiss_escape,
    "dismiss-escape-early": sc_dismiss_escape_early,
    "dismiss-ctrlc": sc_dismiss_ctrlc,
    "dismiss-no": sc_dismiss_no,
    "multi-turn": sc_multi_turn,
    "draft": sc_draft,
    "quoted-dialog": sc_quoted_dialog,
    "shapes-alone": sc_shapes_alone,
    "shapes-queued": sc_shapes_queued,
    "shapes-queued-more": sc_shapes_queued_more,
    "resume": sc_resume,
    "clear": sc_clear,
    "resume-unknown": sc_resume_unknown,
}
ONLY = {"trust-dialog": {"claude"}, "api-key-dialog": {"claude"}, "startup-noplugin": {"opencode"},
        "daemon": {"codex"}}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin-dir", required=False, help="directory with the claude, codex, opencode executables")
    p.add_argument("--out", default=os.path.join(os.path.dirname(HERE), "tests", "data", "agents"))
    p.add_argument("--agents", default="claude,codex,opencode")
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--list", action="store_true", help="list scenarios and exit")
    a = p.parse_args()
    if a.list:
        for name, fn in SCENARIOS.items():
            doc = (fn.__doc__ or "").strip().splitlines()
            print("%-18s %s" % (name, doc[0] if doc else ""))
        return
    if not a.bin_dir:
        p.error("--bin-dir is required")
    # One recording at a time: they share HOME, the working directory and the port.
    # (a side experiment with its own DESK_CORPUS_* directories and port takes a lock of its own)
    lock = open("/tmp/desk-agent-corpus.lock" if PORT == 8765 else "/tmp/desk-agent-corpus-%d.lock" % PORT, "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        sys.exit("another agent-scenarios.py is running (lock /tmp/desk-agent-corpus.lock)")
    sanitize = make_sanitizer(a.bin_dir)
    for agent_name in a.agents.split(","):
        agent = AGENTS[agent_name](os.path.abspath(a.bin_dir))
        for sc in a.scenarios.split(","):
            if sc in ONLY and agent_name not in ONLY[sc]:
                continue
            run_scenario(agent, sc, SCENARIOS[sc], a, a.out, sanitize)


if __name__ == "__main__":
    main()
