//! `desk channel post`: a message, durable when its id is printed; its author is who the
//! process tree says is asking.

#[allow(unused_imports)]
use super::*;

pub(in crate::cli) struct PostArgs {
    pub name: String,
    pub thread: Option<String>,
    pub as_member: Option<String>,
    pub text: Option<String>,
    pub file: Option<PathBuf>,
    pub json: bool,
}

#[derive(Serialize)]
struct Posted<'a> {
    id: &'a ItemId,
    channel: &'a str,
    author: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    thread: Option<&'a ItemId>,
    /// Members the daemon will prompt with it (routed against the roster now).
    to: Vec<String>,
    /// People it notifies (`@human`, person members).
    notify: Vec<String>,
    daemon_running: bool,
}

/// Who posts: the session this runs inside, and nobody else; outside every session the
/// operator, or with `--as` a person member the operator speaks for. Refused (`wrong-author`,
/// saying what and why): a `DESK_SESSION` that is not the session this runs in, `--as` from
/// inside a session naming anyone but itself, `--as` naming an agent member from outside.
fn author(caller: Option<&SessionName>, as_member: Option<&str>, roster: &Roster) -> Result<String> {
    let claimed = std::env::var("DESK_SESSION").ok().filter(|s| !s.is_empty());
    let channel = &roster.name;
    let refuse = |message: String| Err(fail(ErrorCode::WrongAuthor, message));
    match caller {
        Some(s) => {
            if let Some(c) = claimed.as_deref().filter(|c| *c != s.as_str()) {
                return refuse(format!(
                    "DESK_SESSION={c}, but this command runs inside session {s} (its master is an ancestor of this \
                     process): a session posts only as itself. Post without DESK_SESSION={c} to post as {s}"
                ));
            }
            if let Some(a) = as_member.filter(|a| *a != s.as_str()) {
                return refuse(format!(
                    "--as {a} refused: this command runs inside session {s}, which posts only as itself. \
                     Post without --as to post as {s}; only the operator, outside every session, uses --as"
                ));
            }
            Ok(s.to_string())
        }
        None => {
            if let Some(c) = claimed {
                return refuse(format!(
                    "DESK_SESSION={c}, but this command does not run inside session {c} (no master of a session \
                     of this desk is among its ancestors). Outside sessions you post as the operator: unset \
                     DESK_SESSION (env -u DESK_SESSION desk channel post ...)"
                ));
            }
            match as_member {
                None => Ok(OPERATOR.to_string()),
                Some(a) if a == OPERATOR => Ok(a.to_string()),
                Some(a) => match roster.member(a) {
                    Some(m) if m.role.is_agent() => refuse(format!(
                        "--as {a} refused: {a} is an agent session of #{channel}, and only {a} itself posts as {a} \
                         (from inside its session). Post as yourself without --as, or ask it: desk send {a} '...'"
                    )),
                    // A person member, or no member at all (refused as not-a-member by the caller).
                    _ => Ok(a.to_string()),
                },
            }
        }
    }
}

fn read_body(text: Option<String>, file: Option<PathBuf>) -> Result<String> {
    let bytes = match (text, file) {
        (Some(t), None) if t != "-" => return Ok(t),
        (Some(_), Some(_)) => return Err(failure(2, "give the message as TEXT or --file, not both")),
        (None, Some(f)) if f.as_os_str() != "-" => {
            let what = f.display().to_string();
            let file = std::fs::File::open(&f).with_context(|| format!("cannot read {what}"))?;
            read_capped(file, &what)?
        }
        _ => {
            if nix::unistd::isatty(std::io::stdin()).unwrap_or(false) {
                eprintln!("desk: reading the message from stdin; end it with Ctrl-D on a line of its own");
            }
            read_capped(std::io::stdin().lock(), "the message on stdin")?
        }
    };
    String::from_utf8(bytes).map_err(|_| failure(2, "the message is not UTF-8 text"))
}

fn read_capped(reader: impl std::io::Read, what: &str) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    reader.take(READ_LIMIT as u64).read_to_end(&mut bytes).with_context(|| format!("cannot read {what}"))?;
    if bytes.len() >= READ_LIMIT {
        return Err(failure(
            2,
            format!("{what} is over {} bytes; a channel message holds at most 16 KiB", desk_core::channel::MAX_BODY),
        ));
    }
    Ok(bytes)
}

pub(in crate::cli) fn post(args: PostArgs) -> Result<i32> {
    let name = parse_name(&args.name)?;
    let thread = args.thread.as_deref().map(|t| parse_id(t, "--thread")).transpose()?;
    let (paths, store) = store()?;
    // The author, the channel and the membership before stdin is read: a refused post must not
    // eat it.
    let roster = roster(&store, &name)?;
    let author = author(caller(&paths)?.as_ref(), args.as_member.as_deref(), &roster)?;
    if !roster.may_post(&author) {
        return Err(post_error(PostError::NotMember { channel: name, who: author }));
    }
    let body = read_body(args.text, args.file)?;
    let body = desk_core::delivery::text::sanitize(&body);
    let msg = store
        .post(&name, Draft { author: author.clone(), thread: thread.clone(), body }, now_ms())
        .map_err(post_error)?;
    // Who it goes to, as the daemon will route it (the roster may change before it does).
    let (parent_author, participants) = match &thread {
        Some(t) => {
            let (msgs, _) = store.read(&name, Some(t))?;
            let parent = msgs.first().map(|m| m.author.clone());
            let earlier: Vec<String> =
                msgs.iter().skip(1).filter(|m| m.id != msg.id).map(|m| m.author.clone()).collect();
            (parent, earlier)
        }
        None => (None, Vec::new()),
    };
    let ctx = ThreadContext { parent_author: parent_author.as_deref(), participants: &participants };
    let routing = route(&msg, &roster.members, &ctx);
    // The message is durable already; the daemon turns it into prompts, so it is started if
    // it is not running (and says so, once).
    let daemon = crate::autostart::ensure_daemon(&paths);
    let running = desk_common::daemon_client::request(
        &desk_common::daemon_client::socket_path(&paths),
        &desk_wire::control::Request::Ping,
        PING_TIMEOUT,
    )
    .is_ok_and(|r| r.into_answer::<desk_core::delivery::answer::Pid>().is_ok());
    let mut notes: Vec<String> = daemon.note().into_iter().collect();
    if !running {
        notes.push(
            "desk serve is not running: the message is stored and its prompts go out when it starts (desk serve)"
                .to_string(),
        );
    }
    if let Some(stall) = desk_daemon::channel::stall::read(&store.dir(&name)) {
        notes.push(format!(
            "{}; this message is stored, and goes out once that is fixed",
            stall_line(name.as_str(), &stall)
        ));
    }
    for u in &routing.unknown {
        notes.push(format!("@{u} is not a member of #{name}; that mention reaches no one"));
    }
    let to: Vec<String> = routing.prompts.iter().map(|p| p.member.clone()).collect();
    if args.json {
        let posted = Posted {
            id: &msg.id,
            channel: name.as_str(),
            author: &author,
            thread: thread.as_ref(),
            to,
            notify: routing.notify,
            daemon_running: running,
        };
        output::print_ok("channel-post", &posted, &notes)?;
    } else {
        println!("{}", msg.id);
        for n in &notes {
            eprintln!("desk: note: {n}");
        }
    }
    Ok(0)
}
