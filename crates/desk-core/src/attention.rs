//! Fleet attention: which sessions (and channels) need a person, in what order, and the one
//! line that says so.
//!
//! Owns the one ranking every place that points an operator somewhere uses — the dashboard's
//! sort and its `n`, `desk attach --next`, the status line inside `desk attach` and its jump
//! key — ([`rank`], [`needs`]), how one need is said in a few words ([`Need::describe`]), the
//! attach status line ([`status_line`]) and which session a jump goes to next ([`next_after`]).
//! Invariants: a session that needs nobody is never listed; the order is total (urgency, then
//! the one waiting longest, then the name), so two clients of the same fleet agree on "next";
//! the line never exceeds the width it is given (in terminal cells). Pure: the caller passes
//! what it read of the fleet and the time.

use desk_wire::ExitStatus;
use desk_wire::state::{Activity, Health};
use unicode_width::UnicodeWidthStr;

/// How much a row needs a person, most first. The order of the variants is the dashboard
/// table's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Urgency {
    Blocked,
    Stuck,
    Degraded,
    ExitedWithError,
    Working,
    Quiet,
    ExitedCleanly,
}

impl Urgency {
    /// Whether an operator should look at a row of this urgency now.
    pub fn needs_person(self) -> bool {
        self <= Urgency::ExitedWithError
    }
}

/// How much a session needs a person: the one ranking the dashboard sorts by and `desk attach
/// --next` picks by. `exited` is how it ended, if it did; `answers` whether its master answers.
pub fn rank(exited: Option<ExitStatus>, answers: bool, activity: Activity, stuck: u32, health: &Health) -> Urgency {
    match exited {
        Some(ExitStatus::Code(0)) => return Urgency::ExitedCleanly,
        Some(_) => return Urgency::ExitedWithError,
        None if !answers => return Urgency::Degraded,
        None => {}
    }
    if activity == Activity::Blocked {
        Urgency::Blocked
    } else if stuck > 0 {
        Urgency::Stuck
    } else if matches!(health, Health::Degraded(_)) {
        Urgency::Degraded
    } else if activity == Activity::Working {
        Urgency::Working
    } else {
        Urgency::Quiet
    }
}

/// What is known of one session, for ranking it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Look {
    pub name: String,
    /// How it ended, if it did.
    pub exited: Option<ExitStatus>,
    /// When it ended (Unix ms), if it did.
    pub exited_at_ms: u64,
    /// Whether its master answers (a stopped or wedged one does not).
    pub answers: bool,
    pub activity: Activity,
    /// Since when the activity holds (Unix ms; 0: unknown).
    pub since_ms: u64,
    /// What a blocked agent waits for (`approval`, `question`).
    pub wait: Option<String>,
    pub health: Health,
    /// Its stuck delivery items.
    pub stuck: u32,
}

impl Look {
    /// A running session, known from its state.
    pub fn running(name: &str, activity: Activity, since_ms: u64, wait: Option<String>, health: Health) -> Look {
        Look {
            name: name.to_string(),
            exited: None,
            exited_at_ms: 0,
            answers: true,
            activity,
            since_ms,
            wait,
            health,
            stuck: 0,
        }
    }

    pub fn urgency(&self) -> Urgency {
        rank(self.exited, self.answers, self.activity, self.stuck, &self.health)
    }

    /// Its state in a word or two, as `desk ls` writes it: `working`, `blocked(approval)`,
    /// `exited(3)`.
    pub fn state_words(&self) -> String {
        match self.exited {
            Some(ExitStatus::Code(c)) => return format!("exited({c})"),
            Some(ExitStatus::Signal(s)) => return format!("killed({s})"),
            None if !self.answers => return "unresponsive".into(),
            None => {}
        }
        match &self.wait {
            Some(wait) if self.activity == Activity::Blocked => format!("blocked({wait})"),
            _ => self.activity.as_str().to_string(),
        }
    }
}

/// A channel's unread mentions of `@human`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mentions {
    pub channel: String,
    /// Unread messages that mention `@human`.
    pub unread: usize,
    /// When the newest message was posted (Unix ms; 0: unknown).
    pub last_ms: u64,
}

/// Who needs a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Who {
    Session(String),
    /// A channel whose messages mention `@human`.
    Channel(String),
}

