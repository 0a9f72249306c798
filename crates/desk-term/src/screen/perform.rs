//! Maps what vte parsed (controls, escape and control sequences, OSC strings) onto terminal
//! operations, answers terminal queries, and reports the output events found on the way (the
//! bell, titles, notifications, state reports, and mode changes measured on the model's own
//! modes before and after each operation that can change them).
//!
//! Owns the decoding of parameters (defaults, SGR colour forms) and the query answers; the
//! operations themselves live in `term.rs`. Invariants: every sequence not listed here is
//! ignored without touching state; a sequence vte flagged as overflowing (too many
//! parameters or intermediates) is ignored whole rather than half-applied; answers go through
//! `Term::reply`, which bounds them. Queries answered: DA1 (`CSI c`, `CSI 0 c`) as a VT220
//! with ANSI colour (`CSI ? 62 ; 22 c`: xterm's level for `decTerminalID=220`, without the
//! features it adds there and we do not implement, such as printer or rectangle editing), DA2
//! (`CSI > c`) as `CSI > 1 ; 10 ; 0 c`, DSR 5 (`CSI 0 n`) and DSR 6 (cursor position, 1-based,
//! relative to the scroll region in origin mode). Kitty keyboard queries (`CSI ? u`) are
//! deliberately not answered, so TUIs stay on the legacy key encoding.

use vte::{Params, Perform};

use super::cell::{Attrs, Color, flag};
use super::modes::Charset;
use super::term::Term;
use crate::events::{self, OutputEvent, TITLE_CAP};

/// DA1 answer: VT220 (62) with ANSI colour (22).
pub const DA1_REPLY: &[u8] = b"\x1b[?62;22c";
/// DA2 answer: terminal type 1 (VT220), version 10, no options.
pub const DA2_REPLY: &[u8] = b"\x1b[>1;10;0c";
/// DSR 5 answer: "no malfunction".
pub(super) const DSR_OK_REPLY: &[u8] = b"\x1b[0n";

/// The first value of parameter `i` (0 when absent or empty).
fn param(params: &Params, i: usize) -> u16 {
    params.iter().nth(i).and_then(|p| p.first().copied()).unwrap_or(0)
}

/// The first value of parameter `i`, with 0 meaning `default`.
fn arg(params: &Params, i: usize, default: u16) -> usize {
    match param(params, i) {
        0 => usize::from(default),
        v => usize::from(v),
    }
}

/// Colour from the parts after "38"/"48": `[5, n]` or `[2, r, g, b]` or `[2, cs, r, g, b]`
/// (xterm: four or more values after the 2 means the first is a colour-space id). `None` when
/// malformed or out of range (the parameters are still consumed, as in xterm).
fn extended_color(kind: u16, rest: &[u16]) -> Option<Color> {
    let byte = |v: u16| u8::try_from(v).ok();
    match kind {
        5 => rest.first().and_then(|&v| byte(v)).map(Color::Indexed),
        2 => {
            let rgb = if rest.len() >= 4 { &rest[1..4] } else { rest };
            match rgb {
                [r, g, b] => Some(Color::Rgb(byte(*r)?, byte(*g)?, byte(*b)?)),
                _ => None,
            }
        }
        _ => None,
    }
}

fn charset(final_byte: u8) -> Charset {
    if final_byte == b'0' { Charset::DecSpecial } else { Charset::Ascii }
}

