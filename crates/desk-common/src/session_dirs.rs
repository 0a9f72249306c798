//! The directories a listing reads every session's files in, each opened once.
//!
//! Owns [`SessionDirs`]: the runtime directory (the masters' info files), the sessions' state
//! directory (`<state>/sessions`: each session's files that outlive its master) and `/proc`
//! (the masters themselves), held open for one pass over a fleet, and the reads of a session's
//! files relative to them. A file opened relative to an open directory costs the kernel a
//! lookup of its own one or two path components, where its whole path costs one of every
//! component from the root (six for a session's `conversations.json`): `desk ls` opens three
//! files for each session of a fleet (issue 22, docs/benchmarks.md §28).
//!
//! Invariants: a read here answers what the same read by full path answers — a directory that
//! cannot be opened is read through by its path, so nothing is reported missing that is
//! there; read-only; every descriptor is close-on-exec. May depend on the file system and
//! `/proc`; nothing of a command's logic.

use std::fs::File;
use std::io::ErrorKind;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

use crate::paths::{Paths, SessionName};

/// See the module documentation.
#[derive(Debug)]
pub struct SessionDirs {
    runtime: Dir,
    sessions_state: Dir,
    proc: Dir,
}

impl SessionDirs {
    /// Open the directories of `paths` (and `/proc`). Never fails: a directory that cannot be
    /// opened (not there yet, say) is read through by its path.
    pub fn open(paths: &Paths) -> SessionDirs {
        SessionDirs {
            runtime: Dir::open(paths.runtime.clone()),
            sessions_state: Dir::open(paths.state.join("sessions")),
            proc: Dir::open(PathBuf::from("/proc")),
        }
    }

    /// `<runtime>/<name>.<extension>`, open for reading; `Ok(None)` when there is none.
    pub fn runtime_file(&self, name: &SessionName, extension: &str) -> std::io::Result<Option<File>> {
        self.runtime.open_file(&Relative::new().push(name.as_str()).push(".").push(extension))
    }

    /// `<state>/sessions/<name>/<file>`, open for reading; `Ok(None)` when there is none.
    pub fn state_file(&self, name: &SessionName, file: &str) -> std::io::Result<Option<File>> {
        self.sessions_state.open_file(&Relative::new().push(name.as_str()).push("/").push(file))
    }

    /// `/proc/<pid>/<file>`, open for reading; `Ok(None)` when there is no such process.
    pub fn proc_file(&self, pid: u32, file: &str) -> std::io::Result<Option<File>> {
        let mut digits = [0u8; 10];
        self.proc.open_file(&Relative::new().push(decimal(pid, &mut digits)).push("/").push(file))
    }
}

/// One directory: open, or (it could not be opened) its path, read through as before.
#[derive(Debug)]
struct Dir {
    path: PathBuf,
    fd: Option<OwnedFd>,
}

impl Dir {
    fn open(path: PathBuf) -> Dir {
        // O_PATH: the descriptor only anchors lookups, and needs no read permission of its own.
        let fd = nix::fcntl::open(&path, OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty()).ok();
        Dir { path, fd }
    }

    /// Open `relative` for reading; `Ok(None)` when it does not exist.
    fn open_file(&self, relative: &Relative) -> std::io::Result<Option<File>> {
        let opened = match &self.fd {
            // nix makes the C string on the stack: no allocation per file.
            Some(fd) => openat(fd.as_fd(), relative.bytes(), OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty())
                .map(File::from)
                .map_err(std::io::Error::from),
            None => File::open(self.path.join(std::ffi::OsStr::from_bytes(relative.bytes()))),
        };
        match opened {
            Ok(file) => Ok(Some(file)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A path below an open directory, made on the stack: a session name (64 bytes at most), a
/// separator and a file name fit with room to spare.
struct Relative {
    bytes: [u8; RELATIVE_MAX],
    len: usize,
    /// A part did not fit: the path names nothing desk writes, and opens nothing.
    overflow: bool,
}

/// 160 bytes: a session name is at most [`crate::paths::MAX_NAME_LEN`] (64) bytes, and the
/// file names below it are a few dozen.
const RELATIVE_MAX: usize = 160;

impl Relative {
    fn new() -> Relative {
        Relative { bytes: [0; RELATIVE_MAX], len: 0, overflow: false }
    }

    fn push(mut self, part: &str) -> Relative {
        match self.bytes.get_mut(self.len..self.len + part.len()) {
            Some(room) => {
                room.copy_from_slice(part.as_bytes());
                self.len += part.len();
            }
            None => self.overflow = true,
        }
        self
    }

    /// The path; one that overflowed reads as a name with a NUL in it, which every open
    /// refuses (nix's conversion to a C string fails) rather than opening a shortened path.
    fn bytes(&self) -> &[u8] {
        if self.overflow { b"\0" } else { &self.bytes[..self.len] }
    }
}

/// `n` in decimal, written into `digits`.
fn decimal(mut n: u32, digits: &mut [u8; 10]) -> &str {
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // ASCII digits only.
    std::str::from_utf8(&digits[at..]).unwrap_or("0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_below_an_open_directory_reads_as_by_its_path() {
        use std::io::Read as _;
        let home = tempfile::tempdir().unwrap();
        let paths = Paths::in_home(home.path());
        let name = SessionName::parse("s1").unwrap();
        std::fs::create_dir_all(&paths.runtime).unwrap();
        std::fs::create_dir_all(paths.session_state(&name)).unwrap();
        std::fs::write(paths.runtime.join("s1.info"), b"info").unwrap();
        std::fs::write(paths.session_state(&name).join("conversations.json"), b"captures").unwrap();
        let dirs = SessionDirs::open(&paths);
        let mut text = String::new();
        dirs.runtime_file(&name, "info").unwrap().unwrap().read_to_string(&mut text).unwrap();
        assert_eq!(text, "info");
        text.clear();
        dirs.state_file(&name, "conversations.json").unwrap().unwrap().read_to_string(&mut text).unwrap();
        assert_eq!(text, "captures");
        assert!(dirs.runtime_file(&name, "exit").unwrap().is_none(), "a missing file is None");
        let other = SessionName::parse("s2").unwrap();
        assert!(dirs.state_file(&other, "conversations.json").unwrap().is_none(), "no state directory");
        let me = std::process::id();
        assert!(dirs.proc_file(me, "stat").unwrap().is_some());
        assert!(dirs.proc_file(u32::MAX - 1, "stat").unwrap().is_none(), "no such process");
    }

    #[test]
    fn a_directory_made_after_the_open_is_read_through_by_its_path() {
        let home = tempfile::tempdir().unwrap();
        let paths = Paths::in_home(home.path());
        let name = SessionName::parse("late").unwrap();
        let dirs = SessionDirs::open(&paths);
        assert!(dirs.runtime_file(&name, "info").unwrap().is_none());
        std::fs::create_dir_all(&paths.runtime).unwrap();
        std::fs::write(paths.runtime.join("late.info"), b"x").unwrap();
        assert!(dirs.runtime_file(&name, "info").unwrap().is_some());
    }

    #[test]
    fn a_path_too_long_for_the_stack_opens_nothing() {
        let long = "x".repeat(RELATIVE_MAX);
        let relative = Relative::new().push("a/").push(&long);
        assert_eq!(relative.bytes(), b"\0");
        assert_eq!(decimal(0, &mut [0; 10]), "0");
        assert_eq!(decimal(4_294_967_295, &mut [0; 10]), "4294967295");
    }
}
