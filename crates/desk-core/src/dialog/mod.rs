//! An agent's dialog as its screen shows it: where it is, what it asks, the options it offers,
//! which one is highlighted, its fingerprint, and the keys that pick an option.
//!
//! Owns the provider's dialog rules (the `[dialog]` table of `state/rules/<provider>.toml`,
//! learned from the recordings under `tests/data/agents/`: [`DialogSpec`]), reading a dialog off
//! a screen ([`DialogSpec::read`]), its fingerprint, and turning an operator's choice into the
//! provider's own keys ([`DialogSpec::keys`]). `desk inbox`, `desk approve`, the dashboard and
//! the attach client read dialogs from a snapshot's rows; the master reads the same rows from
//! its screen model (with the cells' colours, for agents that mark the highlighted option only
//! with colour) when it checks and types an answer, so both sides compute the same
//! fingerprint.
//!
//! Invariants: the fingerprint is a function of the dialog's text alone — not of the highlight,
//! the terminal's width (rows are joined as words) or where on the screen it is — so a dialog
//! changes fingerprint exactly when what it says changes; a screen without the provider's
//! dialog footer has no dialog; keys are computed only from a dialog whose options were read
//! and, for arrow keys, whose highlight is known. Pure: no I/O, no clock.

mod sha256;

use regex_lite::Regex;
use serde::{Deserialize, Serialize};
use unicode_width::UnicodeWidthStr;

/// Characters taken off both ends of every row before it is read: box sides and frame bars
/// agents draw dialogs in (`│ Bash command │`, OpenCode's `┃`).
const FRAME_CHARS: &[char] = &['│', '┃', '║', '▌', '▐'];

/// How the table spells a dialog's rules (`[dialog]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DialogSpecFile {
    /// The dialog's last row (its footer): the last row on the screen that matches.
    end: String,
    /// Its first row: the nearest row above its first option (or above the end) that matches.
    top: Option<String>,
    /// Or: the dialog is the run of rows matching this around its end row.
    frame: Option<String>,
    /// A row that makes it a question (a choice to make) rather than an approval.
    question: Option<String>,
    /// What it asks: patterns with `tool` and/or `args` groups, tried on its rows joined by
    /// newlines, then on the `context_rows` rows above it; the first match wins.
    #[serde(default, rename = "ask")]
    asks: Vec<AskFile>,
    #[serde(default = "default_context_rows")]
    context_rows: usize,
    /// Options on one row (`Allow once   Allow always   Reject`): a pattern whose `options`
    /// group holds them, separated by two spaces or more. Otherwise options are numbered rows.
    option_row: Option<String>,
    /// Characters an agent draws before the highlighted option (`❯ 1. Yes`).
    #[serde(default)]
    highlight: Vec<String>,
    /// The option an approval without a named option picks.
    #[serde(default = "default_approve")]
    approve: u8,
    /// The option that refuses (its label matches); without one, `cancel` refuses.
    deny: Option<String>,
    #[serde(default)]
    keys: KeysFile,
}

fn default_context_rows() -> usize {
    4
}

fn default_approve() -> u8 {
    1
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct AskFile {
    pattern: String,
    /// The tool's name when the pattern has no `tool` group (Codex's `$ command`).
    tool: Option<String>,
}

/// How the agent takes an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Pick {
    /// The option's digit alone picks it.
    Digit,
    /// Arrows move the highlight to it, `confirm` picks it.
    #[default]
    Arrows,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysFile {
    #[serde(default)]
    pick: Pick,
    #[serde(default = "key_down")]
    next: String,
    #[serde(default = "key_up")]
    prev: String,
    #[serde(default = "key_right")]
    row_next: String,
    #[serde(default = "key_left")]
    row_prev: String,
    #[serde(default = "key_enter")]
    confirm: String,
    #[serde(default = "key_esc")]
    cancel: String,
}

impl Default for KeysFile {
    fn default() -> Self {
        KeysFile {
            pick: Pick::default(),
            next: key_down(),
            prev: key_up(),
            row_next: key_right(),
            row_prev: key_left(),
            confirm: key_enter(),
            cancel: key_esc(),
        }
    }
}

fn key_down() -> String {
    "Down".into()
}
fn key_up() -> String {
    "Up".into()
}
fn key_right() -> String {
    "Right".into()
}
fn key_left() -> String {
    "Left".into()
}
fn key_enter() -> String {
    "Enter".into()
}
fn key_esc() -> String {
    "Esc".into()
}

/// A provider's dialog rules, compiled.
#[derive(Debug, Clone)]
pub struct DialogSpec {
    provider: String,
    end: Regex,
    top: Option<Regex>,
    frame: Option<Regex>,
    question: Option<Regex>,
    asks: Vec<(Regex, Option<String>)>,
    context_rows: usize,
    option_row: Option<Regex>,
    highlight: Vec<String>,
    approve: u8,
    deny: Option<Regex>,
    keys: KeysFile,
}

/// How a dialog lays out its options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// One per row, numbered (`❯ 1. Yes`).
    Numbered,
    /// All on one row (`Allow once   Allow always   Reject`).
    Row,
}

