//! Where desk keeps its files, and the checks that make those places safe to use.
//!
//! Owns the mapping from environment (`DESK_HOME`, XDG variables) to directories, session name
//! validation, and the verification of the runtime directory. Invariants: nothing but a
//! validated [`SessionName`] ever becomes part of a path; the runtime directory is used only
//! after it has been verified to be a real directory (not a symlink), owned by the current user,
//! with mode exactly 0700; a socket path that would not fit in `sun_path` is refused up front.

use anyhow::{Context, Result, bail};
use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub use desk_core::session::{MAX_NAME_LEN, NameError};

/// `sun_path` is 108 bytes on Linux including the terminating NUL.
const MAX_SOCKET_PATH: usize = 107;

pub use desk_wire::names::SessionName;

/// The directories desk uses.
#[derive(Debug, Clone)]
pub struct Paths {
    /// Sockets, session metadata, exit records and session logs.
    pub runtime: PathBuf,
    /// Durable state (queues, journals).
    pub state: PathBuf,
    /// Configuration.
    pub config: PathBuf,
}

/// The files of one session, all inside the runtime directory.
#[derive(Debug, Clone)]
pub struct SessionPaths {
    pub socket: PathBuf,
    pub meta: PathBuf,
    pub exit: PathBuf,
    pub log: PathBuf,
    /// What a running master would answer to HELLO (`crate::info_file`).
    pub info: PathBuf,
}

impl Paths {
    /// Everything under one directory, as with `DESK_HOME` set to it.
    pub fn in_home(home: &Path) -> Paths {
        Paths { runtime: home.join("run"), state: home.join("state"), config: home.join("config") }
    }

    /// Resolve directories from the environment: `DESK_HOME` roots everything when set;
    /// otherwise the XDG base directories (runtime falls back to `/run/user/$UID/desk` when that
    /// directory is ours, else `/tmp/desk-$UID`: [`fallback_runtime`]).
    pub fn from_env() -> Result<Paths> {
        if let Some(home) = std::env::var_os("DESK_HOME").filter(|v| !v.is_empty()) {
            let home = PathBuf::from(home);
            let home = if home.is_absolute() {
                home
            } else {
                std::env::current_dir().context("cannot read the current directory")?.join(home)
            };
            return Ok(Paths::in_home(&home));
        }
        let uid = nix::unistd::geteuid().as_raw();
        let runtime = match std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
            Some(dir) => PathBuf::from(dir).join("desk"),
            None => fallback_runtime(uid, |dir| {
                fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir() && !m.file_type().is_symlink() && m.uid() == uid)
            }),
        };
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let xdg = |var: &str, fallback: &str| -> Result<PathBuf> {
            match std::env::var_os(var).filter(|v| !v.is_empty()) {
                Some(dir) => Ok(PathBuf::from(dir).join("desk")),
                None => match &home {
                    Some(home) => Ok(home.join(fallback).join("desk")),
                    None => bail!("neither {var} nor HOME is set; set DESK_HOME to choose where desk keeps its files"),
                },
            }
        };
        Ok(Paths { runtime, state: xdg("XDG_STATE_HOME", ".local/state")?, config: xdg("XDG_CONFIG_HOME", ".config")? })
    }

    /// Create the runtime directory if needed and verify it is safe to put sockets in.
    pub fn ensure_runtime(&self) -> Result<()> {
        ensure_private_dir(&self.runtime)
    }

    /// Create the state directory if needed and verify it like the runtime directory.
    pub fn ensure_state(&self) -> Result<()> {
        ensure_private_dir(&self.state)
    }

    pub fn session(&self, name: &SessionName) -> SessionPaths {
        let file = |ext: &str| self.runtime.join(format!("{name}.{ext}"));
        SessionPaths {
            socket: file("sock"),
            meta: file("json"),
            exit: file("exit"),
            log: file("log"),
            info: file("info"),
        }
    }

    /// Durable per-session state (generation counter, events journal, provider settings).
    pub fn session_state(&self, name: &SessionName) -> PathBuf {
        self.state.join("sessions").join(name.as_str())
    }

    /// Create a session's state directory (and the state root) privately.
    pub fn ensure_session_state(&self, name: &SessionName) -> Result<PathBuf> {
        self.ensure_state()?;
        let dir = self.session_state(name);
        ensure_private_dir(&self.state.join("sessions"))?;
        ensure_private_dir(&dir)?;
        Ok(dir)
    }

    /// Every session name that has files in the runtime directory, sorted.
    pub fn session_names(&self) -> Result<Vec<SessionName>> {
        Ok(self.session_names_and_exits()?.into_iter().map(|(name, _)| name).collect())
    }

    /// [`Paths::session_names`], each with whether its exit record (`<name>.exit`) was in the
    /// directory when it was read: a listing need not try to open the records that are not.
    pub fn session_names_and_exits(&self) -> Result<Vec<(SessionName, bool)>> {
        use nix::fcntl::OFlag;
        // nix's iterator lends each entry's name, where `std::fs::read_dir` copies every name
        // twice: a fleet's runtime directory holds six entries per session, and only the
        // session names are kept (issue 22: `desk ls` reads it before anything else).
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let mut dir = match nix::dir::Dir::open(&self.runtime, flags, nix::sys::stat::Mode::empty()) {
            Ok(dir) => dir,
            Err(nix::errno::Errno::ENOENT) => return Ok(Vec::new()),
            Err(e) => {
                return Err(std::io::Error::from(e)).with_context(|| format!("cannot list {}", self.runtime.display()));
            }
        };
        let mut names = Vec::new();
        let mut exits = std::collections::HashSet::new();
        for entry in dir.iter() {
            let entry = entry
                .map_err(std::io::Error::from)
                .with_context(|| format!("cannot list {}", self.runtime.display()))?;
            let Ok(file) = entry.file_name().to_str() else { continue };
            if let Some(stem) = file.strip_suffix(".exit") {
                exits.insert(stem.to_string());
                continue;
            }
            let Some(stem) = file.strip_suffix(".json").or_else(|| file.strip_suffix(".sock")) else {
                continue;
            };
            if let Ok(name) = SessionName::parse(stem) {
                names.push(name);
            }
        }
        names.sort();
        names.dedup();
        Ok(names
            .into_iter()
            .map(|name| {
                let exited = exits.contains(name.as_str());
                (name, exited)
            })
            .collect())
    }
}

