use super::*;

const GOOD: &str = r#"
worktrees = "../worktrees"

[defaults]
provider = "claude"
size = "100x30"
restart = "on-failure"
env = { SHARED = "1" }

[session.api]
args = ["--model", "opus"]
cwd = "services/api"
env = { PORT = "8080" }
group = "backend"
labels = ["rust", "api"]
worktree = "api-work"
prompts = [
  { text = "Read the README", when = "idle" },
  { text = "Then run the tests" },
]

[session.web]
command = ["codex", "--no-daemon"]
size = "120x40"
size_policy = "fixed"
history = 5000
restart = "always"

[session.notes]
provider = "shell"
command = ["bash"]
restart = "never"

[channel.release]
goal = "ship 1.0"
members = ["api", "web"]
supervisors = ["notes"]
humans = ["alice"]
checkin_after = 300
"#;

#[test]
fn a_full_manifest_parses_with_defaults_applied() {
    let m = parse(GOOD).unwrap();
    assert_eq!(m.worktrees.as_deref(), Some("../worktrees"));
    let names: Vec<&str> = m.sessions.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["api", "notes", "web"], "sessions come in name order");
    let api = m.session("api").unwrap();
    assert_eq!(api.provider, Provider::Claude);
    assert_eq!(api.command, None);
    assert_eq!(api.args, ["--model", "opus"]);
    assert_eq!(api.cwd.as_deref(), Some("services/api"));
    assert_eq!(api.env.get("SHARED").map(String::as_str), Some("1"), "defaults' env is merged");
    assert_eq!(api.env.get("PORT").map(String::as_str), Some("8080"));
    assert_eq!(api.size, Some((100, 30)));
    assert_eq!(api.restart, RestartPolicy::OnFailure);
    assert_eq!(api.worktree.as_deref(), Some("api-work"));
    assert_eq!(api.group.as_deref(), Some("backend"));
    assert_eq!(api.prompts.len(), 2);
    assert_eq!(api.prompts[0].when, When::Idle);
    assert_eq!(api.prompts[1].when, When::Now);
    let web = m.session("web").unwrap();
    assert_eq!(web.provider, Provider::Codex, "guessed from the command");
    assert_eq!(web.command.as_deref(), Some(&["codex".to_string(), "--no-daemon".to_string()][..]));
    assert!(web.args.is_empty(), "defaults' args go only to the provider's own program");
    assert_eq!((web.size, web.size_policy, web.history), (Some((120, 40)), SizePolicy::Fixed, Some(5000)));
    assert_eq!(web.restart, RestartPolicy::Always);
    assert_eq!(m.session("notes").unwrap().restart, RestartPolicy::Never);
    let release = &m.channels[0];
    assert_eq!(release.name.as_str(), "release");
    assert_eq!(release.checkin_after, Some(300));
    assert_eq!(
        release.members,
        vec![
            ("api".to_string(), Role::Worker),
            ("web".to_string(), Role::Worker),
            ("notes".to_string(), Role::Supervisor),
            ("alice".to_string(), Role::Human)
        ]
    );
}

/// The error `parse` gives, rendered as desk prints it for a file named `desk.toml`.
fn error(text: &str) -> String {
    parse(text).expect_err("the manifest is invalid").render("desk.toml")
}

#[test]
fn an_unknown_key_is_an_error_at_its_line_and_column_naming_the_keys_expected() {
    let text = "[session.api]\nprovider = \"claude\"\ncomand = [\"x\"]\n";
    let e = error(text);
    assert!(e.starts_with("desk.toml:3:1: unknown field `comand`, expected one of"), "{e}");
    assert!(e.contains("`command`"), "{e}");
    assert!(e.contains("\n  | comand = [\"x\"]\n  | ^"), "{e}");
    let top = error("sesion = 1\n[session.a]\nprovider = \"demo\"\n");
    assert!(top.starts_with("desk.toml:1:1: unknown field `sesion`"), "{top}");
    let channel = error("[session.a]\nprovider = \"demo\"\n[channel.c]\nmembers = [\"a\"]\nmember = []\n");
    assert!(channel.starts_with("desk.toml:5:1: unknown field `member`"), "{channel}");
}