/// What a dialog asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Permission to run a tool (a command, an edit).
    Approval,
    /// A choice among answers.
    Question,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Approval => "approval",
            Kind::Question => "question",
        }
    }
}

/// One option of a dialog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DialogOption {
    /// Its number, from 1 (its place in a row of options).
    pub number: u8,
    pub label: String,
    /// The agent highlights it (Enter picks it); `None`: the screen does not say.
    pub highlighted: Option<bool>,
}

/// A dialog as the screen shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dialog {
    pub kind: Kind,
    /// Its first row (`Bash command`, `Would you like to run the following command?`).
    pub title: String,
    /// Its question: the first row ending in `?`, else its title.
    pub question: String,
    /// The tool it asks to run (`Bash`, `Write`, `Shell`), when the rules can tell.
    pub tool: Option<String>,
    /// The tool's arguments (the command, the file), when the rules can tell.
    pub args: Option<String>,
    pub layout: Layout,
    pub options: Vec<DialogOption>,
    /// Its rows as shown, blank and rule rows left out, frame bars taken off.
    pub text: Vec<String>,
    /// [`fingerprint`] of `text`.
    pub fingerprint: String,
}

impl Dialog {
    /// What it asks, in one line: `Bash(touch a.txt)`, else its question.
    pub fn asks(&self) -> String {
        match (&self.tool, &self.args) {
            (Some(tool), Some(args)) => format!("{tool}({args})"),
            (Some(tool), None) => tool.clone(),
            (None, Some(args)) => args.clone(),
            (None, None) => self.question.clone(),
        }
    }

    /// The option that the highlight is on, if the screen says.
    pub fn highlighted(&self) -> Option<u8> {
        self.options.iter().find(|o| o.highlighted == Some(true)).map(|o| o.number)
    }

    /// The option an operator named: its number, or a word its label starts with (any case),
    /// which must name exactly one.
    pub fn find_option(&self, named: &str) -> Result<&DialogOption, String> {
        let listed =
            || self.options.iter().map(|o| format!("{}. {}", o.number, o.label)).collect::<Vec<_>>().join(", ");
        if let Ok(n) = named.trim().parse::<u8>() {
            return self
                .options
                .iter()
                .find(|o| o.number == n)
                .ok_or_else(|| format!("the dialog has no option {n}; it offers: {}", listed()));
        }
        let want = named.trim().to_lowercase();
        let found: Vec<&DialogOption> =
            self.options.iter().filter(|o| o.label.to_lowercase().starts_with(&want)).collect();
        match found.as_slice() {
            [one] => Ok(one),
            [] => Err(format!("no option of the dialog starts with {named:?}; it offers: {}", listed())),
            _ => Err(format!("{named:?} names more than one option; use its number: {}", listed())),
        }
    }

    /// What changed from `self` (what the operator was shown) to `now`, in words.
    pub fn changes_to(&self, now: &Dialog) -> String {
        if self.fingerprint == now.fingerprint {
            return "nothing".into();
        }
        if self.asks() != now.asks() {
            return format!("it asked {}, and now asks {}", self.asks(), now.asks());
        }
        let labels = |d: &Dialog| d.options.iter().map(|o| o.label.clone()).collect::<Vec<_>>();
        if labels(self) != labels(now) {
            return format!("its options were {}, and now are {}", labels(self).join(" / "), labels(now).join(" / "));
        }
        let gone: Vec<&String> = self.text.iter().filter(|r| !now.text.contains(r)).collect();
        let new: Vec<&String> = now.text.iter().filter(|r| !self.text.contains(r)).collect();
        match (gone.first(), new.first()) {
            (Some(g), Some(n)) => format!("its text changed: {g:?} is now {n:?}"),
            (None, Some(n)) => format!("it now also says {n:?}"),
            (Some(g), None) => format!("it no longer says {g:?}"),
            (None, None) => "its text changed".into(),
        }
    }
}

