//! Typing into a session that has no agent's input box: a program reading a line the kernel
//! edits, or an interactive shell waiting at its prompt; and, for any session, who has the
//! terminal.
//!
//! Owns deciding from one look at the screen, and what the master says about the terminal at
//! that instant (canonical mode, the foreground process group, whether it waits in a read),
//! whether what desk types now would be read as a prompt by the session's own program — and,
//! for a shell, whether it took the line after the Enter. Invariants: nothing is typed while a
//! job the program started has the terminal (a shell's `sleep`: the kernel would hold the
//! line until the job ends, and the shell would then run it as a command); in canonical mode,
//! nothing is typed while the master knows that nobody reads the terminal (a shell running a
//! loop of builtins); a shell with its own line editor (raw mode) is typed into only at an
//! empty prompt it recognises, never into a draft, and its Enter counts as taken only on
//! positive evidence (the shell ran something, left its line editor, or is back at an empty
//! prompt). What a shell is and what its prompt looks like come from the provider's table
//! (`line_editors`, `prompt`). Pure: no clock, no I/O.

use super::engine::ScreenView;
use super::settings::DeliverySettings;
use unicode_width::UnicodeWidthChar;

/// How the session's program reads what is typed now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// A program reading a line the kernel edits (canonical mode): `sh`, `cat`, `read`.
    Canonical,
    /// An interactive shell (bash, zsh, fish) whose own line editor reads raw keys.
    Shell,
}

/// Why nothing may be typed: a job the session's program started has the terminal, so the
/// kernel would hand what is typed to that job, or hold it for the program until the job ends.
pub fn job_in_foreground(screen: &ScreenView) -> Option<String> {
    let fg = screen.foreground.as_ref().filter(|fg| !fg.own)?;
    let program = if fg.program.is_empty() { "a job".to_string() } else { format!("`{}`", fg.program) };
    Some(format!(
        "{program} (process group {}) has the terminal, not the session's own program; nothing is typed until the program has it back (a shell: is back at its prompt)",
        fg.pgid
    ))
}

/// The session's program's name, when the master says (`bash`); its group has the terminal.
fn program(screen: &ScreenView) -> Option<&str> {
    screen.foreground.as_ref().filter(|fg| fg.own && !fg.program.is_empty()).map(|fg| fg.program.as_str())
}

/// How a session without a composer reads what is typed now, or why it reads nothing.
pub fn reader(screen: &ScreenView, settings: &DeliverySettings) -> Result<Reader, String> {
    if let Some(why) = job_in_foreground(screen) {
        return Err(why);
    }
    let shell = program(screen).filter(|p| settings.line_editors.iter().any(|l| l == p));
    if screen.canonical {
        if screen.foreground.as_ref().is_some_and(|fg| fg.reading == Some(false)) {
            let who = program(screen).unwrap_or("the program");
            return Err(format!(
                "nothing reads the terminal now ({who} is busy: what is typed would wait for whatever reads it next); nothing is typed until {who} waits for a line"
            ));
        }
        return Ok(Reader::Canonical);
    }
    match shell {
        Some(_) => Ok(Reader::Shell),
        None => Err("the program is not reading a line (raw mode: an editor or full-screen program)".into()),
    }
}

/// What a shell's row shows at the cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PromptSeen {
    /// An empty prompt: the shell waits for a command.
    Empty,
    /// An empty continuation prompt (bash's `>`, zsh's `quote>`): the shell waits for the rest
    /// of a command it has begun to read.
    Continuation,
    /// Anything else: a draft, a menu, a prompt desk does not recognise, no prompt at all.
    Other,
}

/// What the shell's row shows at the cursor: the text left of the cursor ends the way the
/// table's `prompt` (or `continuation`) says, nothing is right of the cursor, and the rows below
/// are blank (no completion menu, no second line of a draft).
fn prompt_seen(screen: &ScreenView, settings: &DeliverySettings) -> PromptSeen {
    let Some(row) = screen.lines.get(screen.cursor_row) else { return PromptSeen::Other };
    let (left, right) = split_at_column(row, screen.cursor_col);
    let left = left.trim_end();
    if !right.trim().is_empty() || !screen.lines.iter().skip(screen.cursor_row + 1).all(|l| l.trim().is_empty()) {
        return PromptSeen::Other;
    }
    if settings.continuation.as_ref().is_some_and(|re| re.is_match(left)) {
        return PromptSeen::Continuation;
    }
    if settings.prompt.as_ref().is_some_and(|re| re.is_match(left)) {
        return PromptSeen::Empty;
    }
    PromptSeen::Other
}

