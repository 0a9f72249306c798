//! Provider rules: what a provider's titles, screens and notifications say about its state.
//!
//! Owns the rule tables, kept as data: one TOML file per provider compiled into the binary
//! (`crates/desk-core/src/state/rules/<provider>.toml`, named by [`Provider::rules_text`]), replaceable per provider by a file of the same name in
//! `<config>/rules/`. Invariants: a rule table is validated whole when loaded (a bad pattern
//! or an unknown field is an error naming the file and rule, never a silently ignored rule);
//! within a source, rules are tried in file order and the first match wins.

use anyhow::{Context, Result, bail};
use regex_lite::Regex;
use serde::Deserialize;
use std::time::Duration;

use super::Activity;
use super::typed::Typed;
use crate::provider::Provider;

/// Where a rule looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Title,
    Screen,
    Notification,
}

/// Which rows of the screen a screen rule reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Region {
    #[default]
    All,
    Top,
    Bottom,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleSpec {
    name: String,
    source: Source,
    pattern: String,
    activity: Activity,
    wait: Option<String>,
    #[serde(default)]
    region: Region,
    rows: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LeaseSpec {
    #[serde(default = "default_hook_ms")]
    hook_working_ms: u64,
    #[serde(default = "default_title_ms")]
    title_working_ms: u64,
    #[serde(default = "default_screen_ms")]
    screen_working_ms: u64,
}

/// 15 s: agents fire a hook at least at every tool call; a turn that streams text longer than
/// this without any other evidence is reported unknown rather than assumed to go on.
fn default_hook_ms() -> u64 {
    15_000
}
/// 3 s: an animated spinner title changes several times a second; one that stops changing
/// for this long is no longer evidence of work.
fn default_title_ms() -> u64 {
    3_000
}
/// 5 s: a "working" screen pattern (a spinner line) counts only while output keeps coming.
fn default_screen_ms() -> u64 {
    5_000
}

impl Default for LeaseSpec {
    fn default() -> Self {
        LeaseSpec {
            hook_working_ms: default_hook_ms(),
            title_working_ms: default_title_ms(),
            screen_working_ms: default_screen_ms(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    provider: String,
    #[serde(default)]
    description: String,
    /// Whether desk wires this provider's hooks, so their silence means something.
    #[serde(default)]
    hooks: bool,
    /// Health degrades when hooks are wired but none arrived this long after start.
    expect_hook_within_ms: Option<u64>,
    /// What counts as "the TUI is up": `mode` (bracketed paste switched on), `hook` (a
    /// session-start hook), `quiet` (output quiet after start), `screen` (an idle screen rule
    /// matched), `report` (an OSC 7501 state report). Default: mode, hook, quiet.
    #[serde(default = "default_ready_on")]
    ready_on: Vec<ReadySignal>,
    #[serde(default)]
    lease: LeaseSpec,
    #[serde(default, rename = "rule")]
    rules: Vec<RuleSpec>,
    /// How prompts are delivered to this provider (see `crate::delivery::settings`).
    #[serde(default)]
    delivery: crate::delivery::settings::DeliverySpec,
    /// How its dialogs look and are answered (see `crate::dialog`).
    dialog: Option<crate::dialog::DialogSpecFile>,
}

/// A signal that the agent's TUI is ready for input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadySignal {
    /// Bracketed paste switched on.
    Mode,
    /// A session-start hook.
    Hook,
    /// Output quiet after start.
    Quiet,
    /// A screen rule that claims `idle` matched (the agent's prompt is on screen).
    Screen,
    /// The agent reported its own state in-band (OSC 7501): it is connected and drawing.
    Report,
}

impl ReadySignal {
    /// What the signal is, in words for an operator.
    pub fn describe(self) -> &'static str {
        match self {
            ReadySignal::Mode => "bracketed paste switched on",
            ReadySignal::Hook => "a session-start hook",
            ReadySignal::Quiet => "output going quiet",
            ReadySignal::Screen => "the idle prompt on screen",
            ReadySignal::Report => "the agent's own state report",
        }
    }
}

fn default_ready_on() -> Vec<ReadySignal> {
    vec![ReadySignal::Mode, ReadySignal::Hook, ReadySignal::Quiet]
}

/// The origin of a built-in table.
const BUILTIN: &str = "builtin";

/// One compiled rule.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    pub source: Source,
    pub regex: Regex,
    pub activity: Activity,
    pub wait: Option<String>,
    pub region: Region,
    pub rows: Option<usize>,
}

/// How long working evidence of each kind holds without being refreshed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leases {
    pub hook_working: Duration,
    pub title_working: Duration,
    pub screen_working: Duration,
}

/// A provider's compiled rule table.
#[derive(Debug, Clone)]
pub struct RuleSet {
    pub provider: String,
    pub description: String,
    pub hooks: bool,
    pub expect_hook_within: Option<Duration>,
    pub ready_on: Vec<ReadySignal>,
    pub leases: Leases,
    pub rules: Vec<Rule>,
    pub delivery: crate::delivery::settings::DeliverySettings,
    /// How its dialogs are read and answered; a table of the operator's without a `[dialog]`
    /// keeps the built-in one's.
    pub dialog: Option<crate::dialog::DialogSpec>,
    /// Where the table came from (`builtin` or a file path), for `desk explain`.
    pub origin: String,
}