/// The fingerprint of a dialog's rows shown by the session `scope` names (`NAME/GENERATION`):
/// the first 128 bits of SHA-256 over the scope and the dialog's words (rows joined, whitespace
/// collapsed, highlight marks taken off), in hex. Only what the dialog says and whose it is
/// count: not where the highlight is, nor how the terminal's width wrapped its rows; the same
/// question in another session, or in a later run of the same one, is another dialog.
pub fn fingerprint(scope: &str, text: &[String], marks: &[String]) -> String {
    let mut words = format!("desk-dialog-v1 {scope}\n");
    for row in text {
        let mut row = row.as_str();
        for mark in marks {
            row = row.trim_start().strip_prefix(mark.as_str()).unwrap_or(row);
        }
        for word in row.split_whitespace() {
            words.push(' ');
            words.push_str(word);
        }
    }
    sha256::digest(words.as_bytes())[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// An operator's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// Pick this option.
    Option(u8),
    /// Refuse: the dialog's refusing option, else its cancel key.
    Deny,
}

/// Why an answer has no keys.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeysError {
    #[error("the dialog has no option {0}")]
    NoSuchOption(u8),
    #[error("the screen does not show which option is highlighted, so the keys that reach option {0} are unknown")]
    HighlightUnknown(u8),
}

/// A cell's look, as far as telling a highlighted option from the others needs.
pub trait CellLook {
    /// The attributes of the cell at `row`, `col` (0-based), as something comparable.
    fn look(&self, row: usize, col: usize) -> Option<desk_term::screen::Attrs>;
}

impl CellLook for desk_term::screen::Screen {
    fn look(&self, row: usize, col: usize) -> Option<desk_term::screen::Attrs> {
        self.cell(u16::try_from(row).ok()?, u16::try_from(col).ok()?).map(|c| c.attrs)
    }
}

impl DialogSpec {
    pub(crate) fn compile(file: &DialogSpecFile, provider: &str, origin: &str) -> anyhow::Result<DialogSpec> {
        use anyhow::Context;
        let re = |what: &str, p: &str| {
            Regex::new(p).with_context(|| format!("[dialog] {what} in {origin}: bad pattern {p:?}"))
        };
        let opt = |what: &str, p: &Option<String>| p.as_deref().map(|p| re(what, p)).transpose();
        if file.top.is_some() == file.frame.is_some() {
            anyhow::bail!("[dialog] in {origin}: give exactly one of `top` and `frame`");
        }
        let mut asks = Vec::new();
        for ask in &file.asks {
            asks.push((re("ask", &ask.pattern)?, ask.tool.clone()));
        }
        for key in [
            &file.keys.next,
            &file.keys.prev,
            &file.keys.row_next,
            &file.keys.row_prev,
            &file.keys.confirm,
            &file.keys.cancel,
        ] {
            match desk_term::keys::parse(key) {
                Ok(desk_term::keys::Key::Text(t)) if t.chars().count() > 1 => {
                    anyhow::bail!(
                        "[dialog.keys] in {origin}: {key:?} is no key name (Enter, Esc, Down, C-c, a single character)"
                    )
                }
                Ok(_) => {}
                Err(e) => anyhow::bail!("[dialog.keys] in {origin}: {key:?}: {e}"),
            }
        }
        Ok(DialogSpec {
            provider: provider.to_string(),
            end: re("end", &file.end)?,
            top: opt("top", &file.top)?,
            frame: opt("frame", &file.frame)?,
            question: opt("question", &file.question)?,
            asks,
            context_rows: file.context_rows,
            option_row: opt("option_row", &file.option_row)?,
            highlight: file.highlight.clone(),
            approve: file.approve,
            deny: opt("deny", &file.deny)?,
            keys: file.keys.clone(),
        })
    }

    /// The option an approval picks when none is named.
    pub fn approve_option(&self) -> u8 {
        self.approve
    }