/// Whether a shell waits at an empty prompt for a command (not for the rest of one).
pub fn at_empty_prompt(screen: &ScreenView, settings: &DeliverySettings) -> bool {
    prompt_seen(screen, settings) == PromptSeen::Empty
}

/// A row's text left and right of a column, counting cells (a wide character takes two).
fn split_at_column(row: &str, column: usize) -> (&str, &str) {
    let mut used = 0;
    for (i, c) in row.char_indices() {
        if used >= column {
            return row.split_at(i);
        }
        used += c.width().unwrap_or(0);
    }
    (row, "")
}

/// Why nothing may be typed into a session without a composer at the look before typing:
/// nothing reads a line, or a shell is not at an empty prompt (then the way to type it
/// anyway). `text` is the prompt, to suggest that command.
pub fn typing_hold(screen: &ScreenView, settings: &DeliverySettings, session: &str, text: &str) -> Option<String> {
    match reader(screen, settings) {
        Err(why) => Some(why),
        Ok(Reader::Canonical) => None,
        Ok(Reader::Shell) => match prompt_seen(screen, settings) {
            PromptSeen::Empty => None,
            PromptSeen::Continuation => Some(format!(
                "{} waits for the rest of a command (a continuation prompt: an unclosed quote or block); nothing is typed into it. Finish it, or cancel it with: desk keys {session} C-c",
                program(screen).unwrap_or("the shell")
            )),
            PromptSeen::Other => Some(not_at_prompt(screen, session, text)),
        },
    }
}

/// Why a shell is not typed into when its prompt is not empty, and how to type it anyway.
fn not_at_prompt(screen: &ScreenView, session: &str, text: &str) -> String {
    let shell = program(screen).unwrap_or("the shell");
    format!(
        "{shell} is not at an empty prompt desk recognises (its line holds text, a menu or a right-hand prompt shows, or its prompt does not end in one of $ # % > ❯ »); nothing is typed. To type it yourself: desk keys {session} {} Enter",
        keys_text(text)
    )
}

/// How the prompt is written in the suggested `desk keys` command: shell-quoted when it is one
/// short line, a placeholder otherwise.
fn keys_text(text: &str) -> String {
    let text = text.trim_end_matches('\n');
    if text.contains('\n') || text.chars().count() > 200 {
        return "'TEXT'".into();
    }
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// What a look after the Enter shows about the line typed at a shell's prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterEnter {
    /// The shell took it and runs (or ran) it; the evidence.
    Ran(String),
    /// The shell took it but waits for the rest of the command: it has not run it.
    Incomplete,
}