/// Why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// On a dialog (what it waits for, when known).
    Blocked(Option<String>),
    /// This many delivery items are stuck.
    Stuck(u32),
    /// Its health is degraded (the reason).
    Degraded(String),
    /// Its master does not answer.
    Unresponsive,
    /// It ended badly.
    Exited(ExitStatus),
    /// This many unread messages mention `@human`.
    Mentioned(usize),
}

/// One thing that needs a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    pub who: Who,
    pub why: Why,
    /// When it began (Unix ms; 0: unknown), for "blocked 1m".
    pub since_ms: u64,
}

impl Need {
    /// Its class, most urgent first: a dialog, a stuck prompt, a person asked by name in a
    /// channel, a session that is not well, one that ended badly.
    fn class(&self) -> u8 {
        match self.why {
            Why::Blocked(_) => 0,
            Why::Stuck(_) => 1,
            Why::Mentioned(_) => 2,
            Why::Degraded(_) | Why::Unresponsive => 3,
            Why::Exited(_) => 4,
        }
    }

    /// The session it is about, if it is one.
    pub fn session(&self) -> Option<&str> {
        match &self.who {
            Who::Session(name) => Some(name),
            Who::Channel(_) => None,
        }
    }

    /// A few words: `api blocked 1m`, `web 1 stuck`, `db degraded`, `#release @human 2`.
    pub fn describe(&self, now_ms: u64) -> String {
        let age = |since: u64| {
            if since == 0 { String::new() } else { format!(" {}", crate::time::span(now_ms.saturating_sub(since))) }
        };
        match (&self.who, &self.why) {
            (Who::Session(n), Why::Blocked(_)) => format!("{n} blocked{}", age(self.since_ms)),
            (Who::Session(n), Why::Stuck(k)) => format!("{n} {k} stuck"),
            (Who::Session(n), Why::Degraded(_)) => format!("{n} degraded"),
            (Who::Session(n), Why::Unresponsive) => format!("{n} unresponsive"),
            (Who::Session(n), Why::Exited(ExitStatus::Code(c))) => format!("{n} exited({c})"),
            (Who::Session(n), Why::Exited(ExitStatus::Signal(s))) => format!("{n} killed({s})"),
            (Who::Channel(c), Why::Mentioned(k)) => format!("#{c} @human {k}"),
            (Who::Session(n), Why::Mentioned(k)) => format!("{n} @human {k}"),
            (Who::Channel(c), _) => format!("#{c}"),
        }
    }
}

/// Everything that needs a person, most urgent first (then the one waiting longest, then by
/// name): sessions as [`rank`] says, and channels with unread `@human` mentions.
pub fn needs(looks: &[Look], mentions: &[Mentions]) -> Vec<Need> {
    let mut out: Vec<Need> = Vec::new();
    for look in looks {
        let why = match look.urgency() {
            Urgency::Blocked => Why::Blocked(look.wait.clone()),
            Urgency::Stuck => Why::Stuck(look.stuck),
            Urgency::Degraded if !look.answers => Why::Unresponsive,
            Urgency::Degraded => match &look.health {
                Health::Degraded(reason) => Why::Degraded(reason.clone()),
                Health::Ok => Why::Unresponsive,
            },
            Urgency::ExitedWithError => match look.exited {
                Some(status) => Why::Exited(status),
                None => continue,
            },
            Urgency::Working | Urgency::Quiet | Urgency::ExitedCleanly => continue,
        };
        let since_ms = if look.exited.is_some() { look.exited_at_ms } else { look.since_ms };
        out.push(Need { who: Who::Session(look.name.clone()), why, since_ms });
    }
    for m in mentions.iter().filter(|m| m.unread > 0) {
        out.push(Need { who: Who::Channel(m.channel.clone()), why: Why::Mentioned(m.unread), since_ms: m.last_ms });
    }
    out.sort_by(|a, b| {
        // Unknown start times (0) sort after known ones within a class.
        let since = |n: &Need| if n.since_ms == 0 { u64::MAX } else { n.since_ms };
        (a.class(), since(a), name_of(a)).cmp(&(b.class(), since(b), name_of(b)))
    });
    out
}

fn name_of(need: &Need) -> &str {
    match &need.who {
        Who::Session(n) | Who::Channel(n) => n,
    }
}

