//! A throwaway OpenSSH server on 127.0.0.1, for the remote tests (tests/it/remote.rs) and the
//! remote benchmark (benches/remote.rs, which includes this file).
//!
//! [`Sshd::start`] makes a host key and a user key with ssh-keygen in a temp dir, an sshd config
//! that listens on 127.0.0.1 only on a free port with password login off and the authorized keys
//! in that dir, and a client config (`ssh_config`, host alias `desk-test`) whose known_hosts holds
//! the throwaway host key, so host-key checking stays on. sshd runs as the current user; run as
//! root it needs its privilege separation directory (`/run/sshd`), made here when missing, as the
//! package's service does at boot. [`Sshd::stop`] kills the server and every process it started
//! for its connections, each by its pid; dropping it does the same. Uses only std, nix and
//! tempfile, so both test and bench can build it.

#![allow(dead_code)]

use std::io::Read as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) const SSHD: &str = "/usr/sbin/sshd";

/// 20 s: an sshd greets within milliseconds; this is only reached when it cannot start.
const START_PATIENCE: Duration = Duration::from_secs(20);

/// One throwaway OpenSSH server on 127.0.0.1.
pub(crate) struct Sshd {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) port: u16,
    child: Option<Child>,
}

impl Sshd {
    pub(crate) fn start() -> Sshd {
        let dir = tempfile::Builder::new().prefix("dks").tempdir_in("/tmp").expect("temp dir");
        let keygen = |file: &str| {
            let status = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-C", "desk-test", "-f"])
                .arg(dir.path().join(file))
                .status()
                .expect("ssh-keygen");
            assert!(status.success(), "ssh-keygen failed");
        };
        keygen("host_key");
        keygen("user_key");
        std::fs::copy(dir.path().join("user_key.pub"), dir.path().join("authorized_keys")).unwrap();
        if nix::unistd::geteuid().is_root() && !Path::new("/run/sshd").exists() {
            let _ = std::fs::create_dir_all("/run/sshd");
        }
        let port = free_port();
        let config = format!(
            "ListenAddress 127.0.0.1\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\nAuthorizedKeysFile {d}/authorized_keys\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\nUsePAM no\n\
             StrictModes no\nPermitRootLogin prohibit-password\nLogLevel ERROR\n",
            d = dir.path().display()
        );
        std::fs::write(dir.path().join("sshd_config"), config).unwrap();
        let host_key = std::fs::read_to_string(dir.path().join("host_key.pub")).unwrap();
        let key = host_key.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
        std::fs::write(dir.path().join("known_hosts"), format!("[127.0.0.1]:{port} {key}\n")).unwrap();
        let user = nix::unistd::User::from_uid(nix::unistd::geteuid()).unwrap().unwrap().name;
        let ssh_config = format!(
            "Host desk-test\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n  IdentityFile {d}/user_key\n  IdentitiesOnly yes\n  \
             UserKnownHostsFile {d}/known_hosts\n  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  LogLevel ERROR\n",
            d = dir.path().display()
        );
        std::fs::write(dir.path().join("ssh_config"), ssh_config).unwrap();
        let mut sshd = Sshd { dir, port, child: None };
        sshd.run();
        sshd
    }

    /// The client config that reaches this server as `desk-test`.
    pub(crate) fn ssh_config(&self) -> PathBuf {
        self.dir.path().join("ssh_config")
    }

    /// Start (again) the server, on the same port, and wait until it greets.
    pub(crate) fn run(&mut self) {
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(self.dir.path().join("sshd_config"))
            .arg("-p")
            .arg(self.port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start sshd");
        self.child = Some(child);
        let deadline = Instant::now() + START_PATIENCE;
        loop {
            let greeted = std::net::TcpStream::connect(("127.0.0.1", self.port)).ok().and_then(|mut stream| {
                stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
                let mut banner = [0u8; 7];
                stream.read_exact(&mut banner).ok()?;
                (&banner == b"SSH-2.0").then_some(())
            });
            if greeted.is_some() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "sshd did not greet on 127.0.0.1:{} within {START_PATIENCE:?}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stop the server and every connection it serves (each by its pid): the host is gone.
    pub(crate) fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        let pid = child.id();
        let mut doomed: Vec<u32> = desk_common::procfs::descendants(pid).into_iter().map(|p| p.pid).collect();
        doomed.push(pid);
        for pid in doomed {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::SIGKILL);
        }
        let _ = child.wait();
    }

    /// A `[hosts.NAME]` entry reaching this server, running `desk` there (a command line).
    pub(crate) fn host_entry(&self, name: &str, desk: &str) -> String {
        format!(
            "[hosts.{name}]\nssh = \"desk-test\"\nssh_args = [\"-F\", \"{}\"]\ndesk = \"{}\"\n",
            self.ssh_config().display(),
            desk.replace('\\', "\\\\").replace('"', "\\\"")
        )
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A free port on 127.0.0.1 (bound, read, released).
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Pids of processes whose command line contains `text` (not this process).
pub(crate) fn processes_mentioning(text: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return pids };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        if String::from_utf8_lossy(&cmdline).contains(text) && pid != std::process::id() as i32 {
            pids.push(pid);
        }
    }
    pids
}

/// Kill (by pid) the ControlMaster ssh left running for a desk home whose runtime dir is
/// `runtime` (its control path is under it).
pub(crate) fn kill_control_masters(runtime: &Path) {
    for pid in processes_mentioning(&runtime.join("ssh").display().to_string()) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
    }
}

/// Kill (by pid) the shared links a desk home whose runtime dir is `runtime` left running: each
/// holds the lock of its host in `links/`.
pub(crate) fn kill_shared_links(runtime: &Path) {
    for pid in shared_links(runtime) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::SIGKILL);
    }
}

/// The pids of the shared links running for the desk home whose runtime dir is `runtime`.
pub(crate) fn shared_links(runtime: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(runtime.join("links")) else { return Vec::new() };
    entries
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "lock"))
        .filter_map(|e| desk_common::pidlock::holder(&e.path()))
        .collect()
}
