#!/usr/bin/env python3
"""Run a program on a pseudo-terminal, act as its terminal, and record what it does.

Used to build desk's agent corpus (tests/data/agents/). The recorder:

  * spawns the command on a PTY of a fixed size (default 120x40), TERM=xterm-256color;
  * answers the terminal queries a headless program would otherwise wait on (DA1, DA2,
    DSR/CPR, XTVERSION, DECRQM, OSC 10/11 colour queries, XTWINOPS sizes) and logs every query,
    answered or not (--no-answer answers none, to see whether a program waits);
  * keeps a screen model (pyte) so a script can wait for text to appear;
  * tracks private modes (DECSET/DECRST: 2004 bracketed paste, 1049 alt screen, 1 app cursor,
    mouse, focus), kitty keyboard push/pop/set, modifyOtherKeys, titles (OSC 0/1/2), other OSCs
    (notifications such as OSC 9/777) and bells, each with its time;
  * feeds scripted input (typed text, bracketed paste, Enter in the same write or after a delay).

Outputs, for --out PREFIX:
  PREFIX.cast          asciicast v2: header line, then [t, "o"|"i"|"m", data] per line
                       ("o" = bytes from the program, "i" = bytes written to it, "m" = a step marker)
  PREFIX.events.jsonl  one JSON object per observed event (title, mode, query, osc, bell, mark,
                       snapshot, exit), with "t" in seconds since spawn
  PREFIX.screens.txt   labelled screen snapshots (text only), the last one taken at the end

It can be driven two ways: as a library (import it, see scenarios in agent-scenarios.py), or from
the command line with a JSON list of steps (--steps FILE), e.g.
  [{"wait": "Try \\"", "timeout": 30}, {"type": "hello"}, {"key": "enter"}, {"quiet": 2000},
   {"snap": "after"}]
Step kinds: wait (regex on screen text), quiet (ms without output), sleep (s), type (text, one
write), paste (text, bracketed; "enter": "same" | milliseconds), key (enter|esc|tab|up|down|
ctrl-c|...), snap (label), mark (label).
"""

import argparse
import codecs
import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import sys
import termios
import threading
import time

try:
    import pyte
except ImportError:  # pragma: no cover
    sys.exit("record-agent.py needs pyte (pip install pyte)")

KEYS = {
    "enter": b"\r", "esc": b"\x1b", "tab": b"\t", "backspace": b"\x7f",
    "up": b"\x1b[A", "down": b"\x1b[B", "right": b"\x1b[C", "left": b"\x1b[D",
    "ctrl-c": b"\x03", "f2": b"\x1bOQ", "ctrl-d": b"\x04", "ctrl-u": b"\x15", "shift-tab": b"\x1b[Z",
    "1": b"1", "2": b"2", "3": b"3", "y": b"y", "n": b"n",
}

# Modes whose every flip is too frequent to be worth a timeline entry; they are counted instead.
NOISY_MODES = {"25", "2026"}

QUERY_RE = re.compile(
    rb"\x1b\[(?P<kb_op>[>=<])(?P<kb_args>[0-9;]*)u"
    rb"|\x1b\[(?P<csi_priv>[?>=<]?)(?P<csi_args>[0-9;]*)(?P<csi_inter>\$?)(?P<csi_final>[cnqtpu])"
    rb"|\x1b\](?P<osc_num>[0-9]+);(?P<osc_body>[^\x07\x1b]*)(?:\x07|\x1b\\)"
    rb"|\x1bP(?P<dcs>[^\x1b]*)\x1b\\"
    rb"|\x1b_(?P<apc>[^\x1b]*)\x1b\\"
    rb"|\x1b\[(?P<mode_priv>\?)(?P<mode_args>[0-9;]+)(?P<mode_final>[hl])"
    rb"|\x1b\[>(?P<mok_args>4(?:;[0-9]+)?)m"
    rb"|\x1b(?P<keypad>[=>])"
)


PYTE_HIDE_RE = re.compile(rb"\x1b\[[<>=?][0-9;]*u|\x1b\[>[0-9;]*m")


