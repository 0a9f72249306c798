//! Signal numbers and names as people type and read them: `TERM`, `SIGterm`, `15`, and the
//! real-time signals (`RTMIN`, `RTMIN+3`, `RTMAX-1`, `40`), which nix's `Signal` does not know.
//!
//! Owns the one parser and the one printer of signals for every command (`desk kill`,
//! `desk ls`, the master's log, the demo agent's `--crash-signal`). Invariant: a parsed number
//! is a signal this system has (1 to `SIGRTMAX`), so it is safe to send and to put on the
//! wire (whose limit is 64).

use nix::sys::signal::Signal;

/// The highest signal number on this system (64 on Linux).
fn rt_max() -> i32 {
    libc::SIGRTMAX()
}

/// The lowest real-time signal an application may use (34 with glibc, which keeps 32 and 33).
fn rt_min() -> i32 {
    libc::SIGRTMIN()
}

/// Parse a signal name (with or without `SIG`, any case) or number.
pub fn parse(text: &str) -> Result<i32, String> {
    if let Ok(n) = text.parse::<i32>() {
        return if (1..=rt_max()).contains(&n) {
            Ok(n)
        } else {
            Err(format!("{n} is not a signal number (1 to {})", rt_max()))
        };
    }
    let upper = text.to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    if let Some(rest) = bare.strip_prefix("RTMIN") {
        return real_time(text, rt_min(), rest, '+');
    }
    if let Some(rest) = bare.strip_prefix("RTMAX") {
        return real_time(text, rt_max(), rest, '-');
    }
    format!("SIG{bare}").parse::<Signal>().map(|s| s as i32).map_err(|_| format!("{text:?} is not a signal name"))
}

/// `RTMIN`, `RTMIN+N`, `RTMAX`, `RTMAX-N`: `rest` is what follows the base name.
fn real_time(text: &str, base: i32, rest: &str, sign: char) -> Result<i32, String> {
    let wrong = || format!("{text:?} is not a real-time signal here (RTMIN is {}, RTMAX {})", rt_min(), rt_max());
    let offset = if rest.is_empty() {
        0
    } else {
        rest.strip_prefix(sign).and_then(|r| r.parse::<i32>().ok()).ok_or_else(wrong)?
    };
    let n = if sign == '+' { base + offset } else { base - offset };
    if (rt_min()..=rt_max()).contains(&n) { Ok(n) } else { Err(wrong()) }
}

/// The signal's name: `SIGTERM`, `SIGRTMIN+2`, or `signal 33` for one without a name.
pub fn name(signal: i32) -> String {
    if let Ok(s) = Signal::try_from(signal) {
        return s.as_str().to_string();
    }
    if (rt_min()..=rt_max()).contains(&signal) {
        let offset = signal - rt_min();
        return if offset == 0 { "SIGRTMIN".to_string() } else { format!("SIGRTMIN+{offset}") };
    }
    format!("signal {signal}")
}

/// How a child ended, in words: "exited with code 1", "was killed by signal 9 (SIGKILL)".
pub fn describe_exit(status: desk_wire::ExitStatus) -> String {
    match status {
        desk_wire::ExitStatus::Code(code) => format!("exited with code {code}"),
        desk_wire::ExitStatus::Signal(signal) => {
            let name = name(signal);
            if name.starts_with("SIG") {
                format!("was killed by signal {signal} ({name})")
            } else {
                format!("was killed by signal {signal}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_parse_real_time_ones_included() {
        assert_eq!(parse("TERM"), Ok(15));
        assert_eq!(parse("sigkill"), Ok(9));
        assert_eq!(parse("2"), Ok(2));
        assert_eq!(parse("RTMIN"), Ok(libc::SIGRTMIN()));
        assert_eq!(parse("SIGRTMIN+2"), Ok(libc::SIGRTMIN() + 2));
        assert_eq!(parse("rtmax-1"), Ok(libc::SIGRTMAX() - 1));
        assert_eq!(parse("40"), Ok(40));
        for bad in ["NOPE", "0", "65", "-1", "RTMIN+99", "RTMAXX", "RTMIN-1"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_round_trip() {
        for n in 1..=libc::SIGRTMAX() {
            let name = name(n);
            if !name.starts_with("signal ") {
                assert_eq!(parse(&name), Ok(n), "{name}");
            }
        }
        assert_eq!(name(15), "SIGTERM");
        assert_eq!(name(libc::SIGRTMIN() + 3), "SIGRTMIN+3");
    }
}
