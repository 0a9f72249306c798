//! Throughput and replay fidelity of the screen model, compared with what the master could have
//! used instead. Prints markdown tables for `docs/screen-model.md` (which also gives the avt
//! numbers, measured with a temporary dev-dependency, and how to reproduce them).
//!
//! Run: `cargo bench --bench screen_model` (release build, 120x40, 4 KiB chunks like PTY
//! reads, best of 3 rounds). Environment: `BENCH_MB` scales the inputs (default 50 for the
//! flood, 20 for the others).

use std::hint::black_box;
use std::time::Instant;

use desk_term::events::OutputEvent;
use desk_term::screen::Screen;

/// The size the brief's throughput target is stated for.
const COLS: u16 = 120;
const ROWS: u16 = 40;
/// A PTY read returns at most about a page, so the master feeds the model in pieces this big.
const CHUNK: usize = 4096;
/// The master's default history (`desk new --history`).
const HISTORY_LINES: usize = 10_000;
/// Best of a few rounds: the machine is shared, so single runs are noisy.
const ROUNDS: usize = 3;

/// xorshift64*: deterministic inputs without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `base64` of random bytes, 76 columns, through a PTY (so `\r\n`): what `cat`ing a large
/// encoded file looks like, and the usual "flood" for terminal benchmarks.
fn base64_flood(bytes: usize) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut out = Vec::with_capacity(bytes + 80);
    while out.len() < bytes {
        for _ in 0..76 {
            out.push(ALPHABET[rng.below(64) as usize]);
        }
        out.extend_from_slice(b"\r\n");
    }
    out.truncate(bytes);
    out
}

/// An escape-heavy stream shaped like a coding agent's TUI: coloured reply lines (some with
/// CJK and symbols, some wrapping), ink-style redraws of an input box (erase line, cursor up),
/// status lines addressed with CUP + EL, OSC 0 spinner titles, diff lines with background
/// colours, mode toggles and occasional full clears.
fn agent_like(bytes: usize) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "the",
        "parser",
        "fails",
        "when",
        "input",
        "ends",
        "with",
        "a",
        "backslash",
        "fix",
        "test",
        "src/lib.rs",
        "✓",
        "cargo",
        "build",
        "中文",
        "done",
        "→",
        "error[E0308]:",
        "mismatched",
    ];
    const SPINNER: &[&str] = &["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let mut out = String::with_capacity(bytes + 1024);
    while out.len() < bytes {
        match rng.below(100) {
            0..55 => {
                out.push_str(&format!("\x1b[38;5;{}m⏺\x1b[0m ", 100 + rng.below(100)));
                for _ in 0..4 + rng.below(24) {
                    let w = WORDS[rng.below(WORDS.len() as u64) as usize];
                    if rng.below(6) == 0 {
                        out.push_str(&format!("\x1b[1m{w}\x1b[22m "));
                    } else {
                        out.push_str(w);
                        out.push(' ');
                    }
                }
                out.push_str("\r\n");
            }
            55..70 => {
                let (sign, bg) = if rng.below(2) == 0 { ('+', 22) } else { ('-', 52) };
                out.push_str(&format!(
                    "\x1b[2m{:5}\x1b[0m \x1b[48;5;{bg}m{sign} let value = compute(input, {});\x1b[K\x1b[0m\r\n",
                    rng.below(999),
                    rng.below(99)
                ));
            }
            70..82 => {
                out.push_str("\x1b[2K\x1b[1A\x1b[2K\x1b[1A\x1b[2K\x1b[1A\x1b[2K\x1b[G");
                out.push_str(&format!("\x1b[38;5;244m╭{}╮\x1b[0m\r\n", "─".repeat(118)));
                out.push_str(&format!("\x1b[38;5;244m│\x1b[0m > {:<115}\x1b[38;5;244m│\x1b[0m\r\n", "typing"));
                out.push_str(&format!("\x1b[38;5;244m╰{}╯\x1b[0m\r\n", "─".repeat(118)));
                out.push_str("\x1b[2m  ? for shortcuts\x1b[0m");
            }
            82..90 => {
                out.push_str(&format!(
                    "\x1b7\x1b[{};1H\x1b[K\x1b[38;5;174m{}\x1b[0m Working… ({}s · esc to interrupt)\x1b8",
                    1 + rng.below(u64::from(ROWS)),
                    SPINNER[rng.below(10) as usize],
                    rng.below(60)
                ));
            }
            90..95 => out.push_str(&format!("\x1b]0;{} Agent\x07", SPINNER[rng.below(10) as usize])),
            95..98 => out.push_str(if rng.below(2) == 0 { "\x1b[?2004h\x1b[?25l" } else { "\x1b[?25h" }),
            _ => out.push_str("\x1b[H\x1b[2J"),
        }
    }
    let mut out = out.into_bytes();
    // Cut on a character boundary so every engine gets valid UTF-8.
    let mut end = bytes.min(out.len());
    while end < out.len() && (out[end] & 0xC0) == 0x80 {
        end += 1;
    }
    out.truncate(end);
    out
}