/// The session a jump goes to from `current`: the first session in `needs` after `current`'s
/// own place in that list (wrapping round), or the first one when `current` needs nobody.
/// Never `current` itself; `None` when no other session needs a person.
pub fn next_after<'a>(needs: &'a [Need], current: Option<&str>) -> Option<&'a str> {
    let sessions: Vec<&str> = needs.iter().filter_map(Need::session).collect();
    let start = current.and_then(|c| sessions.iter().position(|s| *s == c)).map_or(0, |i| i + 1);
    (0..sessions.len()).map(|k| sessions[(start + k) % sessions.len()]).find(|s| Some(*s) != current)
}

/// The attached session as the status line names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Here {
    pub name: String,
    /// Its state in words (`working`, `blocked(approval)`), and since when (Unix ms; 0: not
    /// known).
    pub state: String,
    pub since_ms: u64,
}

/// The status line inside `desk attach`, exactly `width` cells wide: the attached session and
/// its state on the left, what else needs a person in the middle (`⚠ 2 need you: web blocked
/// 1m · db 1 stuck`, the current session left out: the operator is already looking at it), and
/// `hint` (the prefix key's help) on the right when there is room. What does not fit is cut,
/// the needs first (`+2` says how many were left out).
pub fn status_line(here: &Here, needs: &[Need], hint: &str, now_ms: u64, width: usize) -> String {
    let others: Vec<&Need> = needs.iter().filter(|n| n.session() != Some(here.name.as_str())).collect();
    let age = if here.since_ms == 0 {
        String::new()
    } else {
        format!(" {}", crate::time::span(now_ms.saturating_sub(here.since_ms)))
    };
    let left = format!(" {} {}{age} ", here.name, here.state);
    let right = if hint.is_empty() { String::new() } else { format!(" {hint} ") };
    // With the hint unless leaving it out shows more of what needs a person.
    let (with_hint, shown) = middle(&others, now_ms, width.saturating_sub(left.width() + right.width()));
    let (without, more) = middle(&others, now_ms, width.saturating_sub(left.width()));
    let line = if more <= shown && left.width() + with_hint.width() + right.width() <= width {
        let fill = width - (left.width() + with_hint.width() + right.width());
        format!("{left}{with_hint}{}{right}", " ".repeat(fill))
    } else {
        format!("{left}{without}")
    };
    fit(&line, width)
}

/// The middle of the status line in at most `room` cells where it can: the count, then as many
/// needs as fit, then `+N` for the rest; and how many needs it names.
fn middle(others: &[&Need], now_ms: u64, room: usize) -> (String, usize) {
    if others.is_empty() {
        return ("│ nobody else needs you".into(), 0);
    }
    let head = format!("│ ⚠ {} need{} you", others.len(), if others.len() == 1 { "s" } else { "" });
    let mut shown = format!("{head}:");
    for (i, need) in others.iter().enumerate() {
        let part = format!("{}{}", if i == 0 { " " } else { " · " }, need.describe(now_ms));
        let rest = others.len() - i - 1;
        let tail = if rest > 0 { format!(" +{rest}") } else { String::new() };
        if shown.width() + part.width() + tail.width() > room {
            return if i == 0 { (head, 0) } else { (format!("{shown} +{}", others.len() - i), i) };
        }
        shown.push_str(&part);
    }
    (shown, others.len())
}