impl Term {
    /// SGR.
    fn sgr(&mut self, params: &Params) {
        let mut iter = params.iter();
        while let Some(p) = iter.next() {
            let code = p.first().copied().unwrap_or(0);
            if p.len() > 1 {
                // Colon sub-parameters: only the extended colours accept them (xterm ignores
                // any other code that carries some).
                let color = extended_color(p[1], &p[2..]);
                match (code, color) {
                    (38, Some(c)) => self.pen.fg = c,
                    (48, Some(c)) => self.pen.bg = c,
                    _ => {}
                }
                continue;
            }
            let pen = &mut self.pen;
            match code {
                0 => *pen = Attrs::default(),
                1 => pen.flags |= flag::BOLD,
                2 => pen.flags |= flag::DIM,
                3 => pen.flags |= flag::ITALIC,
                4 => pen.flags |= flag::UNDERLINE,
                5 | 6 => pen.flags |= flag::BLINK,
                7 => pen.flags |= flag::INVERSE,
                8 => pen.flags |= flag::HIDDEN,
                9 => pen.flags |= flag::STRIKE,
                21 => pen.flags |= flag::DOUBLE_UNDERLINE,
                22 => pen.flags &= !(flag::BOLD | flag::DIM),
                23 => pen.flags &= !flag::ITALIC,
                24 => pen.flags &= !(flag::UNDERLINE | flag::DOUBLE_UNDERLINE),
                25 => pen.flags &= !flag::BLINK,
                27 => pen.flags &= !flag::INVERSE,
                28 => pen.flags &= !flag::HIDDEN,
                29 => pen.flags &= !flag::STRIKE,
                30..=37 => pen.fg = Color::Indexed((code - 30) as u8),
                39 => pen.fg = Color::Default,
                40..=47 => pen.bg = Color::Indexed((code - 40) as u8),
                49 => pen.bg = Color::Default,
                90..=97 => pen.fg = Color::Indexed((code - 90 + 8) as u8),
                100..=107 => pen.bg = Color::Indexed((code - 100 + 8) as u8),
                38 | 48 => {
                    let Some(kind_param) = iter.next() else {
                        break;
                    };
                    let kind = kind_param.first().copied().unwrap_or(0);
                    let color = if kind_param.len() > 1 {
                        // Mixed form, e.g. `38;2:1:2:3` or `38;5:1`.
                        extended_color(kind, &kind_param[1..])
                    } else {
                        let wanted = match kind {
                            5 => 1,
                            2 => 3,
                            _ => 0,
                        };
                        let mut values = [0u16; 3];
                        let mut got = 0;
                        while got < wanted {
                            match iter.next() {
                                Some(v) => values[got] = v.first().copied().unwrap_or(0),
                                None => break,
                            }
                            got += 1;
                        }
                        if got == wanted { extended_color(kind, &values[..got]) } else { None }
                    };
                    if let Some(c) = color {
                        if code == 38 {
                            self.pen.fg = c;
                        } else {
                            self.pen.bg = c;
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// DSR.
    fn device_status(&mut self, code: u16) {
        match code {
            5 => self.reply(DSR_OK_REPLY),
            6 => {
                let top = if self.modes.origin { self.top } else { 0 };
                let row = (self.cur.row + 1).saturating_sub(top).max(1);
                let col = self.cur.col + 1;
                let answer = format!("\x1b[{row};{col}R");
                self.reply(answer.as_bytes());
            }
            _ => {}
        }
    }
}

impl Perform for Term {
    fn print(&mut self, c: char) {
        Term::print(self, c);
    }

    fn execute(&mut self, byte: u8) {
        // A control after an OSC's closing ESC means that ESC was not ST; and vte reports an
        // OSC aborted by CAN or SUB as a dispatch followed by executing them.
        self.osc_unconfirmed = false;
        match byte {
            0x07 => self.events.push(OutputEvent::Bell),
            0x08 => self.cursor_back(1),
            0x09 => self.tab(1),
            0x0A..=0x0C => self.linefeed(),
            0x0D => self.carriage_return(),
            0x0E => self.gl = 1,
            0x0F => self.gl = 0,
            // NUL, ENQ, C1 controls and the rest: nothing on screen changes.
            _ => {}
        }
    }

    fn esc_dispatch(&mut self, intermediates: &[u8], ignore: bool, byte: u8) {
        let osc_ended = std::mem::take(&mut self.osc_unconfirmed);
        if ignore {
            return;
        }
        match (intermediates, byte) {
            // ST: it confirms the OSC string whose ESC it began.
            ([], b'\\') if osc_ended => self.apply_osc(),
            ([], b'7') => self.save_cursor(),
            ([], b'8') => self.restore_cursor(),
            ([], b'=') => self.modes.app_keypad = true,
            ([], b'>') => self.modes.app_keypad = false,
            ([], b'D') => self.index(),
            ([], b'E') => {
                self.index();
                self.carriage_return();
            }
            ([], b'H') => self.tabs.set(self.cur.col),
            ([], b'M') => self.reverse_index(),
            ([], b'c') => {
                let before = self.mode_bits();
                self.full_reset();
                self.report_modes(before);
            }
            ([b'#'], b'8') => self.alignment_test(),
            ([b'('], f) => self.charsets[0] = charset(f),
            ([b')'], f) => self.charsets[1] = charset(f),
            _ => {}
        }
    }

    fn csi_dispatch(&mut self, params: &Params, intermediates: &[u8], ignore: bool, action: char) {
        self.osc_unconfirmed = false;
        if ignore {
            return;
        }
        let n = |default| arg(params, 0, default);
        match (intermediates, action) {
            ([], '@') => self.insert_chars(n(1)),
            ([], 'A') => self.cursor_up(n(1)),
            ([], 'B') => self.cursor_down(n(1)),
            ([], 'C') => self.cursor_forward(n(1)),
            ([], 'D') => self.cursor_back(n(1)),
            ([], 'E') => {
                self.cursor_down(n(1));
                self.carriage_return();
            }
            ([], 'F') => {
                self.cursor_up(n(1));
                self.carriage_return();
            }
            ([], 'G' | '`') => self.set_cursor(self.cursor_row_rel(), n(1) as i64 - 1),
            ([], 'H' | 'f') => {
                self.set_cursor(n(1) as i64 - 1, arg(params, 1, 1) as i64 - 1);
            }
            ([], 'I') => self.tab(n(1)),
            ([], 'J') => self.erase_display(param(params, 0)),
            ([], 'K') => self.erase_line(param(params, 0)),
            // DECSED (`CSI ? Ps J`), DECSEL (`CSI ? Ps K`) and DECSCA (`CSI Ps " q`) fall
            // through to the ignored sequences, as in tmux and alacritty: no cell is protected,
            // and a selective erase erases nothing (docs/screen-model.md).
            ([], 'L') => self.insert_lines(n(1)),
            ([], 'M') => self.delete_lines(n(1)),
            ([], 'P') => self.delete_chars(n(1)),
            ([], 'S') => self.scroll_up(n(1)),
            // xterm reads `CSI Ps ; Ps ; ... T` with several parameters as mouse tracking.
            ([], 'T') if params.len() <= 1 => self.scroll_down(n(1)),
            ([], 'X') => self.erase_chars(n(1)),
            ([], 'Z') => self.back_tab(n(1)),
            ([], 'a') => {
                let col = self.cur.col as i64 + n(1) as i64;
                self.set_cursor(self.cursor_row_rel(), col);
            }
            ([], 'b') => self.repeat(n(1)),
            ([], 'c') if param(params, 0) == 0 => self.reply(DA1_REPLY),
            ([b'>'], 'c') if param(params, 0) == 0 => self.reply(DA2_REPLY),
            ([], 'd') => self.set_cursor(n(1) as i64 - 1, self.cur.col as i64),
            ([], 'e') => {
                let row = self.cursor_row_rel() + n(1) as i64;
                self.set_cursor(row, self.cur.col as i64);
            }
            ([], 'g') => match param(params, 0) {
                0 => self.tabs.clear(self.cur.col),
                3 => self.tabs.clear_all(),
                _ => {}
            },
            ([], 'h' | 'l') => {
                for p in params.iter() {
                    self.ansi_mode(p.first().copied().unwrap_or(0), action == 'h');
                }
            }
            ([b'?'], 'h' | 'l') => {
                for p in params.iter() {
                    let before = self.mode_bits();
                    self.private_mode(p.first().copied().unwrap_or(0), action == 'h');
                    self.report_modes(before);
                }
            }
            ([], 'm') => self.sgr(params),
            ([], 'n') => self.device_status(param(params, 0)),
            ([], 'r') => self.set_scroll_region(param(params, 0), param(params, 1)),
            ([], 's') if params.len() <= 1 && param(params, 0) == 0 => self.save_cursor(),
            ([], 'u') if params.len() <= 1 && param(params, 0) == 0 => self.restore_cursor(),
            ([b'!'], 'p') => {
                let before = self.mode_bits();
                self.soft_reset();
                self.report_modes(before);
            }
            ([b' '], 'q') => {
                let style = param(params, 0);
                if style <= 6 {
                    self.modes.cursor_style = style;
                }
            }
            _ => {}
        }
    }

    fn hook(&mut self, _params: &Params, _intermediates: &[u8], _ignore: bool, _action: char) {
        // A DCS after `ESC ] ... ESC`: that ESC was not ST.
        self.osc_unconfirmed = false;
    }

    fn osc_dispatch(&mut self, params: &[&[u8]], bell_terminated: bool) {
        // vte splits at every ';', but a title or a notification may contain them: join the
        // pieces back into the string as it was sent.
        self.osc.clear();
        for (i, param) in params.iter().enumerate() {
            if i > 0 {
                self.osc.push(b';');
            }
            self.osc.extend_from_slice(param);
        }
        if bell_terminated {
            self.osc_unconfirmed = false;
            self.apply_osc();
        } else {
            // Ended by an ESC (ST or the start of something else) or by CAN/SUB: vte cannot
            // tell which yet; the next callback does.
            self.osc_unconfirmed = true;
        }
    }
}

impl Term {
    /// Acts on the OSC string in `self.osc`, now known to be complete: titles set the model's
    /// title and icon name (and are reported); notifications and state reports are reported.
    fn apply_osc(&mut self) {
        let osc = std::mem::take(&mut self.osc);
        let (command, rest) = match osc.iter().position(|&b| b == b';') {
            Some(at) => (&osc[..at], Some(&osc[at + 1..])),
            None => (&osc[..], None),
        };
        match (command, rest) {
            (b"0" | b"1" | b"2", Some(rest)) => {
                let text = Term::clean_title(rest);
                if command != b"2" {
                    self.icon_name = text.clone();
                    self.events.push(OutputEvent::IconName { name: events::cut_str(&text, TITLE_CAP) });
                }
                if command != b"1" {
                    self.events.push(OutputEvent::Title { title: events::cut_str(&text, TITLE_CAP) });
                    self.title = text;
                }
            }
            (b"0" | b"1" | b"2", None) => {}
            (command, rest) => events::osc_event(command, rest.unwrap_or_default(), &mut self.events),
        }
        self.osc = osc;
    }
}