class Screen(pyte.Screen):
    """pyte screen that also reports bells to the recorder."""

    def __init__(self, cols, rows, on_bell):
        super().__init__(cols, rows)
        self._on_bell = on_bell

    def bell(self, *args):
        self._on_bell()

    def write_process_input(self, data):  # pyte answers DA itself otherwise; we do that
        pass


class Recorder:
    def __init__(self, argv, out, cols=120, rows=40, env=None, cwd=None, answer=True, kitty=False,
                 background="dark"):
        self.argv = argv
        self.out = out
        self.cols, self.rows = cols, rows
        self.answer = answer
        self.kitty = kitty
        self.background = background
        self.lock = threading.RLock()
        self.events = []
        self.cast = []
        self.snaps = []
        self.modes = {}
        self.mode_counts = {}
        self.kitty_stack = []
        self.raw = bytearray()
        self.scan_pos = 0
        self.last_title = None
        self.last_output = None
        self.exit_status = None
        self.screen = Screen(cols, rows, self._bell)
        self.stream = pyte.ByteStream(self.screen)
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.env = dict(env or os.environ)
        self.env.setdefault("TERM", "xterm-256color")
        self.env.setdefault("LANG", "C.UTF-8")
        self.cwd = cwd
        self.t0 = time.monotonic()
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # child
            try:
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
                if cwd:
                    os.chdir(cwd)
                os.execvpe(argv[0], argv, self.env)
            except Exception as e:  # pragma: no cover
                os.write(2, ("exec failed: %s\n" % e).encode())
                os._exit(127)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.t0 = time.monotonic()
        self.closed = False
        self.reader = threading.Thread(target=self._read_loop, daemon=True)
        self.reader.start()

    # -- time and events -------------------------------------------------------------------------

    def now(self):
        return round(time.monotonic() - self.t0, 4)

    def event(self, kind, **fields):
        with self.lock:
            self.events.append({"t": self.now(), "ev": kind, **fields})

    def _bell(self):
        self.event("bell")

    # -- reading ----------------------------------------------------------------------------------

    def _read_loop(self):
        while True:
            try:
                r, _, _ = select.select([self.fd], [], [], 0.05)
            except (OSError, ValueError):
                break
            if not r:
                if self._child_done():
                    break
                continue
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                data = b""
            if not data:
                break
            self._on_output(data)
        self._child_done(block=True)
        self.closed = True

    def _child_done(self, block=False):
        if self.exit_status is not None:
            return True
        try:
            pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:
            return False
        if os.WIFEXITED(status):
            self.exit_status = {"code": os.WEXITSTATUS(status)}
        else:
            self.exit_status = {"signal": os.WTERMSIG(status)}
        self.event("exit", **self.exit_status)
        return True

    def _on_output(self, data):
        with self.lock:
            t = self.now()
            self.last_output = t
            text = self.decoder.decode(data)
            if text:
                self.cast.append([t, "o", text])
            self.raw.extend(data)
            self._scan()
            try:
                # pyte does not know kitty keyboard / modifyOtherKeys sequences and would print
                # their final byte; they carry no screen content, so hide them from it.
                self.stream.feed(PYTE_HIDE_RE.sub(b"", data))
            except Exception as e:  # pyte should not stop a recording
                self.event("pyte-error", error=repr(e))

    def _reply(self, what, data):
        if self.answer and data is not None:
            self.write(data, log_as="reply:" + what)
            return True
        return False

    def _scan(self):
        buf = self.raw
        start = self.scan_pos
        last_end = start
        for m in QUERY_RE.finditer(buf, start):
            last_end = m.end()
            self._handle(m)
        self.scan_pos = max(last_end, len(buf) - 256, 0)
        # drop what can no longer matter, keep memory small
        if self.scan_pos > 1 << 20:
            cut = self.scan_pos - 1024
            del self.raw[:cut]
            self.scan_pos -= cut

    def _handle(self, m):
        g = m.groupdict()
        if g["csi_final"] is not None:
            self._csi_query(g["csi_priv"].decode(), g["csi_args"].decode(), g["csi_inter"].decode(),
                            g["csi_final"].decode())
        elif g["osc_num"] is not None:
            self._osc(int(g["osc_num"]), g["osc_body"].decode("utf-8", "replace"))
        elif g["dcs"] is not None:
            body = g["dcs"].decode("utf-8", "replace")
            if body.startswith("+q"):
                names = [bytes.fromhex(h).decode("latin-1", "replace") for h in body[2:].split(";") if
                         re.fullmatch(r"[0-9A-Fa-f]+", h)]
                ok = self._reply("XTGETTCAP", b"\x1bP0+r\x1b\\")
                self.event("query", name="XTGETTCAP", seq=body[:80], caps=names, answered=ok)
            elif body.startswith("$q"):
                ok = self._reply("DECRQSS", b"\x1bP0$r\x1b\\")
                self.event("query", name="DECRQSS", seq=body[:80], answered=ok)
            elif body.startswith("=1s") or body.startswith("=2s"):
                pass  # synchronized update (old DCS form)
            else:
                self.event("dcs", body=body[:120])
        elif g["apc"] is not None:
            body = g["apc"].decode("utf-8", "replace")
            self.event("query" if body.startswith("G") else "apc", name="kitty-graphics" if body.startswith("G")
                       else None, seq=body[:80], answered=False)
        elif g["mode_final"] is not None:
            on = g["mode_final"] == b"h"
            for p in g["mode_args"].decode().split(";"):
                if not p:
                    continue
                prev = self.modes.get(p)
                self.modes[p] = on
                if p in NOISY_MODES:
                    self.mode_counts[p] = self.mode_counts.get(p, 0) + 1
                    if prev is None:
                        self.event("mode", mode=p, on=on, note="first change; later flips counted only")
                elif prev != on:
                    self.event("mode", mode=p, on=on)
        elif g["kb_op"] is not None:
            op, args = g["kb_op"].decode(), g["kb_args"].decode()
            if op == ">":
                self.kitty_stack.append(int(args.split(";")[0] or 0))
                self.event("kitty-keyboard", op="push", flags=args)
            elif op == "<":
                n = int(args or 1)
                del self.kitty_stack[-n:]
                self.event("kitty-keyboard", op="pop", n=n)
            else:
                self.event("kitty-keyboard", op="set", args=args)
        elif g["mok_args"] is not None:
            self.event("modify-other-keys", args=g["mok_args"].decode())
        elif g["keypad"] is not None:
            mode = "application" if g["keypad"] == b"=" else "normal"
            if self.modes.get("keypad") != mode:
                self.modes["keypad"] = mode
                self.event("mode", mode="keypad", value=mode)

    def _csi_query(self, priv, args, inter, final):
        name, reply = None, None
        if final == "c" and priv == "" and args in ("", "0"):
            name, reply = "DA1", b"\x1b[?62;22c"
        elif final == "c" and priv == ">" and args in ("", "0"):
            name, reply = "DA2", b"\x1b[>1;10;0c"
        elif final == "c" and priv == "=":
            name = "DA3"
        elif final == "n" and priv == "" and args == "5":
            name, reply = "DSR", b"\x1b[0n"
        elif final == "n" and args == "6":
            y, x = self.screen.cursor.y + 1, self.screen.cursor.x + 1
            name = "CPR" if priv == "" else "DECXCPR"
            reply = ("\x1b[%d;%dR" % (y, x) if priv == "" else "\x1b[?%d;%d;1R" % (y, x)).encode()
        elif final == "n" and priv == "?" and args == "996":
            name, reply = "color-scheme", b"\x1b[?997;1n" if self.background == "dark" else b"\x1b[?997;2n"
        elif final == "q" and priv == ">" and args in ("", "0"):
            name, reply = "XTVERSION", b"\x1bP>|desk-recorder 0.1\x1b\\"
        elif final == "u" and priv == "?":
            name = "kitty-keyboard-query"
            if self.kitty:
                reply = ("\x1b[?%du" % (self.kitty_stack[-1] if self.kitty_stack else 0)).encode()
        elif final == "p" and inter == "$" and priv == "?":
            name = "DECRQM"
            mode = args
            known = {"1", "7", "12", "25", "47", "1000", "1002", "1003", "1004", "1006", "1047", "1049", "2004",
                     "2026"}
            state = 0
            if mode in known:
                state = 1 if self.modes.get(mode) else 2
            reply = ("\x1b[?%s;%d$y" % (mode, state)).encode()
        elif final == "t" and priv == "" and args in ("14", "16", "18"):
            name = "XTWINOPS-" + args
            reply = {"14": "\x1b[4;%d;%dt" % (self.rows * 16, self.cols * 8),
                     "16": "\x1b[6;16;8t",
                     "18": "\x1b[8;%d;%dt" % (self.rows, self.cols)}[args].encode()
        if name is None:
            return
        ok = self._reply(name, reply)
        self.event("query", name=name, seq=("CSI " + priv + args + inter + final), answered=ok)

    def _osc(self, num, body):
        if num in (0, 1, 2):
            if (num, body) != self.last_title:
                self.last_title = (num, body)
                self.event("title", osc=num, title=body,
                           codepoints=" ".join("U+%04X" % ord(c) for c in body[:3]))
            return
        if num in (10, 11, 12) and body == "?":
            rgb = {10: "ffff/ffff/ffff", 11: "0000/0000/0000", 12: "ffff/ffff/ffff"}[num]
            if self.background != "dark":
                rgb = {10: "0000/0000/0000", 11: "ffff/ffff/ffff", 12: "0000/0000/0000"}[num]
            ok = self._reply("OSC%d" % num, ("\x1b]%d;rgb:%s\x1b\\" % (num, rgb)).encode())
            self.event("query", name="OSC%d?" % num, answered=ok)
            return
        if num == 4 and body.endswith(";?"):
            self.event("query", name="OSC4?", seq=body[:40], answered=False)
            return
        if num == 8:
            return  # hyperlinks: too many, not state
        self.event("osc", osc=num, body=body[:200])

    # -- writing ----------------------------------------------------------------------------------

    def write(self, data, log_as=None):
        if isinstance(data, str):
            data = data.encode()
        with self.lock:
            t = self.now()
            self.cast.append([t, "i", data.decode("utf-8", "replace")])
            if log_as and log_as.startswith("reply:"):
                pass
        os.write(self.fd, data)

    def type(self, text):
        self.write(text)

    def key(self, name):
        self.write(KEYS[name])

    def paste(self, text, enter=None):
        """Bracketed paste of text; enter None = no Enter, "same" = CR in the same write, or a
        delay in milliseconds before a separate CR write (0 = immediately, as a second write)."""
        body = b"\x1b[200~" + text.encode() + b"\x1b[201~"
        if enter == "same":
            self.write(body + b"\r")
            return
        self.write(body)
        if enter is not None:
            if enter > 0:
                time.sleep(enter / 1000.0)
            self.write(b"\r")

    def mark(self, label, **fields):
        with self.lock:
            self.cast.append([self.now(), "m", label])
        self.event("mark", label=label, **fields)

    # -- waiting and reading the screen ------------------------------------------------------------

    def text(self):
        with self.lock:
            return "\n".join(line.rstrip() for line in self.screen.display).rstrip("\n")

    def wait(self, pattern, timeout=30.0, absent=False):
        """Wait until the screen matches (or, with absent, no longer matches) pattern."""
        rx = re.compile(pattern, re.M)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = rx.search(self.text()) is not None
            if found != absent:
                return True
            if self.closed:
                return False
            time.sleep(0.03)
        return False

    def wait_quiet(self, ms, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                last = self.last_output if self.last_output is not None else 0
            if self.now() - last >= ms / 1000.0:
                return True
            if self.closed:
                return True
            time.sleep(0.02)
        return False

    def wait_until(self, predicate, timeout=30.0, poll=0.05):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(poll)
        return False

    def snap(self, label):
        text = self.text()
        with self.lock:
            self.snaps.append((self.now(), label, text))
            title = self.last_title[1] if self.last_title else None
        self.event("snapshot", label=label, title=title)
        return text

    # -- ending and saving -------------------------------------------------------------------------

    def stop(self, grace=3.0):
        """Stop the child: SIGHUP (as a closing terminal would), then SIGKILL after grace."""
        if self.exit_status is None:
            try:
                os.killpg(self.pid, signal.SIGHUP)
            except ProcessLookupError:
                pass
            self.reader.join(grace)
            if self.exit_status is None:
                try:
                    os.killpg(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.reader.join(5)

    def save(self, header_extra=None, sanitize=None):
        sanitize = sanitize or (lambda s: s)
        self.snap("end")
        header = {"version": 2, "width": self.cols, "height": self.rows,
                  "env": {"TERM": self.env.get("TERM"), "SHELL": "/bin/sh"},
                  "answers_queries": self.answer, "kitty_keyboard": self.kitty}
        if header_extra:
            header.update(header_extra)
        os.makedirs(os.path.dirname(os.path.abspath(self.out)), exist_ok=True)
        with open(self.out + ".cast", "w", encoding="utf-8") as f:
            f.write(json.dumps(header, ensure_ascii=False) + "\n")
            for ev in self.cast:
                f.write(json.dumps([ev[0], ev[1], sanitize(ev[2])], ensure_ascii=False) + "\n")
        with open(self.out + ".events.jsonl", "w", encoding="utf-8") as f:
            for ev in self.events:
                f.write(sanitize(json.dumps(ev, ensure_ascii=False)) + "\n")
            f.write(json.dumps({"t": self.now(), "ev": "summary", "modes_at_end": self.modes,
                                "noisy_mode_flips": self.mode_counts}) + "\n")
        with open(self.out + ".screens.txt", "w", encoding="utf-8") as f:
            for t, label, text in self.snaps:
                f.write("===== %s  t=%.3f  (%dx%d)\n" % (label, t, self.cols, self.rows))
                f.write(sanitize(text) + "\n")


def run_steps(rec, steps):
    for st in steps:
        if "wait" in st:
            ok = rec.wait(st["wait"], st.get("timeout", 30))
            rec.mark("wait " + ("ok" if ok else "TIMEOUT"), pattern=st["wait"])
        elif "quiet" in st:
            rec.wait_quiet(st["quiet"], st.get("timeout", 30))
        elif "sleep" in st:
            time.sleep(st["sleep"])
        elif "type" in st:
            rec.type(st["type"])
        elif "paste" in st:
            rec.paste(st["paste"], st.get("enter"))
        elif "key" in st:
            rec.key(st["key"])
        elif "snap" in st:
            rec.snap(st["snap"])
        elif "mark" in st:
            rec.mark(st["mark"])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="output prefix (PREFIX.cast, .events.jsonl, .screens.txt)")
    p.add_argument("--cols", type=int, default=120)
    p.add_argument("--rows", type=int, default=40)
    p.add_argument("--cwd", help="directory to run the command in")
    p.add_argument("--env", action="append", default=[], help="K=V added to the environment (repeatable)")
    p.add_argument("--clean-env", action="store_true",
                   help="start from an environment of only PATH and LANG (plus --env), not this one")
    p.add_argument("--no-answer", action="store_true", help="answer no terminal query (see who waits)")
    p.add_argument("--kitty", action="store_true", help="claim kitty keyboard protocol support")
    p.add_argument("--steps", help="JSON file with a list of steps (see above)")
    p.add_argument("--duration", type=float, default=10.0, help="without --steps: seconds to record")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- command and arguments")
    a = p.parse_args()
    argv = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not argv:
        p.error("no command given")
    env = dict(os.environ) if not a.clean_env else {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    for kv in a.env:
        k, _, v = kv.partition("=")
        env[k] = v
    rec = Recorder(argv, a.out, a.cols, a.rows, env=env, cwd=a.cwd, answer=not a.no_answer, kitty=a.kitty)
    try:
        if a.steps:
            with open(a.steps) as f:
                run_steps(rec, json.load(f))
        else:
            time.sleep(a.duration)
    finally:
        rec.stop()
        rec.save()


if __name__ == "__main__":
    main()