    /// The dialog on a screen of `rows` (top first) of the session `scope` names
    /// (`NAME/GENERATION`, see [`fingerprint`]), if one shows. With `cells` (the screen the rows
    /// are from), a highlight drawn only in colour is read too.
    pub fn read(&self, rows: &[String], cells: Option<&dyn CellLook>, scope: &str) -> Option<Dialog> {
        let end = rows.iter().rposition(|r| self.end.is_match(strip(r)))?;
        // The nearest "1." above the footer: a numbered list further up is the transcript's.
        let first_option = (0..=end).rev().find(|&i| self.option_line(&rows[i]).is_some_and(|(n, _, _)| n == 1));
        let top = match (&self.top, &self.frame) {
            (Some(top), _) => {
                let from = first_option.unwrap_or(end);
                (0..=from).rev().find(|&i| top.is_match(strip(&rows[i])))?
            }
            (None, Some(frame)) => {
                let mut top = end;
                while top > 0 && frame.is_match(&rows[top - 1]) {
                    top -= 1;
                }
                if !frame.is_match(&rows[end]) {
                    return None;
                }
                top
            }
            (None, None) => return None,
        };
        let span = &rows[top..=end];
        let text: Vec<String> =
            span.iter().map(|r| strip(r).to_string()).filter(|r| !r.is_empty() && !is_rule(r)).collect();
        if text.is_empty() {
            return None;
        }
        let (layout, mut options) = self.options(rows, top, end);
        if options.len() < 2 {
            // A box or footer with no choice in it is no dialog to answer.
            return None;
        }
        self.mark_highlight(rows, top, end, layout, &mut options, cells);
        let title = text[0].clone();
        let first_option_text = options.first().map(|o| o.label.clone());
        let question = text
            .iter()
            .take_while(|r| first_option_text.as_ref().is_none_or(|l| !r.contains(l.as_str())))
            .find(|r| r.ends_with('?'))
            .cloned()
            .unwrap_or_else(|| title.clone());
        let kind = match &self.question {
            Some(q) if span.iter().any(|r| q.is_match(strip(r))) => Kind::Question,
            _ => Kind::Approval,
        };
        let (tool, args) = self.ask(&text, &rows[top.saturating_sub(self.context_rows)..top]);
        let fingerprint = fingerprint(scope, &text, &self.highlight);
        Some(Dialog { kind, title, question, tool, args, layout, options, text, fingerprint })
    }

    fn ask(&self, text: &[String], context: &[String]) -> (Option<String>, Option<String>) {
        let context: Vec<String> = context.iter().map(|r| strip(r).to_string()).collect();
        for hay in [text.join("\n"), context.join("\n")] {
            for (re, tool) in &self.asks {
                if let Some(c) = re.captures(&hay) {
                    let group =
                        |name: &str| c.name(name).map(|m| m.as_str().trim().to_string()).filter(|s| !s.is_empty());
                    return (group("tool").or_else(|| tool.clone()), group("args"));
                }
            }
        }
        (None, None)
    }

    /// The options between `top` and `end`: a row of them if the rules say how one looks and
    /// one is there, else the numbered rows from 1 up (other rows may come between them: an
    /// option's description, a rule).
    fn options(&self, rows: &[String], top: usize, end: usize) -> (Layout, Vec<DialogOption>) {
        if let Some(re) = &self.option_row {
            for row in &rows[top..=end] {
                if let Some(c) = re.captures(strip(row))
                    && let Some(m) = c.name("options")
                {
                    let labels: Vec<DialogOption> = split_wide(m.as_str())
                        .into_iter()
                        .enumerate()
                        .map(|(i, label)| DialogOption { number: (i + 1) as u8, label, highlighted: None })
                        .collect();
                    if labels.len() >= 2 {
                        return (Layout::Row, labels);
                    }
                }
            }
        }
        let mut options: Vec<DialogOption> = Vec::new();
        for row in &rows[top..=end] {
            let Some((number, label, marked)) = self.option_line(row) else { continue };
            if number as usize != options.len() + 1 {
                continue;
            }
            let highlighted = if self.highlight.is_empty() { None } else { Some(marked) };
            options.push(DialogOption { number, label, highlighted });
        }
        (Layout::Numbered, options)
    }

    /// Where the text of the highlight is not drawn, tell it by colour: the one option whose
    /// first cell looks unlike the others' (which all look alike).
    fn mark_highlight(
        &self,
        rows: &[String],
        top: usize,
        end: usize,
        layout: Layout,
        options: &mut [DialogOption],
        cells: Option<&dyn CellLook>,
    ) {
        if options.iter().any(|o| o.highlighted == Some(true)) || options.len() < 3 {
            return;
        }
        let Some(cells) = cells else { return };
        let mut looks = Vec::new();
        for option in options.iter() {
            let at = (top..=end).find_map(|i| {
                let row = &rows[i];
                let found = match layout {
                    Layout::Row => row.find(option.label.as_str()),
                    Layout::Numbered => row.find(&format!("{}. {}", option.number, option.label)),
                }?;
                Some((i, row[..found].width()))
            });
            looks.push(at.and_then(|(r, c)| cells.look(r, c)));
        }
        let odd: Vec<usize> = (0..looks.len())
            .filter(|&i| looks[i].is_some() && (0..looks.len()).filter(|&j| j != i).all(|j| looks[j] != looks[i]))
            .collect();
        let rest_alike = |i: usize| {
            let others: Vec<_> = (0..looks.len()).filter(|&j| j != i).map(|j| looks[j]).collect();
            others.windows(2).all(|w| w[0] == w[1])
        };
        if let [one] = odd.as_slice()
            && rest_alike(*one)
        {
            for (i, option) in options.iter_mut().enumerate() {
                option.highlighted = Some(i == *one);
            }
        }
    }

