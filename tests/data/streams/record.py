#!/usr/bin/env python3
"""Records what real programs write to a pseudo-terminal, for the screen model's tests.

Usage: python3 tests/data/streams/record.py [NAME ...]   (no NAME: record every scenario)

Each scenario runs a program on a fresh 80x24 PTY (TERM=xterm-256color, LANG=C.UTF-8, line
discipline defaults, so "\\n" reaches us as "\\r\\n"), types scripted keys at fixed delays, and
saves every byte the program wrote as NAME.bin next to this script. Nothing answers the
program's terminal queries, so the recording shows what a program writes when the terminal
stays silent. The expected final screens (NAME.screen.txt) are written by the test suite's
model and reviewed by hand; see README.md.
"""

import fcntl
import os
import pty
import select
import signal
import struct
import sys
import tempfile
import termios
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
COLS, ROWS = 80, 24
ESC = "\x1b"


def record(argv, steps, timeout=20.0, cwd=None, kill_after=None):
    """Runs argv on a PTY; `steps` is a list of (delay_seconds, bytes_to_type). With
    `kill_after`, the program is killed (SIGKILL, so it cannot clean up) that many seconds
    after the last step, leaving the recording in the middle of its session."""
    env = dict(os.environ, TERM="xterm-256color", LANG="C.UTF-8", LC_ALL="C.UTF-8",
               COLUMNS=str(COLS), LINES=str(ROWS), HOME=cwd or os.environ.get("HOME", "/"))
    pid, fd = pty.fork()
    if pid == 0:
        if cwd:
            os.chdir(cwd)
        os.execvpe(argv[0], argv, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    out = bytearray()
    start = time.monotonic()
    schedule = []
    t = 0.0
    for delay, keys in steps:
        t += delay
        schedule.append((t, keys.encode() if isinstance(keys, str) else keys))
    kill_at = None if kill_after is None else t + kill_after
    while True:
        now = time.monotonic() - start
        while schedule and schedule[0][0] <= now:
            os.write(fd, schedule.pop(0)[1])
        if kill_at is not None and now > kill_at:
            os.kill(pid, signal.SIGKILL)
            kill_at = None
        if now > timeout:
            os.kill(pid, signal.SIGKILL)
            raise SystemExit(f"{argv[0]}: timed out")
        ready, _, _ = select.select([fd], [], [], 0.02)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            out += data
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done and not select.select([fd], [], [], 0.05)[0]:
            break
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    os.close(fd)
    return bytes(out)


def plain(tmp):
    script = ("ls -l --color=always --time-style=+%Y /usr/share/doc | head -25; "
              "seq 1 30 | paste -sd' '; seq 3; printf 'done\\n'")
    return record(["bash", "--norc", "--noprofile", "-c", script], [])


def less(tmp):
    path = os.path.join(tmp, "notes.txt")
    with open(path, "w") as f:
        for i in range(1, 301):
            if i % 17 == 0:
                f.write(f"line {i}: " + "a long line that wraps past the right margin " * 3 + "\n")
            else:
                f.write(f"line {i}: the quick brown fox jumps over the lazy dog\n")
    steps = [(0.5, " "), (0.3, " "), (0.3, "b"), (0.2, "j"), (0.1, "j"), (0.1, "j"),
             (0.1, "k"), (0.1, "k"), (0.2, "/line 150\r"), (0.4, "G"), (0.3, "g"), (0.3, "q")]
    script = "printf 'before less\\n'; less -R notes.txt; printf 'after less\\n'"
    return record(["bash", "--norc", "--noprofile", "-c", script], steps, cwd=tmp)


CURSES_REGION = r'''
import curses, time
def main(stdscr):
    curses.use_default_colors()
    curses.init_pair(1, curses.COLOR_BLACK, curses.COLOR_CYAN)
    stdscr.addstr(0, 0, " build log ".ljust(80), curses.color_pair(1))
    stdscr.addstr(23, 0, " q to quit ".ljust(79), curses.color_pair(1))
    stdscr.refresh()
    log = curses.newwin(21, 80, 1, 0)
    log.scrollok(True)
    log.idlok(True)
    for i in range(60):
        log.addstr(20, 0, f"step {i:3d}: compiling module_{i % 7} ... ok")
        log.scroll(1)
        log.refresh()
        time.sleep(0.01)
    log.addstr(20, 0, "all steps finished")
    log.refresh()
    time.sleep(0.2)
curses.wrapper(main)
print("curses program exited")
'''


def curses_region(tmp):
    return record(["python3", "-c", CURSES_REGION], [])


def vim(tmp):
    path = os.path.join(tmp, "todo.txt")
    with open(path, "w") as f:
        f.write("first line\nsecond line\nthird line\n")
    # Ends while vim is still open (killed), so the alternate screen is active at the end.
    steps = [(0.8, "i"), (0.2, "Hello from vim, typing a line\r"), (0.2, ESC), (0.3, "gg"),
             (0.2, "dd"), (0.2, "Go"), (0.2, "wide 中文 and e\u0301"), (0.2, ESC),
             (0.3, ":%s/line/row/g\r"), (0.3, ":w\r")]
    script = "printf 'shell output before vim\\n'; exec vim --clean -N todo.txt"
    return record(["bash", "--norc", "--noprofile", "-c", script], steps, cwd=tmp, kill_after=0.5)


WIDE = r'''
print("CJK: 中文字符 日本語 한국어")
print("emoji: 😀 🚀 ✅ done")
print("combining: e\u0301 cafe\u0301 n\u0303o a\u0308\u0301")
print("x" * 79 + "中 <- wide char did not fit at the last column")
print("中" * 40, end="")
print("\u0301 <- mark after a full row of wide chars")
print("\u2500" * 80, end="")
print("box drawing exactly filling a row")
print("tab\tstops\tand\ttext")
'''


def wide(tmp):
    return record(["python3", "-c", WIDE], [])


AGENT = r'''
import sys, time
out = sys.stdout
W = 80
def w(s):
    out.write(s); out.flush()
def title(t):
    w(f"\x1b]0;{t}\x07")
def box(lines, color="38;5;244"):
    w(f"\x1b[{color}m╭" + "─" * (W - 2) + "╮\x1b[0m\r\n")
    for line in lines:
        w(f"\x1b[{color}m│\x1b[0m " + line.ljust(W - 4) + f" \x1b[{color}m│\x1b[0m\r\n")
    w(f"\x1b[{color}m╰" + "─" * (W - 2) + "╯\x1b[0m\r\n")
def prompt_block(text, status="  ? for shortcuts"):
    box(["\x1b[1m>\x1b[0m " + text])
    w(f"\x1b[2m{status}\x1b[0m")
def erase_block(lines):
    # ink/log-update style: clear the block we drew last time, bottom up
    w("\x1b[2K" + "\x1b[1A\x1b[2K" * (lines - 1) + "\x1b[G")
title("✳ Agent")
w("\x1b[?2004h\x1b[?1004h\x1b[?25l")
box(["\x1b[38;5;174m✻\x1b[0m Welcome to \x1b[1mAgent\x1b[0m research preview!", "",
     "  /help for help, /status for your current setup", "", "  cwd: /work/project"])
w("\r\n")
prompt_block("")
typed = ""
for ch in "fix the failing test in src/parser.rs":
    typed += ch
    erase_block(4)
    prompt_block(typed + "\x1b[7m \x1b[0m")
    time.sleep(0.01)
erase_block(4)
w("\x1b[38;5;246m> " + typed + "\x1b[0m\r\n\r\n")
frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
for i in range(24):
    f = frames[i % len(frames)]
    title(f"{f} Agent")
    w(f"\r\x1b[2K\x1b[38;5;174m{f}\x1b[0m Thinking… \x1b[2m({i // 8}s · esc to interrupt)\x1b[0m")
    time.sleep(0.02)
w("\r\x1b[2K")
reply = ("I looked at the parser and the failing test. The tokenizer treats a trailing "
         "backslash as an escape even at the end of input, so the last token is dropped. "
         "Here is the fix, which keeps the backslash when nothing follows it:")
w("\x1b[38;5;174m⏺\x1b[0m ")
for word in reply.split(" "):
    w(word + " ")
    time.sleep(0.003)
w("\r\n\r\n")
w("  \x1b[38;5;244m⎿\x1b[0m  \x1b[1mUpdate\x1b[0m(src/parser.rs)\r\n")
diff = [("   41", "  ", "fn next_token(&mut self) -> Option<Token> {", None),
        ("   42", "- ", "    if c == '\\\\' { return self.escape(); }", "48;5;52"),
        ("   42", "+ ", "    if c == '\\\\' && !self.at_end() { return self.escape(); }", "48;5;22"),
        ("   43", "  ", "    self.plain()", None)]
for num, sign, code, bg in diff:
    if bg:
        w(f"\x1b[{bg}m{num} {sign}{code}\x1b[K\x1b[0m\r\n")
    else:
        w(f"\x1b[2m{num}\x1b[0m {sign}{code}\r\n")
w("\r\n\x1b[38;5;174m⏺\x1b[0m The test passes now: \x1b[32m✓ parser::trailing_backslash\x1b[0m\r\n\r\n")
title("✳ Agent")
prompt_block("", "  \x1b[38;5;114m⏵⏵ accept edits on\x1b[0m (shift+tab to cycle)")
time.sleep(0.1)
'''


def agent(tmp):
    return record(["python3", "-c", AGENT], [])


SCENARIOS = {
    "plain": plain,
    "less": less,
    "curses-region": curses_region,
    "vim": vim,
    "wide": wide,
    "agent": agent,
}


def main():
    names = sys.argv[1:] or list(SCENARIOS)
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            data = SCENARIOS[name](tmp)
        path = os.path.join(HERE, f"{name}.bin")
        with open(path, "wb") as f:
            f.write(data)
        print(f"{name}: {len(data)} bytes -> {os.path.relpath(path)}")


if __name__ == "__main__":
    main()
