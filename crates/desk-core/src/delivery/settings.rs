//! Per-provider delivery settings: how to type into an agent and how to see that it worked.
//!
//! Owns the `[delivery]` table of a provider's rule file (`crates/desk-core/src/state/rules/<provider>.toml`,
//! overridable like the rules): the settle delay between paste and Enter, the verification
//! windows, how many extra Enters are safe, where the input area is and what the agent's paste
//! placeholder looks like. Invariant: settings are validated when the rule table loads (bad
//! patterns are errors there, not surprises during a delivery).

use anyhow::{Context, Result};
use regex_lite::Regex;
use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct DeliverySpec {
    submit_delay_ms: Option<u64>,
    echo_timeout_ms: Option<u64>,
    submit_timeout_ms: Option<u64>,
    enter_retries: Option<u32>,
    poll_ms: Option<u64>,
    input_top: Option<String>,
    input_bottom: Option<String>,
    input_rows: Option<usize>,
    placeholder: Option<String>,
    hold_while_working: Option<bool>,
    composer: Option<String>,
    composer_rows: Option<usize>,
    #[serde(default)]
    composer_empty: Vec<String>,
    #[serde(default)]
    composer_marks: Vec<String>,
    #[serde(default)]
    line_editors: Vec<String>,
    prompt: Option<String>,
    continuation: Option<String>,
}

#[derive(Debug, Clone)]
pub struct DeliverySettings {
    /// Wait between the paste showing up and the Enter: some agents treat an Enter that
    /// arrives right after a paste as part of it (Codex's paste-burst window).
    pub submit_delay: Duration,
    /// How long the paste may take to show up in the input area before it is stuck.
    pub echo_timeout: Duration,
    /// How long each Enter may take to show an effect.
    pub submit_timeout: Duration,
    /// Extra Enters allowed while the text verifiably sits in the input area.
    pub enter_retries: u32,
    /// Screen polling interval while a delivery is being verified.
    pub poll: Duration,
    pub input_top: Option<Regex>,
    pub input_bottom: Option<Regex>,
    pub input_rows: usize,
    pub placeholder: Option<Regex>,
    /// Hold delivery while the agent is working: for agents that take a prompt typed mid-turn
    /// as an interruption (Codex steers the running turn) rather than queueing it.
    pub hold_while_working: bool,
    /// Where the composer's own text is, when the input area holds more than the composer (a
    /// model line, a footer): the last match of this pattern's first group, searched in the
    /// input area, or in the bottom `composer_rows` rows of the screen when those are given.
    /// Without it the whole input area is the composer.
    pub composer: Option<Regex>,
    pub composer_rows: Option<usize>,
    /// What an empty composer shows (hint text, once normalised): not somebody's draft.
    pub composer_empty: Vec<Regex>,
    /// Marks the agent draws in its composer that are no text of it (Codex's scroll arrow at
    /// the right of a composer taller than the screen): removed before the text is read.
    pub composer_marks: Vec<Regex>,
    /// For a session without a composer: the programs (as the kernel names them, `bash`) that
    /// are interactive shells reading their prompt with a line editor of their own, in raw
    /// mode (`super::line`).
    pub line_editors: Vec<String>,
    /// What such a shell's row left of the cursor shows at an empty prompt (its end trimmed).
    pub prompt: Option<Regex>,
    /// What it shows at an empty continuation prompt (waiting for the rest of a command).
    pub continuation: Option<Regex>,
}

/// 0 ms: most agents take an Enter in the same read as the paste's end marker; those that do
/// not say so in their table.
const DEFAULT_SUBMIT_DELAY_MS: u64 = 0;
/// 4 s for the paste to appear: agents echo within tens of milliseconds even mid-turn; a
/// paste that has not appeared by then is not going to.
const DEFAULT_ECHO_TIMEOUT_MS: u64 = 4000;
/// 2.5 s per Enter: enough for an agent to clear its input box or report the submit.
const DEFAULT_SUBMIT_TIMEOUT_MS: u64 = 2500;
/// Two extra Enters at most: pressing Enter on text that verifiably sits in the box is safe,
/// but a box that ignores three is stuck for a reason an operator should see.
const DEFAULT_ENTER_RETRIES: u32 = 2;
/// 25 ms polling while verifying: below the agents' redraw cadence, cheap for the master.
const DEFAULT_POLL_MS: u64 = 25;
/// Without recognisable borders, the bottom 6 rows are taken as the input area.
const DEFAULT_INPUT_ROWS: usize = 6;