/// The recorded agent-like session from the tests, repeated.
fn recorded_agent(bytes: usize) -> Vec<u8> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/streams/agent.bin");
    let one = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut out = Vec::with_capacity(bytes + one.len());
    while out.len() < bytes {
        out.extend_from_slice(&one);
    }
    out
}

trait Engine {
    fn name(&self) -> &'static str;
    fn feed(&mut self, chunk: &[u8]);
    fn probe(&self) -> u64;
}

struct Copy(Vec<u8>);
impl Engine for Copy {
    fn name(&self) -> &'static str {
        "copy only (what dtach does)"
    }
    fn feed(&mut self, chunk: &[u8]) {
        self.0.clear();
        self.0.extend_from_slice(chunk);
    }
    fn probe(&self) -> u64 {
        self.0.len() as u64
    }
}

struct NoOp;
impl vte::Perform for NoOp {}
struct VteOnly(vte::Parser);
impl Engine for VteOnly {
    fn name(&self) -> &'static str {
        "vte 0.15 parse only"
    }
    fn feed(&mut self, chunk: &[u8]) {
        self.0.advance(&mut NoOp, chunk);
    }
    fn probe(&self) -> u64 {
        0
    }
}

struct Desk(Screen);
impl Engine for Desk {
    fn name(&self) -> &'static str {
        "desk screen model"
    }
    fn feed(&mut self, chunk: &[u8]) {
        self.0.process(chunk);
    }
    fn probe(&self) -> u64 {
        u64::from(self.0.cursor().0)
    }
}

/// What the master runs on every chunk: the screen model and the output events its parse finds
/// (titles, bells, modes, ...), drained after each chunk.
struct DeskFeed(Screen, Vec<OutputEvent>);
impl Engine for DeskFeed {
    fn name(&self) -> &'static str {
        "desk screen model + output events (`feed`, the master's path)"
    }
    fn feed(&mut self, chunk: &[u8]) {
        self.0.feed(chunk, &mut self.1);
        black_box(self.1.len());
        self.1.clear();
    }
    fn probe(&self) -> u64 {
        u64::from(self.0.cursor().0)
    }
}

/// The master's default: `feed` into a model that keeps a 10,000-line history (every row
/// scrolled off is stored).
struct DeskHistory(Screen, Vec<OutputEvent>);
impl Engine for DeskHistory {
    fn name(&self) -> &'static str {
        "desk `feed` with a 10,000-line history (the master's default)"
    }
    fn feed(&mut self, chunk: &[u8]) {
        self.0.feed(chunk, &mut self.1);
        black_box(self.1.len());
        self.1.clear();
    }
    fn probe(&self) -> u64 {
        u64::from(self.0.cursor().0)
    }
}