/// `text` cut or padded to exactly `width` cells (a wide character that would cross the edge
/// becomes a blank), control characters shown as `?` (a title may hold any, and this is
/// written to a terminal).
pub fn fit(text: &str, width: usize) -> String {
    use unicode_width::UnicodeWidthChar;
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars().map(|c| if c.is_control() { '?' } else { c }) {
        let w = c.width().unwrap_or(0);
        if used + w > width {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push_str(&" ".repeat(width - used));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn look(name: &str, activity: Activity, since: u64) -> Look {
        Look::running(name, activity, since, None, Health::Ok)
    }

    #[test]
    fn needs_come_most_urgent_first_then_longest_waiting() {
        let mut stuck = look("web", Activity::Idle, 50);
        stuck.stuck = 1;
        let mut blocked_late = look("api", Activity::Blocked, 300);
        blocked_late.wait = Some("approval".into());
        let blocked_early = look("db", Activity::Blocked, 100);
        let quiet = look("calm", Activity::Idle, 10);
        let mut sick = look("sick", Activity::Working, 10);
        sick.health = Health::Degraded("no hook".into());
        let mut crashed = look("gone", Activity::Idle, 0);
        crashed.exited = Some(ExitStatus::Code(3));
        crashed.exited_at_ms = 5;
        let mentions = [Mentions { channel: "ops".into(), unread: 2, last_ms: 400 }];
        let got = needs(&[stuck, blocked_late, quiet, sick, crashed, blocked_early], &mentions);
        let names: Vec<String> = got.iter().map(|n| n.describe(60_400)).collect();
        assert_eq!(
            names,
            ["db blocked 1m", "api blocked 1m", "web 1 stuck", "#ops @human 2", "sick degraded", "gone exited(3)"]
        );
    }

    #[test]
    fn a_jump_goes_to_the_next_session_in_need_and_never_to_the_current_one() {
        let n = needs(
            &[look("a", Activity::Blocked, 1), look("b", Activity::Blocked, 2), look("c", Activity::Blocked, 3)],
            &[],
        );
        assert_eq!(next_after(&n, None), Some("a"));
        assert_eq!(next_after(&n, Some("a")), Some("b"));
        assert_eq!(next_after(&n, Some("c")), Some("a"), "wraps round");
        assert_eq!(next_after(&n, Some("x")), Some("a"), "from a session in no need: the most urgent");
        let one = needs(&[look("a", Activity::Blocked, 1)], &[]);
        assert_eq!(next_after(&one, Some("a")), None, "nowhere else to go");
        let channels = needs(&[], &[Mentions { channel: "ops".into(), unread: 1, last_ms: 1 }]);
        assert_eq!(next_after(&channels, None), None, "a channel is no session to attach");
    }

    #[test]
    fn the_status_line_names_this_session_and_the_others_in_need_and_fits_its_width() {
        let mut api = look("api", Activity::Blocked, 0);
        api.since_ms = 0;
        let mut web = look("web", Activity::Idle, 0);
        web.stuck = 1;
        let here = Here { name: "db".into(), state: "working".into(), since_ms: 57_000 };
        let n = needs(&[look("api", Activity::Blocked, 1_000), web, look("db", Activity::Blocked, 2_000)], &[]);
        let line = status_line(&here, &n, "^] ? help", 61_000, 80);
        assert_eq!(line.width(), 80);
        assert_eq!(line.trim_end(), " db working 4s │ ⚠ 2 need you: api blocked 1m · web 1 stuck           ^] ? help");
        let narrow = status_line(&here, &n, "^] ? help", 61_000, 50);
        assert_eq!(narrow.width(), 50);
        assert_eq!(narrow.trim_end(), " db working 4s │ ⚠ 2 need you: api blocked 1m +1", "the hint goes first");
        let tight = status_line(&here, &n, "^] ? help", 61_000, 30);
        assert_eq!(tight.trim_end(), " db working 4s │ ⚠ 2 need you");
        let calm = status_line(&here, &[], "", 61_000, 50);
        assert_eq!(calm.trim_end(), " db working 4s │ nobody else needs you");
        assert_eq!(status_line(&here, &n, "x", 0, 3).width(), 3);
    }

    #[test]
    fn fit_never_splits_a_wide_character() {
        assert_eq!(fit("⚠界a", 3), "⚠界");
        assert_eq!(fit("界界", 3), "界 ");
        assert_eq!(fit("ab", 4), "ab  ");
        assert_eq!(fit("a\x1b[2Jb", 6), "a?[2Jb", "no escape reaches the terminal");
    }

    #[test]
    fn ranking_is_the_dashboards() {
        assert_eq!(rank(None, true, Activity::Blocked, 3, &Health::Ok), Urgency::Blocked);
        assert_eq!(rank(None, false, Activity::Blocked, 0, &Health::Ok), Urgency::Degraded);
        assert_eq!(rank(Some(ExitStatus::Code(0)), true, Activity::Idle, 0, &Health::Ok), Urgency::ExitedCleanly);
        assert_eq!(rank(Some(ExitStatus::Signal(9)), true, Activity::Idle, 0, &Health::Ok), Urgency::ExitedWithError);
        assert!(!Urgency::Working.needs_person() && Urgency::ExitedWithError.needs_person());
    }
}