impl DeliverySettings {
    pub fn compile(spec: &DeliverySpec, origin: &str) -> Result<DeliverySettings> {
        let re = |what: &str, p: &Option<String>| -> Result<Option<Regex>> {
            p.as_deref()
                .map(|p| Regex::new(p).with_context(|| format!("delivery.{what} in {origin}: bad pattern {p:?}")))
                .transpose()
        };
        let patterns = |what: &str, ps: &[String]| -> Result<Vec<Regex>> {
            ps.iter()
                .map(|p| Regex::new(p).with_context(|| format!("delivery.{what} in {origin}: bad pattern {p:?}")))
                .collect()
        };
        Ok(DeliverySettings {
            submit_delay: Duration::from_millis(spec.submit_delay_ms.unwrap_or(DEFAULT_SUBMIT_DELAY_MS)),
            echo_timeout: Duration::from_millis(spec.echo_timeout_ms.unwrap_or(DEFAULT_ECHO_TIMEOUT_MS)),
            submit_timeout: Duration::from_millis(spec.submit_timeout_ms.unwrap_or(DEFAULT_SUBMIT_TIMEOUT_MS)),
            enter_retries: spec.enter_retries.unwrap_or(DEFAULT_ENTER_RETRIES),
            poll: Duration::from_millis(spec.poll_ms.unwrap_or(DEFAULT_POLL_MS).max(5)),
            input_top: re("input_top", &spec.input_top)?,
            input_bottom: re("input_bottom", &spec.input_bottom)?,
            input_rows: spec.input_rows.unwrap_or(DEFAULT_INPUT_ROWS).max(1),
            placeholder: re("placeholder", &spec.placeholder)?,
            hold_while_working: spec.hold_while_working.unwrap_or(false),
            composer: re("composer", &spec.composer)?,
            composer_rows: spec.composer_rows.map(|n| n.max(1)),
            composer_empty: patterns("composer_empty", &spec.composer_empty)?,
            composer_marks: patterns("composer_marks", &spec.composer_marks)?,
            line_editors: spec.line_editors.clone(),
            prompt: re("prompt", &spec.prompt)?,
            continuation: re("continuation", &spec.continuation)?,
        })
    }

    /// The settings used when a provider's table has no `[delivery]` section.
    pub fn defaults() -> DeliverySettings {
        // The default spec has no patterns, so compiling it cannot fail.
        DeliverySettings::compile(&DeliverySpec::default(), "defaults").unwrap_or_else(|_| unreachable!())
    }

    /// Whether the input area is found by its borders (a box the text verifiably sits in)
    /// rather than taken as the bottom rows of the screen.
    pub fn bordered(&self) -> bool {
        self.input_top.is_some() || self.input_bottom.is_some()
    }

    /// Whether desk can tell what the agent's composer holds: its input area has borders, or
    /// the table says where the composer is. For anything else (a shell, an unknown program)
    /// there is no composer to read.
    pub fn knows_composer(&self) -> bool {
        self.bordered() || self.composer.is_some()
    }

    /// The text in the agent's composer, normalised; empty when it holds nothing but what an
    /// empty composer shows (its prompt glyph, frame, hint text). `None` when the composer is
    /// not on the screen: the table's borders or composer pattern match nothing.
    pub fn composer_text(&self, lines: &[String]) -> Option<String> {
        let raw = self.composer_raw(lines)?;
        let text = super::text::normalize(&raw);
        Some(if self.composer_empty.iter().any(|re| re.is_match(&text)) { String::new() } else { text })
    }

    /// The rows where a pasted prompt shows, to count it in: the composer's own text when the
    /// table says where it is (so a footer that quotes the prompt — Codex names its thread after
    /// the first prompt — does not count), else the input area.
    pub fn prompt_rows(&self, lines: &[String]) -> Vec<String> {
        match self.composer.as_ref().and_then(|_| self.composer_raw(lines)) {
            Some(raw) => raw.lines().map(String::from).collect(),
            None => self.input_area(lines).to_vec(),
        }
    }

    /// The composer's text as drawn (not normalised), without the table's marks.
    fn composer_raw(&self, lines: &[String]) -> Option<String> {
        let raw = match &self.composer {
            Some(re) => {
                let rows = match self.composer_rows {
                    Some(n) => {
                        let end = lines.iter().rposition(|l| !l.trim().is_empty()).map_or(0, |i| i + 1);
                        &lines[end.saturating_sub(n)..end]
                    }
                    None => self.input_area_found(lines)?,
                };
                let joined = rows.join("\n");
                re.captures_iter(&joined).last().and_then(|c| c.get(1)).map(|m| m.as_str().to_string())?
            }
            None => self.input_area_found(lines)?.join("\n"),
        };
        Some(self.composer_marks.iter().fold(raw, |raw, re| re.replace_all(&raw, "").into_owned()))
    }

    /// The input area, only when its borders are on the screen (or the table gives none).
    fn input_area_found<'a>(&self, lines: &'a [String]) -> Option<&'a [String]> {
        let found = |re: &Option<Regex>| re.as_ref().is_none_or(|re| lines.iter().any(|l| re.is_match(l)));
        (found(&self.input_top) && found(&self.input_bottom)).then(|| self.input_area(lines))
    }

    /// The input area of a screen.
    pub fn input_area<'a>(&self, lines: &'a [String]) -> &'a [String] {
        super::text::input_area(lines, self.input_top.as_ref(), self.input_bottom.as_ref(), self.input_rows)
    }
}