struct Vt100(vt100::Parser);
impl Engine for Vt100 {
    fn name(&self) -> &'static str {
        "vt100 0.18.1"
    }
    fn feed(&mut self, chunk: &[u8]) {
        self.0.process(chunk);
    }
    fn probe(&self) -> u64 {
        u64::from(self.0.screen().cursor_position().0)
    }
}

fn engines() -> Vec<Box<dyn Engine>> {
    let size = |n: u16| std::num::NonZeroU16::new(n).unwrap_or(std::num::NonZeroU16::MIN);
    vec![
        Box::new(Copy(Vec::with_capacity(CHUNK))),
        Box::new(VteOnly(vte::Parser::new())),
        Box::new(Desk(Screen::new(COLS, ROWS))),
        Box::new(DeskFeed(Screen::new(COLS, ROWS), Vec::new())),
        Box::new(DeskHistory(Screen::with_history(COLS, ROWS, HISTORY_LINES), Vec::new())),
        Box::new(Vt100(vt100::Parser::new(size(ROWS), size(COLS), 0))),
    ]
}

/// Best throughput over `ROUNDS` fresh runs, in MB/s (10^6 bytes).
fn throughput(index: usize, input: &[u8]) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..ROUNDS {
        let mut engine = engines().swap_remove(index);
        let start = Instant::now();
        for chunk in input.chunks(CHUNK) {
            engine.feed(chunk);
        }
        black_box(engine.probe());
        best = best.min(start.elapsed().as_secs_f64());
    }
    input.len() as f64 / best / 1e6
}

fn throughput_table() {
    let scale = std::env::var("BENCH_MB").ok().and_then(|v| v.parse::<usize>().ok());
    let flood_mb = scale.unwrap_or(50);
    let other_mb = scale.map_or(20, |s| s.min(20));
    let inputs = [
        (format!("base64 flood, {flood_mb} MB"), base64_flood(flood_mb * 1_000_000)),
        (format!("agent-like synthetic, {other_mb} MB"), agent_like(other_mb * 1_000_000)),
        (format!("recorded agent.bin repeated, {other_mb} MB"), recorded_agent(other_mb * 1_000_000)),
    ];
    println!("| engine ({COLS}x{ROWS}, {CHUNK}-byte chunks, best of {ROUNDS}) | {} |", {
        let names: Vec<&str> = inputs.iter().map(|(n, _)| n.as_str()).collect();
        names.join(" | ")
    });
    println!("|---|{}", "---:|".repeat(inputs.len()));
    for index in 0..engines().len() {
        let name = engines()[index].name();
        let cells: Vec<String> =
            inputs.iter().map(|(_, input)| format!("{:.0} MB/s", throughput(index, input))).collect();
        println!("| {name} | {} |", cells.join(" | "));
    }
}

/// A replay case: state after `pre`, serialised by an engine and replayed into a fresh
/// instance of the same engine, must then react to `post` like the original.
struct Case {
    name: &'static str,
    pre: &'static [u8],
    post: &'static [u8],
}

const CASES: &[Case] = &[
    Case {
        name: "text, wide chars, SGR",
        pre: "plain \x1b[1;31mred\x1b[0m 中文 e\u{301}\r\n".as_bytes(),
        post: b"more",
    },
    Case { name: "scroll region `CSI 1;4 r`, then scrolling", pre: b"\x1b[1;4r\x1b[4;1H", post: b"a\nb\nc\nd\ne\nf" },
    Case { name: "alternate screen `?1049h`, then `?1049l`", pre: b"main\x1b[?1049h\x1b[Halt", post: b"\x1b[?1049l" },
    Case { name: "DECSC `ESC 7`, then DECRC `ESC 8`", pre: b"\x1b[3;5H\x1b7\x1b[H", post: b"\x1b8X" },
    Case { name: "origin mode `?6h`, then `CUP 1;1`", pre: b"\x1b[5;10r\x1b[?6h", post: b"\x1b[1;1HX" },
    Case { name: "pending wrap, then one more character", pre: b"0123456789", post: b"Y" },
    Case { name: "split inside `CSI 31 m`", pre: b"\x1b[3", post: b"1mred" },
];