    /// A numbered option's row: its number, its label, and whether a highlight mark is drawn
    /// before it.
    fn option_line(&self, row: &str) -> Option<(u8, String, bool)> {
        let mut line = strip(row);
        let mut marked = false;
        for mark in &self.highlight {
            if let Some(rest) = line.strip_prefix(mark.as_str()) {
                line = rest.trim_start();
                marked = true;
            }
        }
        option_at(line).map(|(n, label)| (n, label, marked))
    }

    /// The keys, as `desk keys` names them, that give `choice` to `dialog` as it is shown now.
    pub fn keys(&self, dialog: &Dialog, choice: &Choice) -> Result<Vec<String>, KeysError> {
        let target = match choice {
            Choice::Option(n) => *n,
            Choice::Deny => {
                match dialog.options.iter().find(|o| self.deny.as_ref().is_some_and(|d| d.is_match(&o.label))) {
                    Some(o) => o.number,
                    None => return Ok(vec![self.keys.cancel.clone()]),
                }
            }
        };
        if !dialog.options.iter().any(|o| o.number == target) {
            return Err(KeysError::NoSuchOption(target));
        }
        let (next, prev) = match dialog.layout {
            Layout::Numbered => (&self.keys.next, &self.keys.prev),
            Layout::Row => (&self.keys.row_next, &self.keys.row_prev),
        };
        match (self.keys.pick, dialog.layout) {
            (Pick::Digit, Layout::Numbered) => Ok(vec![target.to_string()]),
            _ => {
                let at = dialog.highlighted().ok_or(KeysError::HighlightUnknown(target))?;
                let mut keys: Vec<String> = Vec::new();
                if target > at {
                    keys.extend(std::iter::repeat_n(next.clone(), usize::from(target - at)));
                } else {
                    keys.extend(std::iter::repeat_n(prev.clone(), usize::from(at - target)));
                }
                keys.push(self.keys.confirm.clone());
                Ok(keys)
            }
        }
    }

    /// The provider these rules are for.
    pub fn provider(&self) -> &str {
        &self.provider
    }
}

/// A row with its frame bars and surrounding blanks taken off.
fn strip(row: &str) -> &str {
    row.trim_matches(|c: char| c.is_whitespace() || FRAME_CHARS.contains(&c))
}

/// A row of nothing but line-drawing characters (a rule, a box's top or bottom edge).
fn is_rule(row: &str) -> bool {
    row.chars().all(|c| {
        matches!(
            c,
            '─' | '━'
                | '═'
                | '╌'
                | '┄'
                | '╭'
                | '╮'
                | '╰'
                | '╯'
                | '┌'
                | '┐'
                | '└'
                | '┘'
                | '▀'
                | '▄'
                | '╹'
                | ' '
        )
    })
}

/// `N. label` (or `N) label`) at the start of `line`, N from 1 to 9.
fn option_at(line: &str) -> Option<(u8, String)> {
    let mut chars = line.chars();
    let digit = chars.next()?.to_digit(10).filter(|d| (1..=9).contains(d))?;
    let rest = chars.as_str().strip_prefix(['.', ')'])?;
    if !rest.starts_with(' ') {
        return None;
    }
    let label = rest.trim();
    (!label.is_empty()).then(|| (digit as u8, label.to_string()))
}

/// `text` split where two or more spaces separate its parts.
fn split_wide(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut spaces = 0;
    for c in text.chars() {
        if c == ' ' {
            spaces += 1;
            continue;
        }
        if spaces >= 2 && !current.is_empty() {
            parts.push(std::mem::take(&mut current));
        } else if spaces == 1 {
            current.push(' ');
        }
        spaces = 0;
        current.push(c);
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

#[cfg(test)]
mod tests;
