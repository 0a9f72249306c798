#!/usr/bin/env python3
"""Print the screen of a recorded .cast (tests/data/agents) at given times.

Usage: cast-screen.py FILE.cast [--at T ...] [--every S] [--grep REGEX]

Replays the "o" events through a pyte screen of the recorded size and prints the screen text
at each time T (seconds since spawn), or every S seconds, or, with --grep, at each output event
after which the screen (newly) matches REGEX. For reading recordings by eye; desk's own tests
replay the same files through its own emulator.
"""

import argparse
import json
import re

import pyte

HIDE = re.compile(r"\x1b\[[<>=?][0-9;]*u|\x1b\[>[0-9;]*m")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("cast")
    p.add_argument("--at", type=float, action="append", default=[])
    p.add_argument("--every", type=float)
    p.add_argument("--grep")
    a = p.parse_args()
    with open(a.cast, encoding="utf-8") as f:
        header = json.loads(f.readline())
        events = [json.loads(line) for line in f if line.strip()]
    screen = pyte.Screen(header["width"], header["height"])
    stream = pyte.Stream(screen)
    times = sorted(a.at)
    if a.every:
        end = events[-1][0] if events else 0
        times += [i * a.every for i in range(int(end / a.every) + 2)]
        times.sort()
    rx = re.compile(a.grep) if a.grep else None
    matched = False

    def show(label):
        print("===== %s" % label)
        print("\n".join(line.rstrip() for line in screen.display).rstrip("\n"))

    for t, code, data in events:
        while times and times[0] < t:
            show("t=%.3f" % times.pop(0))
        if code == "o":
            stream.feed(HIDE.sub("", data))
            if rx:
                now = any(rx.search(line) for line in screen.display)
                if now and not matched:
                    show("t=%.3f (matches %s)" % (t, a.grep))
                matched = now
    for t in times:
        show("t=%.3f (after the end)" % t)


if __name__ == "__main__":
    main()