/// Small enough that scrolling and wrapping happen within the short replay cases.
const SMALL: (u16, u16) = (10, 6);

fn text_desk(s: &Screen) -> Vec<String> {
    s.text_rows()
}

fn replay_desk(case: &Case) -> &'static str {
    let (c, r) = SMALL;
    let mut a = Screen::new(c, r);
    a.process(case.pre);
    if !a.at_ground_state() {
        return "n/a: keyframes are taken only where `at_ground_state()`";
    }
    let mut b = Screen::new(c, r);
    b.process(&a.render_keyframe());
    a.process(case.post);
    b.process(case.post);
    if text_desk(&a) == text_desk(&b) && a.cursor() == b.cursor() { "same" } else { "**diverges**" }
}

fn replay_vt100(case: &Case) -> &'static str {
    let size = |n: u16| std::num::NonZeroU16::new(n).unwrap_or(std::num::NonZeroU16::MIN);
    let (c, r) = SMALL;
    let mut a = vt100::Parser::new(size(r), size(c), 0);
    a.process(case.pre);
    let mut b = vt100::Parser::new(size(r), size(c), 0);
    b.process(a.screen().state_formatted().as_bytes());
    a.process(case.post);
    b.process(case.post);
    let text = |p: &vt100::Parser| p.screen().rows(0, c).collect::<Vec<_>>();
    if text(&a) == text(&b) && a.screen().cursor_position() == b.screen().cursor_position() {
        "same"
    } else {
        "**diverges**"
    }
}

fn fidelity_table() {
    println!("| case ({}x{}) | desk keyframe | vt100 `state_formatted` |", SMALL.0, SMALL.1);
    println!("|---|---|---|");
    for case in CASES {
        println!("| {} | {} | {} |", case.name, replay_desk(case), replay_vt100(case));
    }
}

/// Keyframe size and render time: for the recorded streams (80x24, as they end) and for
/// worst-case screens where every cell has its own colours.
fn keyframe_table() {
    println!("| screen | keyframe bytes | render time |");
    println!("|---|---:|---:|");
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/streams");
    let mut names: Vec<_> =
        std::fs::read_dir(dir).map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect()).unwrap_or_default();
    names.retain(|p| p.extension().is_some_and(|e| e == "bin"));
    names.sort();
    let mut screens: Vec<(String, Screen)> = Vec::new();
    for path in names {
        let mut screen = Screen::new(80, 24);
        screen.process(&std::fs::read(&path).unwrap_or_default());
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        screens.push((format!("{name} at its end (80x24)"), screen));
    }
    for (cols, rows) in [(120u16, 40u16), (500, 400)] {
        // Every cell a different truecolour foreground and background, bold or not.
        let mut screen = Screen::new(cols, rows);
        let mut bytes = Vec::new();
        for i in 0..u32::from(cols) * u32::from(rows) {
            let (r, g, b) = (i % 256, (i / 256) % 256, (i * 7) % 256);
            bytes.extend_from_slice(
                format!("\x1b[{};38;2;{r};{g};{b};48;2;{b};{r};{g}m{}", 1 + i % 2, char::from(b'a' + (i % 26) as u8))
                    .as_bytes(),
            );
        }
        screen.process(&bytes);
        screens.push((format!("every cell coloured ({cols}x{rows})"), screen));
    }
    for (name, screen) in &screens {
        let start = Instant::now();
        let mut size = 0;
        let runs = 20;
        for _ in 0..runs {
            size = black_box(screen.render_keyframe()).len();
        }
        let micros = start.elapsed().as_secs_f64() * 1e6 / f64::from(runs);
        println!("| {name} | {size} | {micros:.0} µs |");
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this quickly as a smoke test.
    let quick = !std::env::args().any(|a| a == "--bench");
    fidelity_table();
    println!();
    if quick {
        return;
    }
    keyframe_table();
    println!();
    throughput_table();
}
