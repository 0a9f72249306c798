//! The master's internal command line: `desk-master ARGS` and `desk master ARGS` take the same
//! arguments, and this is their one parser (the size and environment syntax it shares with
//! `desk new` is `desk_common::syntax`).
//!
//! It is hand-written rather than clap because the master runs from its own small executable
//! (`desk-master`): every page of code a lone idle master has touched stays resident in it, and
//! a argument parser for six internal flags is not worth clap's share of those pages. The
//! arguments come from `desk new`, not from people, so errors only need to name the bad flag.

use desk_core::provider::Provider;
use desk_core::session::{SizePolicy, UnknownSizePolicy};
use std::ffi::{OsStr, OsString};
use std::os::fd::RawFd;

use super::MasterOptions;
use desk_common::paths::SessionName;
use desk_common::syntax::{parse_env, parse_size};

/// Parse the arguments after `desk master` (or of `desk-master`):
/// `--name N --size CxR [--size-policy P] [--cwd D] [--env K=V]... --generation G --provider P [--history LINES] [--log-cap BYTES] [--ready-fd FD] -- CMD [ARG]...`
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<MasterOptions, String> {
    let mut args = args.into_iter();
    let (mut name, mut size, mut cwd, mut env) = (None, None, None, Vec::new());
    let (mut generation, mut provider, mut ready_fd) = (None, None, None);
    let mut size_policy = SizePolicy::default();
    let mut history = desk_term::screen::DEFAULT_HISTORY_LINES;
    let mut log_cap = desk_common::screen_log::DEFAULT_LOG_CAP;
    let mut command = Vec::new();
    while let Some(flag) = args.next() {
        if flag == "--" {
            command.extend(args.by_ref());
            break;
        }
        let flag = flag.to_str().ok_or_else(|| format!("unknown argument {flag:?}"))?.to_string();
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--name" => name = Some(SessionName::parse(text(&value()?)?).map_err(|e| e.to_string())?),
            "--size" => size = Some(parse_size(text(&value()?)?)?),
            "--size-policy" => size_policy = text(&value()?)?.parse().map_err(|e: UnknownSizePolicy| e.to_string())?,
            "--cwd" => cwd = Some(value()?.into()),
            "--env" => env.push(parse_env(text(&value()?)?)?),
            "--generation" => generation = Some(number::<u32>(&flag, &value()?)?),
            "--provider" => provider = Some(text(&value()?)?.parse::<Provider>().map_err(|e| e.to_string())?),
            "--history" => {
                history = number::<usize>(&flag, &value()?)?;
                if history > desk_term::screen::MAX_HISTORY_LINES {
                    return Err(format!("--history {history} is more than {}", desk_term::screen::MAX_HISTORY_LINES));
                }
            }
            "--log-cap" => log_cap = number::<u64>(&flag, &value()?)?,
            "--ready-fd" => ready_fd = Some(number::<RawFd>(&flag, &value()?)?),
            _ => return Err(format!("unknown argument {flag:?}")),
        }
    }
    let mut command = command.into_iter();
    let program = command.next().ok_or("no command given after --")?;
    let (cols, rows) = size.ok_or("--size is required")?;
    Ok(MasterOptions {
        name: name.ok_or("--name is required")?,
        program,
        args: command.collect(),
        cwd,
        env,
        cols,
        rows,
        generation: generation.ok_or("--generation is required")?,
        provider: provider.ok_or("--provider is required")?,
        size_policy,
        ready_fd,
        history,
        log_cap,
    })
}

fn text(value: &OsStr) -> Result<&str, String> {
    value.to_str().ok_or_else(|| format!("{value:?} is not UTF-8"))
}

fn number<T: std::str::FromStr>(flag: &str, value: &OsStr) -> Result<T, String> {
    text(value)?.parse().map_err(|_| format!("{flag} takes a number, not {value:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_full_command_line_parses() {
        let opts = parse(os(&[
            "--name",
            "a1",
            "--size",
            "80x24",
            "--cwd",
            "/w",
            "--generation",
            "3",
            "--provider",
            "shell",
            "--ready-fd",
            "3",
            "--size-policy",
            "fixed",
            "--history",
            "7",
            "--env",
            "K=V",
            "--",
            "sh",
            "-c",
            "--name",
        ]))
        .unwrap();
        assert_eq!(opts.name.as_str(), "a1");
        assert_eq!((opts.cols, opts.rows, opts.generation, opts.ready_fd), (80, 24, 3, Some(3)));
        assert_eq!(opts.program, "sh");
        assert_eq!(opts.args, os(&["-c", "--name"]));
        assert_eq!(opts.env, vec![("K".into(), "V".into())]);
        assert_eq!(opts.cwd, Some("/w".into()));
        assert_eq!(opts.provider, Provider::Shell);
        assert_eq!(opts.size_policy, SizePolicy::Fixed);
        assert_eq!(opts.history, 7);
    }

    #[test]
    fn missing_or_unknown_arguments_are_named() {
        let base = ["--name", "a", "--size", "80x24", "--generation", "1", "--provider", "shell"];
        assert_eq!(parse(os(&base)).unwrap_err(), "no command given after --");
        assert!(parse(os(&["--name", "a", "--", "sh"])).unwrap_err().contains("--size"));
        assert!(parse(os(&["--bogus"])).unwrap_err().contains("--bogus"));
        assert!(parse(os(&["--name"])).unwrap_err().contains("--name needs a value"));
        assert!(parse(os(&["--name", "../x"])).is_err());
        let mut bad = os(&base);
        bad.extend(os(&["--generation", "x", "--", "sh"]));
        assert!(parse(bad).unwrap_err().contains("--generation takes a number"));
        let unknown = os(&["--name", "a", "--size", "80x24", "--generation", "1", "--provider", "emacs", "--", "sh"]);
        assert!(parse(unknown).unwrap_err().contains("unknown provider \"emacs\""));
        let mut policy = os(&base);
        policy.extend(os(&["--size-policy", "widest", "--", "sh"]));
        assert!(parse(policy).unwrap_err().contains("unknown size policy \"widest\""));
    }
}
