//! The state authority saved for a handover and restored in the binary the master
//! re-executes (`desk upgrade`, docs/upgrading.md).
//!
//! Owns the saved form of everything the authority holds but its rule table, which the new
//! binary loads afresh from the same files (so a handover also picks up a changed provider
//! table, as a new session would). Every instant becomes a duration relative to "now" (an
//! `Instant` means nothing in another process image): a claim's lease keeps the time it had
//! left, so "working" lapses to "unknown" on schedule across a handover, never later.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::time::{instant_before as back, ms_before as ago};

use super::{Activity, Authority, AxisView, Claim, Health, Lifecycle, RuleSet, typed::Typed};

/// See the module documentation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedAuthority {
    started_ms_ago: u64,
    lifecycle: AxisView<Lifecycle>,
    activity: AxisView<Activity>,
    wait: Option<String>,
    health: AxisView<Health>,
    ready: bool,
    hook: Option<SavedClaim>,
    report: Option<SavedClaim>,
    screen: Option<SavedClaim>,
    title: Option<SavedClaim>,
    notification: Option<SavedClaim>,
    open_tools: usize,
    /// How long ago, and the wall-clock time.
    last_output: Option<(u64, u64)>,
    last_hook: Option<(u64, u64)>,
    last_title: String,
    dialog_gone_ms_ago: Option<u64>,
    typed: Typed,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedClaim {
    activity: Activity,
    wait: Option<String>,
    detail: String,
    ms_ago: u64,
    at_ms: u64,
    /// Milliseconds of lease left (0: lapsed).
    expires_in_ms: Option<u64>,
}

fn save_claim(claim: &Option<Claim>, now: Instant) -> Option<SavedClaim> {
    claim.as_ref().map(|c| SavedClaim {
        activity: c.activity,
        wait: c.wait.clone(),
        detail: c.detail.clone(),
        ms_ago: ago(now, c.at),
        at_ms: c.at_ms,
        expires_in_ms: c.expires.map(|at| u64::try_from(at.saturating_duration_since(now).as_millis()).unwrap_or(0)),
    })
}

fn restore_claim(claim: Option<SavedClaim>, now: Instant) -> Option<Claim> {
    claim.map(|c| Claim {
        activity: c.activity,
        wait: c.wait,
        detail: c.detail,
        at: back(now, c.ms_ago),
        at_ms: c.at_ms,
        expires: c.expires_in_ms.map(|ms| now + Duration::from_millis(ms)),
    })
}

impl Authority {
    /// Everything but the rule table, at `now`.
    pub fn save(&self, now: Instant) -> SavedAuthority {
        SavedAuthority {
            started_ms_ago: ago(now, self.started),
            lifecycle: self.lifecycle.clone(),
            activity: self.activity.clone(),
            wait: self.wait.clone(),
            health: self.health.clone(),
            ready: self.ready,
            hook: save_claim(&self.hook, now),
            report: save_claim(&self.report, now),
            screen: save_claim(&self.screen, now),
            title: save_claim(&self.title, now),
            notification: save_claim(&self.notification, now),
            open_tools: self.open_tools,
            last_output: self.last_output.map(|(at, ms)| (ago(now, at), ms)),
            last_hook: self.last_hook.map(|(at, ms)| (ago(now, at), ms)),
            last_title: self.last_title.clone(),
            dialog_gone_ms_ago: self.dialog_gone.map(|at| ago(now, at)),
            typed: self.typed.clone(),
        }
    }

    /// The authority `saved` describes, judging by `rules` from now on.
    pub fn restore(rules: RuleSet, saved: SavedAuthority, now: Instant) -> Authority {
        Authority {
            rules,
            started: back(now, saved.started_ms_ago),
            lifecycle: saved.lifecycle,
            activity: saved.activity,
            wait: saved.wait,
            health: saved.health,
            ready: saved.ready,
            hook: restore_claim(saved.hook, now),
            report: restore_claim(saved.report, now),
            screen: restore_claim(saved.screen, now),
            title: restore_claim(saved.title, now),
            notification: restore_claim(saved.notification, now),
            open_tools: saved.open_tools,
            last_output: saved.last_output.map(|(ms, wall)| (back(now, ms), wall)),
            last_hook: saved.last_hook.map(|(ms, wall)| (back(now, ms), wall)),
            last_title: saved.last_title,
            dialog_gone: saved.dialog_gone_ms_ago.map(|ms| back(now, ms)),
            typed: saved.typed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::Provider;

    #[test]
    fn a_restored_authority_says_what_the_saved_one_said_and_its_lease_lapses_on_time() {
        let t0 = Instant::now();
        let mut authority = Authority::new(RuleSet::builtin(Provider::Shell), t0, 1000);
        authority.on_output(t0 + Duration::from_millis(10), 1010);
        let now = t0 + Duration::from_millis(20);
        let json = serde_json::to_string(&authority.save(now)).unwrap();
        let mut restored =
            Authority::restore(RuleSet::builtin(Provider::Shell), serde_json::from_str(&json).unwrap(), now);
        assert_eq!(restored.view(), authority.view());
        assert_eq!(restored.next_deadline(now), authority.next_deadline(now));
        let later = now + Duration::from_secs(600);
        assert_eq!(restored.tick(later, 601_000), authority.tick(later, 601_000));
        assert_eq!(restored.view(), authority.view());
    }
}
