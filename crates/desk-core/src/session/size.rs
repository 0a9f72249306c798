//! Which size a session has when several controllers report sizes.
//!
//! Owns the choice only: given the most recently active controller's size and every
//! controller's known size, [`SizePolicy::choose`] names the size to apply, or none to leave
//! the session as it is. Invariants: only controllers' sizes count (viewers, observers and
//! queries never resize a session); the chosen size is one `valid_size` accepts. Pure.

use std::fmt;
use std::str::FromStr;

use desk_term::screen::valid_size;

/// How the session's size follows its controllers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SizePolicy {
    /// The most recently active controller's size (the one that last said HELLO or typed).
    /// Whoever types sees the child drawn for their terminal; tmux's `latest`.
    #[default]
    Latest,
    /// The smallest width and the smallest height among the controllers: every controller sees
    /// the whole screen, the larger ones with room to spare.
    Smallest,
    /// The largest width and the largest height among the controllers (the largest single
    /// controller's size when together they would pass the cell bound): the child uses the
    /// biggest terminal, and smaller ones see a crop that keeps the cursor visible.
    Largest,
    /// The size the session started with, whatever its controllers report.
    Fixed,
}

impl SizePolicy {
    /// Every policy, by its name.
    pub const ALL: [SizePolicy; 4] = [SizePolicy::Latest, SizePolicy::Smallest, SizePolicy::Largest, SizePolicy::Fixed];

    pub fn name(self) -> &'static str {
        match self {
            SizePolicy::Latest => "latest",
            SizePolicy::Smallest => "smallest",
            SizePolicy::Largest => "largest",
            SizePolicy::Fixed => "fixed",
        }
    }

    /// The size to apply: `latest` is the most recently active controller's size (if known),
    /// `controllers` every controller's known (valid) size. `None` leaves the size alone.
    pub fn choose(
        self,
        latest: Option<(u16, u16)>,
        controllers: impl Iterator<Item = (u16, u16)> + Clone,
    ) -> Option<(u16, u16)> {
        match self {
            SizePolicy::Latest => latest,
            SizePolicy::Fixed => None,
            SizePolicy::Smallest => {
                let cols = controllers.clone().map(|(c, _)| c).min()?;
                let rows = controllers.map(|(_, r)| r).min()?;
                // Each side is some valid size's side or less, so the cell count only shrinks.
                Some((cols, rows))
            }
            SizePolicy::Largest => {
                let cols = controllers.clone().map(|(c, _)| c).max()?;
                let rows = controllers.clone().map(|(_, r)| r).max()?;
                if valid_size(cols, rows) {
                    return Some((cols, rows));
                }
                // A wide terminal and a tall one together pass the cell bound: the single
                // largest terminal wins (the first of equals, for a stable choice).
                let cells = |(c, r): (u16, u16)| u32::from(c) * u32::from(r);
                controllers.fold(None, |best, size| match best {
                    Some(best) if cells(best) >= cells(size) => Some(best),
                    _ => Some(size),
                })
            }
        }
    }
}

impl fmt::Display for SizePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A size policy name that is not one of [`SizePolicy::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown size policy {0:?}: expected latest, smallest, largest or fixed")]
pub struct UnknownSizePolicy(pub String);

impl FromStr for SizePolicy {
    type Err = UnknownSizePolicy;

    fn from_str(s: &str) -> Result<SizePolicy, UnknownSizePolicy> {
        SizePolicy::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| UnknownSizePolicy(s.to_string()))
    }
}