#[test]
fn toml_syntax_errors_say_what_was_expected_where() {
    let e = error("[session.api]\nprovider = \"claude\nsize = \"1x1\"\n");
    assert!(e.starts_with("desk.toml:2:"), "{e}");
    let e = error("[session.api]\nprovider = \"demo\"\n[session.api]\n");
    assert!(e.starts_with("desk.toml:3:"), "{e}");
    assert!(e.contains("duplicate"), "a session declared twice: {e}");
}

#[test]
fn wrong_types_and_values_point_at_the_value() {
    let e = error("[session.api]\nprovider = \"claud\"\n");
    assert!(e.starts_with("desk.toml:2:12: unknown provider \"claud\"; known providers: claude, codex"), "{e}");
    let e = error("[session.api]\nprovider = \"demo\"\nsize = \"wide\"\n");
    assert!(e.starts_with("desk.toml:3:8: `size`: size \"wide\" is not COLSxROWS"), "{e}");
    let e = error("[session.api]\nprovider = \"demo\"\nrestart = \"sometimes\"\n");
    assert!(e.contains("3:11: restart policy \"sometimes\"; expected \"never\", \"on-failure\" or \"always\""), "{e}");
    let e = error("[session.api]\ncommand = \"claude --model x\"\n");
    assert!(e.starts_with("desk.toml:2:11: invalid type: string \"claude --model x\", expected a sequence"), "{e}");
    let e = error("[session.api]\nprovider = \"demo\"\nhistory = -1\n");
    assert!(e.starts_with("desk.toml:3:11: `history` is a line count from 0 to"), "{e}");
    let e = error("[session.api]\nprovider = \"demo\"\nprompts = [{ text = \"x\", when = \"later\" }]\n");
    assert!(e.contains("`when` is \"later\"; expected \"now\" or \"idle\""), "{e}");
    let e = error("[session.api]\nprovider = \"demo\"\nworktree = \"a b\"\n");
    assert!(e.starts_with("desk.toml:3:12: `worktree`: \"a b\" is not a branch name"), "{e}");
    let e = error("[session.api]\nprovider = \"demo\"\nenv = { \"A=B\" = \"1\" }\n");
    assert!(e.contains("\"A=B\" is not an environment variable name"), "{e}");
}

#[test]
fn session_and_channel_names_are_checked_where_they_are_declared() {
    let e = error("[session.\"-bad\"]\nprovider = \"demo\"\n");
    assert!(e.starts_with("desk.toml:1:10: [session.-bad]: a session name must start with a letter or digit"), "{e}");
    let e = error("[session.a]\nprovider = \"demo\"\n[channel.Release]\n");
    assert!(e.starts_with("desk.toml:3:10: [channel.Release]:"), "{e}");
}

#[test]
fn a_session_needs_a_provider_or_a_command_and_a_shell_needs_a_command() {
    let e = error("[session.api]\ncwd = \".\"\n");
    assert!(
        e.starts_with(
            "desk.toml:1:10: [session.api] needs `provider` (one of: claude, codex, opencode, demo, shell) or `command`"
        ),
        "{e}"
    );
    let e = error("[session.sh]\nprovider = \"shell\"\n");
    assert!(e.contains("runs provider `shell`, which needs a `command`"), "{e}");
    let e = error("[session.api]\ncommand = [\"claude\"]\nargs = [\"x\"]\n");
    assert!(e.starts_with("desk.toml:3:8: `args` go after the provider's own program"), "{e}");
    let e = error("[session.api]\ncommand = []\n");
    assert!(e.contains("`command` is empty"), "{e}");
}