/// What a look after the Enter shows about a line typed at a shell's prompt: a job it started
/// has the terminal, it put its line editor away (the terminal went back to canonical mode: it
/// runs the line), or it is back at an empty prompt — or at a continuation prompt, waiting for
/// the rest. `None`: nothing yet.
pub fn shell_took_line(screen: &ScreenView, settings: &DeliverySettings) -> Option<AfterEnter> {
    if let Some(fg) = screen.foreground.as_ref().filter(|fg| !fg.own) {
        return Some(AfterEnter::Ran(format!("the shell runs it: `{}` has the terminal", fg.program)));
    }
    if screen.canonical {
        return Some(AfterEnter::Ran(
            "the shell put its line editor away to run it (the terminal left raw mode)".into(),
        ));
    }
    match prompt_seen(screen, settings) {
        PromptSeen::Empty => Some(AfterEnter::Ran("the shell is back at an empty prompt".into())),
        PromptSeen::Continuation => Some(AfterEnter::Incomplete),
        PromptSeen::Other => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::Provider;
    use desk_wire::Foreground;

    fn screen(lines: &[&str], cursor: (usize, usize), canonical: bool, fg: Option<Foreground>) -> ScreenView {
        ScreenView {
            lines: lines.iter().map(|l| l.to_string()).collect(),
            bracketed_paste: !canonical,
            last_typed_ms: None,
            canonical,
            cursor_row: cursor.0,
            cursor_col: cursor.1,
            foreground: fg,
        }
    }

    fn fg(program: &str, own: bool, reading: Option<bool>) -> Option<Foreground> {
        Some(Foreground { pgid: 42, program: program.into(), own, reading })
    }

    #[test]
    fn a_shell_at_an_empty_prompt_is_typed_into_and_a_draft_or_a_job_holds() {
        let settings = Provider::Shell.delivery();
        let bash = || fg("bash", true, None);
        let at_prompt = screen(&["$ ls", "a b", "bash-5.2$"], (2, 10), false, bash());
        assert_eq!(reader(&at_prompt, &settings), Ok(Reader::Shell));
        assert_eq!(typing_hold(&at_prompt, &settings, "b", "echo hi"), None);
        for prompt in ["user@host:~/src$", "[user@host src]$", "host%", "user@host ~>", "root@host:/#", "❯"] {
            let col = prompt.chars().count() + 1;
            let s = screen(&[prompt], (0, col), false, bash());
            assert!(at_empty_prompt(&s, &settings), "{prompt}");
        }
        // A draft, text right of the cursor, a menu below: not an empty prompt.
        for (row, col, below) in
            [("bash-5.2$ echo $", 16, ""), ("bash-5.2$ ls", 10, ""), ("bash-5.2$", 10, "a.txt  b.txt")]
        {
            let s = screen(&[row, below], (0, col), false, bash());
            let why = typing_hold(&s, &settings, "b", "echo 'hi'").expect("held");
            assert!(why.contains("desk keys b 'echo '\\''hi'\\''' Enter"), "{why}");
        }
        // `sleep` has the terminal: held, whatever the screen shows.
        let job = screen(&["bash-5.2$ sleep 8", ""], (1, 0), true, fg("sleep", false, Some(false)));
        let why = typing_hold(&job, &settings, "b", "x").expect("held");
        assert!(why.starts_with("`sleep` (process group 42) has the terminal"), "{why}");
        assert_eq!(job_in_foreground(&job), Some(why));
    }

    #[test]
    fn a_line_reader_is_typed_into_only_while_something_reads() {
        let settings = Provider::Shell.delivery();
        let reading = screen(&["name?"], (0, 5), true, fg("sh", true, Some(true)));
        assert_eq!(typing_hold(&reading, &settings, "s", "x"), None);
        // An older master says nothing of the foreground: canonical mode alone, as before.
        assert_eq!(typing_hold(&screen(&[""], (0, 0), true, None), &settings, "s", "x"), None);
        // A shell running a loop of builtins: canonical, its own, not reading.
        let busy = screen(&["bash-5.2$ for i in $(seq 9); do :; done"], (1, 0), true, fg("bash", true, Some(false)));
        let why = typing_hold(&busy, &settings, "s", "x").expect("held");
        assert!(why.starts_with("nothing reads the terminal now (bash is busy"), "{why}");
        // A full-screen program that is not a shell.
        let vim = screen(&["~"], (0, 0), false, fg("vim", true, None));
        assert!(typing_hold(&vim, &settings, "s", "x").unwrap().starts_with("the program is not reading a line"));
    }

    #[test]
    fn a_shell_took_the_line_when_it_runs_it_or_is_back_at_its_prompt() {
        let settings = Provider::Shell.delivery();
        let bash = || fg("bash", true, None);
        let typed = screen(&["bash-5.2$ echo hi"], (0, 17), false, bash());
        assert_eq!(shell_took_line(&typed, &settings), None);
        let ran = |s: &ScreenView| match shell_took_line(s, &settings) {
            Some(AfterEnter::Ran(evidence)) => evidence,
            other => panic!("{other:?}"),
        };
        let back = screen(&["bash-5.2$ echo hi", "hi", "bash-5.2$"], (2, 10), false, bash());
        assert_eq!(ran(&back), "the shell is back at an empty prompt");
        let running = screen(&["bash-5.2$ sleep 9", ""], (1, 0), true, fg("sleep", false, Some(false)));
        assert!(ran(&running).contains("`sleep` has the terminal"));
        let builtin = screen(&["bash-5.2$ read x", ""], (1, 0), true, bash());
        assert!(ran(&builtin).contains("left raw mode"));
        // An unclosed quote: bash and zsh read the line and wait for the rest at a continuation
        // prompt, which no prompt is typed into either.
        for (row, col) in [(">", 2), ("quote>", 7), ("for dquote>", 12)] {
            let s = screen(&["bash-5.2$ echo it's", row], (1, col), false, bash());
            assert_eq!(shell_took_line(&s, &settings), Some(AfterEnter::Incomplete), "{row}");
            let why = typing_hold(&s, &settings, "b", "x").expect("held");
            assert!(why.contains("waits for the rest of a command") && why.contains("desk keys b C-c"), "{why}");
        }
        // fish takes Enter on an incomplete line as a newline in its own editor: not taken.
        let newline = screen(&["user@host ~> echo 'abc", "       "], (1, 7), false, fg("fish", true, None));
        assert_eq!(shell_took_line(&newline, &settings), None);
    }

    #[test]
    fn columns_count_cells_not_characters() {
        assert_eq!(split_at_column("中文$ x", 4), ("中文", "$ x"));
        assert_eq!(split_at_column("ab", 5), ("ab", ""));
    }
}