impl RuleSet {
    /// Parse and validate a rule table.
    pub fn parse(text: &str, origin: &str) -> Result<RuleSet> {
        let file: RuleFile = toml::from_str(text).with_context(|| format!("rule table {origin} is not valid"))?;
        let mut rules = Vec::with_capacity(file.rules.len());
        for spec in file.rules {
            let regex = Regex::new(&spec.pattern)
                .with_context(|| format!("rule {:?} in {origin}: bad pattern {:?}", spec.name, spec.pattern))?;
            if spec.activity == Activity::Unknown {
                bail!("rule {:?} in {origin}: a rule must claim working, idle or blocked", spec.name);
            }
            if spec.wait.is_some() != (spec.activity == Activity::Blocked) {
                bail!(
                    "rule {:?} in {origin}: `wait` names what a blocked rule waits for, and only blocked rules",
                    spec.name
                );
            }
            if spec.source != Source::Screen && (spec.rows.is_some() || spec.region != Region::All) {
                bail!("rule {:?} in {origin}: `region` and `rows` apply to screen rules only", spec.name);
            }
            rules.push(Rule {
                name: spec.name,
                source: spec.source,
                regex,
                activity: spec.activity,
                wait: spec.wait,
                region: spec.region,
                rows: spec.rows,
            });
        }
        let delivery = crate::delivery::settings::DeliverySettings::compile(&file.delivery, origin)?;
        let dialog = match &file.dialog {
            Some(spec) => Some(crate::dialog::DialogSpec::compile(spec, &file.provider, origin)?),
            None if origin != BUILTIN => Provider::or_shell(&file.provider).rules().dialog,
            None => None,
        };
        Ok(RuleSet {
            dialog,
            delivery,
            provider: file.provider,
            description: file.description,
            hooks: file.hooks,
            expect_hook_within: file.expect_hook_within_ms.map(Duration::from_millis),
            ready_on: file.ready_on,
            leases: Leases {
                hook_working: Duration::from_millis(file.lease.hook_working_ms),
                title_working: Duration::from_millis(file.lease.title_working_ms),
                screen_working: Duration::from_millis(file.lease.screen_working_ms),
            },
            rules,
            origin: origin.to_string(),
        })
    }

    /// The built-in table for `provider`.
    pub fn builtin(provider: Provider) -> RuleSet {
        // Built-in tables are validated by the tests; a failure here is a build defect.
        RuleSet::parse(provider.rules_text(), BUILTIN)
            .unwrap_or_else(|e| panic!("built-in rules for {provider}: {e:#}"))
    }

    pub fn match_title(&self, title: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.source == Source::Title && r.regex.is_match(title))
    }

    pub fn match_notification(&self, text: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.source == Source::Notification && r.regex.is_match(text))
    }

    /// The first screen rule matching its region of `rows` (visible rows, top first), where
    /// the match is not only an echo of what was `typed`.
    pub fn match_screen(&self, rows: &[String], typed: &Typed) -> Option<&Rule> {
        self.match_screen_where(rows, typed, |_| true)
    }

    /// The first screen rule, among those `wanted` accepts, whose region of `rows` matches.
    /// Regions are taken from the content: blank rows below the last written one do not count,
    /// so "the bottom 12 rows" of an inline TUI that has drawn 15 rows of a 40-row screen are
    /// its rows 4–15. A match that lies in an echo of text someone `typed` (a prompt quoting a
    /// dialog, in the input box or the transcript: [`Typed::echoes`]) is not one; a later match
    /// of the same rule may be.
    pub fn match_screen_where(&self, rows: &[String], typed: &Typed, wanted: impl Fn(&Rule) -> bool) -> Option<&Rule> {
        let end = rows.iter().rposition(|l| !l.trim().is_empty()).map_or(0, |i| i + 1);
        let rows = &rows[..end];
        self.rules.iter().filter(|r| r.source == Source::Screen && wanted(r)).find(|r| {
            let n = r.rows.unwrap_or(rows.len()).min(rows.len());
            let region = match r.region {
                Region::All => rows,
                Region::Top => &rows[..n],
                Region::Bottom => &rows[rows.len() - n..],
            };
            let joined = region.join("\n");
            r.regex.find_iter(&joined).any(|m| !typed.echoes(region, m.start(), m.end()))
        })
    }

    pub fn has_screen_rules(&self) -> bool {
        self.rules.iter().any(|r| r.source == Source::Screen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_tables_are_refused_with_the_rule_named() {
        let bad = r#"provider = "x"
[[rule]]
name = "broken"
source = "title"
pattern = "(unclosed"
activity = "working"
"#;
        let err = format!("{:#}", RuleSet::parse(bad, "x.toml").unwrap_err());
        assert!(err.contains("broken") && err.contains("bad pattern"), "{err}");
        let typo = "provider = \"x\"\n[[rule]]\nname = \"t\"\nsource = \"title\"\npattern = \"a\"\nactivity = \"working\"\nregon = \"top\"\n";
        assert!(RuleSet::parse(typo, "x.toml").is_err());
        let blocked_without_wait =
            "provider = \"x\"\n[[rule]]\nname = \"b\"\nsource = \"screen\"\npattern = \"a\"\nactivity = \"blocked\"\n";
        assert!(RuleSet::parse(blocked_without_wait, "x.toml").is_err());
    }

    #[test]
    fn screen_regions_limit_what_a_rule_reads() {
        let text = r#"provider = "x"
[[rule]]
name = "bottom-only"
source = "screen"
region = "bottom"
rows = 2
pattern = "(?m)^> $"
activity = "idle"
"#;
        let set = RuleSet::parse(text, "x").unwrap();
        let rows = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let none = Typed::default();
        assert!(set.match_screen(&rows(&["a", "b", "> "]), &none).is_some());
        assert!(set.match_screen(&rows(&["> ", "b", "c"]), &none).is_none());
        // Blank rows below the content are not part of the bottom region.
        assert!(set.match_screen(&rows(&["a", "b", "> ", "", "  "]), &none).is_some());
    }
}