#[test]
fn channel_members_must_be_sessions_of_the_manifest_and_listed_once() {
    let e = error("[session.a]\nprovider = \"demo\"\n[channel.c]\nmembers = [\"a\", \"b\"]\n");
    assert!(e.starts_with("desk.toml:4:17: #c: `b` is not a session of this manifest (people go in `humans`)"), "{e}");
    let e = error("[session.a]\nprovider = \"demo\"\n[channel.c]\nmembers = [\"a\"]\nsupervisors = [\"a\"]\n");
    assert!(e.contains("#c: `a` is listed twice"), "{e}");
    let e = error("[session.a]\nprovider = \"demo\"\n[channel.c]\nhumans = [\"Bad Name\"]\n");
    assert!(e.contains("\"Bad Name\" is not a member name"), "{e}");
}

#[test]
fn a_manifest_without_sessions_is_an_error() {
    let e = error("# nothing yet\n");
    assert!(e.starts_with("desk.toml: declares no sessions"), "{e}");
}

#[test]
fn columns_count_characters_not_bytes() {
    let e = error("[session.api]\nprovider = \"demo\"\ngroup = \"é\"; x = 1\n");
    // The error is at `;`, after a two-byte character: column 12 (13 if bytes were counted).
    assert!(e.starts_with("desk.toml:3:12:"), "{e}");
}

#[test]
fn a_session_on_a_host_takes_a_path_there_and_no_channel() {
    let m = parse("[session.train]\nhost = \"gpu\"\nprovider = \"claude\"\ncwd = \"/srv/train\"\n").unwrap();
    assert_eq!(m.session("train").unwrap().host.as_deref(), Some("gpu"));
    assert_eq!(parse("[session.a]\nprovider = \"claude\"\n").unwrap().sessions[0].host, None);
    for cwd in ["~", "~/work"] {
        assert!(
            parse(&format!("[session.t]\nhost = \"gpu\"\nprovider = \"claude\"\ncwd = \"{cwd}\"\n")).is_ok(),
            "{cwd}"
        );
    }
    let e = error("[session.t]\nhost = \"gpu\"\nprovider = \"claude\"\ncwd = \"work\"\n");
    assert!(e.starts_with("desk.toml:4:7: `cwd` of a session on host gpu is a path on that host"), "{e}");
    let e = error("[session.t]\nhost = \"-oProxyCommand=x\"\nprovider = \"claude\"\n");
    assert!(e.starts_with("desk.toml:2:8: `host` \"-oProxyCommand=x\" is not a host's name"), "{e}");
    let e = error(
        "[session.t]\nhost = \"gpu\"\nprovider = \"claude\"\n[session.u]\nprovider = \"claude\"\n[channel.c]\nmembers = [\"u\", \"t\"]\n",
    );
    assert!(e.contains("#c: `t` runs on host gpu; channels whose members sit on hosts are not supported yet"), "{e}");
}

#[test]
fn the_manifest_a_host_is_given_reads_back_to_the_same_sessions() {
    let text = r#"
[defaults]
args = ["--model", "opus"]
env = { SHARED = "a \"quoted\" \\ back\tslash\u0001" }
restart = "on-failure"

[session."api.v2"]
host = "gpu"
provider = "claude"
cwd = "/srv/api"
size = "100x30"
size_policy = "fixed"
history = 5000
worktree = "api-work"
group = "backend"
labels = ["rust", "api"]
prompts = [{ text = "Read the README\nthen the tests", when = "idle" }, { text = "Go" }]

[session.web]
host = "gpu"
command = ["sh", "-c", "echo 'hi'; exec cat"]

[session.local]
provider = "claude"
"#;
    let m = parse(text).unwrap();
    let on_gpu: Vec<&SessionSpec> = m.sessions.iter().filter(|s| s.host.as_deref() == Some("gpu")).collect();
    let hosted = hosted_text(&on_gpu, "laptop:/home/me/fleet/desk.toml");
    let back = parse(&hosted).unwrap_or_else(|e| panic!("{e}\n{hosted}"));
    let expected: Vec<SessionSpec> = on_gpu
        .iter()
        .map(|s| SessionSpec { host: None, cwd: Some(s.cwd.clone().unwrap_or_else(|| "~".into())), ..(*s).clone() })
        .collect();
    assert_eq!(back.sessions, expected, "{hosted}");
    assert!(back.channels.is_empty() && back.worktrees.is_none());
}