impl SessionPaths {
    /// Refuse a socket path the kernel would truncate.
    pub fn check_socket_len(&self) -> Result<()> {
        let len = self.socket.as_os_str().len();
        if len > MAX_SOCKET_PATH {
            bail!(
                "socket path {} is {len} bytes; unix sockets allow at most {MAX_SOCKET_PATH}. \
                 Use a shorter session name or point DESK_HOME (or XDG_RUNTIME_DIR) at a shorter directory",
                self.socket.display()
            );
        }
        Ok(())
    }
}

/// The runtime directory when `XDG_RUNTIME_DIR` is unset: `/run/user/UID/desk` when systemd's
/// per-user directory exists and is ours (`ours` judges that), else `/tmp/desk-UID`. An ssh
/// login without PAM has no `XDG_RUNTIME_DIR` while a desktop login has it set to
/// `/run/user/UID`: both then find the same sockets, so a session started from one is seen
/// from the other (docs/remote.md).
fn fallback_runtime(uid: u32, ours: impl Fn(&Path) -> bool) -> PathBuf {
    let per_user = PathBuf::from(format!("/run/user/{uid}"));
    if ours(&per_user) { per_user.join("desk") } else { PathBuf::from(format!("/tmp/desk-{uid}")) }
}

/// Create `dir` (and its parents) with mode 0700 if missing, then verify that it is a directory,
/// not a symlink, owned by the effective uid, with no group or other permission bits.
pub fn ensure_private_dir(dir: &Path) -> Result<()> {
    match fs::DirBuilder::new().recursive(true).mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("cannot create directory {}", dir.display())),
    }
    verify_private_dir(dir)
}

/// The verification half of [`ensure_private_dir`].
pub fn verify_private_dir(dir: &Path) -> Result<()> {
    let meta = fs::symlink_metadata(dir).with_context(|| format!("cannot inspect {}", dir.display()))?;
    let uid = nix::unistd::geteuid().as_raw();
    if meta.file_type().is_symlink() {
        bail!(
            "{} is a symlink; desk keeps its sockets only in a real directory owned by you. \
             Remove the symlink or set DESK_HOME to another place",
            dir.display()
        );
    }
    if !meta.is_dir() {
        bail!("{} is not a directory; remove it or set DESK_HOME to another place", dir.display());
    }
    if meta.uid() != uid {
        bail!(
            "directory {} is owned by uid {}, not by you (uid {uid}); desk refuses to use it. \
             Set DESK_HOME to a directory you own",
            dir.display(),
            meta.uid()
        );
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode != 0o700 {
        bail!(
            "directory {} is mode {mode:04o}; desk needs it to be 0700 and owned by you (uid {uid}). \
             Fix with: chmod 0700 {}",
            dir.display(),
            dir.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_documented_pattern() {
        for good in ["a", "A0", "agent-1", "x.y_z", "9", &"a".repeat(64)] {
            assert!(SessionName::parse(good).is_ok(), "{good}");
        }
        assert_eq!(SessionName::parse(""), Err(NameError::Empty));
        assert_eq!(SessionName::parse(&"a".repeat(65)), Err(NameError::TooLong(65)));
        assert_eq!(SessionName::parse("-a"), Err(NameError::BadFirst('-')));
        assert_eq!(SessionName::parse(".hidden"), Err(NameError::BadFirst('.')));
        assert_eq!(SessionName::parse("a/b"), Err(NameError::BadChar('/')));
        assert_eq!(SessionName::parse("a b"), Err(NameError::BadChar(' ')));
        assert_eq!(SessionName::parse("..x"), Err(NameError::BadFirst('.')));
        assert_eq!(SessionName::parse("é"), Err(NameError::BadFirst('é')));
    }

    #[test]
    fn without_xdg_runtime_dir_the_runtime_is_systemds_per_user_dir_when_it_is_ours_else_tmp() {
        let yes = fallback_runtime(1000, |dir| dir == Path::new("/run/user/1000"));
        assert_eq!(yes, PathBuf::from("/run/user/1000/desk"));
        let no = fallback_runtime(1000, |_| false);
        assert_eq!(no, PathBuf::from("/tmp/desk-1000"));
    }

    #[test]
    fn private_dir_is_created_0700_and_loose_modes_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        ensure_private_dir(&dir).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        let err = ensure_private_dir(&dir).unwrap_err().to_string();
        assert!(err.contains("mode 0755") && err.contains("chmod 0700"), "{err}");
    }

    #[test]
    fn symlinked_runtime_dir_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        ensure_private_dir(&real).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let err = ensure_private_dir(&link).unwrap_err().to_string();
        assert!(err.contains("symlink"), "{err}");
    }
}
