"""The shapes of prompt people write, for checking delivery into the real agents.

One definition, used by scripts/agent-scenarios.py (the `shapes` recordings under
tests/data/agents/, replayed by tests/it/corpus.rs) and scripts/e2e-shapes.py (`make
e2e-agents`: each shape sent with `desk send` to each agent, alone while idle and queued
mid-turn as a digest, checked against what the model stand-in received).

Each shape is (name, what it is, text). Every text carries TOKEN, replaced by a token unique to
the run and the shape, so that a request can be told apart from any other.
"""

FENCE = "`" * 3


def long_prompt(lines):
    return "\n".join("line %02d of a long prompt TOKEN with a few more words in it" % (i + 1)
                     for i in range(lines))


SHAPES = [
    ("paragraphs", "paragraphs separated by blank lines",
     "First paragraph TOKEN: please look at the parser.\n\n"
     "Second paragraph: it fails on empty input.\n\n"
     "Third paragraph: keep the tests green."),
    ("code", "a fenced code block with indentation",
     "Fix this function TOKEN:\n\n"
     + FENCE + "python\n"
     "def parse(text):\n"
     "    if not text:\n"
     "        return None\n"
     "    for line in text.splitlines():\n"
     "        yield line.strip()\n"
     + FENCE + "\n\n"
     "It should return an empty list instead."),
    ("lists", "markdown lists, nested and numbered",
     "Plan TOKEN:\n"
     "- read the module\n"
     "  - note every public function\n"
     "  - note its callers\n"
     "- write the tests\n\n"
     "1. first step\n"
     "2. second step\n"
     "3. third step"),
    ("cjk-emoji", "CJK text and emoji, wide and joined",
     "请检查这个函数 TOKEN 🙂 日本語のテキストも 👨‍👩‍👧 한국어 ✅ done"),
    ("long", "64 lines (past every agent's paste placeholder threshold)",
     long_prompt(64)),
    ("short-lines", "60 short lines, under 1000 characters (a list Codex shows whole)",
     "TOKEN list:\n" + "\n".join("- item %02d" % (i + 1) for i in range(60))),
    ("blank-ends", "leading and trailing blank lines",
     "\n\n\nLeading and trailing blank lines TOKEN\nsecond line\n\n\n"),
]


def text_of(shape_text, token):
    return shape_text.replace("TOKEN", token)
