//! The C client, `native/deskc` (a second implementation of the wire protocol, written from
//! docs/protocol.md), against a live master: what it reads must be what the Rust side shows.
//!
//! Builds native/ with the system C compiler once per test process (`make -C native`); a
//! machine without `cc` fails here with a message saying so. Besides the live master, the two
//! codecs are compared on the committed fuzz corpus, input by input. Every session lives under its own
//! `Home` and every deskc runs on a harness PTY, so both are killed by pid when the test ends.

use crate::harness::{PATIENCE, PtyCommand};
use crate::support::Home;
use desk_wire::{Frame, FrameDecoder, MAX_PAYLOAD, Role};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The path of `native/build/<program>`, all built once for the tests of this process (they run
/// in parallel and must not run two `make`s in the same build directory at once).
fn native_program(program: &str) -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BUILT.get_or_init(build_native) {
        Ok(build) => build.join(program),
        Err(why) => panic!("{why}"),
    }
}

fn deskc() -> PathBuf {
    native_program("deskc")
}

fn build_native() -> Result<PathBuf, String> {
    let native = Path::new(env!("CARGO_MANIFEST_DIR")).join("native");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    if let Err(e) = Command::new(&cc).arg("--version").output() {
        return Err(format!(
            "the native tests need a C compiler, and `{cc} --version` could not run ({e}); \
             install one (Debian: apt-get install build-essential) or point CC at one"
        ));
    }
    // A `make test` above us may have exported its jobserver; this build is its own.
    let out = Command::new("make")
        .arg("-C")
        .arg(&native)
        .arg("build/deskc")
        .arg("build/test_vectors")
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS")
        .env_remove("MAKELEVEL")
        .output()
        .map_err(|e| format!("could not run `make -C {}`: {e}", native.display()))?;
    if !out.status.success() {
        return Err(format!(
            "`make -C {} build/deskc build/test_vectors` failed:\n{}{}",
            native.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(native.join("build"))
}

#[test]
fn deskc_prints_the_snapshot_and_streams_the_output_of_a_live_master() {
    let deskc = deskc();
    let home = Home::new();
    home.new_sh("cnative", "printf 'drawn by the child: %s\\n' ready; exec cat");
    home.wait_screen("cnative", "drawn by the child: ready");
    let socket = home.socket("cnative");

    let out = Command::new(&deskc).arg(&socket).arg("snapshot").output().expect("run deskc snapshot");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "deskc snapshot failed: {}\n{text}", String::from_utf8_lossy(&out.stderr));
    assert!(text.lines().any(|l| l == "drawn by the child: ready"), "deskc snapshot printed:\n{text}");
    // Every row of the screen, as `desk peek` (which drops the trailing blank rows) shows it.
    assert_eq!(text.trim_end(), home.peek("cnative").trim_end());
    assert_eq!(text.lines().count(), 40, "one line per row of the 120x40 session:\n{text}");

    // The stream: the keyframe draws the screen as it is, then OUTPUT continues it.
    let mut stream = PtyCommand::new(&deskc).arg(&socket).arg("stream").size(120, 40).spawn().expect("spawn deskc");
    stream.wait_for_text("drawn by the child: ready").unwrap();
    let mut controller = home.connect("cnative", Role::Controller, 120, 40);
    controller.send(&Frame::Input(b"streamed through deskc\n".to_vec()));
    stream.wait_for_text("streamed through deskc").unwrap();
    // Ctrl-D ends cat, so the session exits and deskc gets EXIT: a clean end.
    controller.send(&Frame::Input(vec![0x04]));
    let status = stream.wait_exit(PATIENCE).unwrap();
    assert!(status.success(), "deskc stream ended with {status:?}:\n{}", stream.screen());
}

#[test]
fn deskc_says_why_when_the_master_dies_under_it() {
    let deskc = deskc();
    let home = Home::new();
    home.new_sh("cdies", "echo up; exec cat");
    home.wait_screen("cdies", "up");
    let mut stream =
        PtyCommand::new(&deskc).arg(home.socket("cdies")).arg("stream").size(120, 40).spawn().expect("spawn deskc");
    stream.wait_for_text("up").unwrap();
    // No EXIT will come: the connection just ends, which is not a clean end.
    kill(Pid::from_raw(home.master_pid("cdies")), Signal::SIGKILL).unwrap();
    let status = stream.wait_exit(PATIENCE).unwrap();
    assert_eq!(status.code(), Some(1), "{}", stream.screen());
    assert!(stream.screen().contains("closed the connection without EXIT"), "{}", stream.screen());
}

/// What the Rust codec makes of a fuzz corpus input, in the form `test_vectors --verdicts`
/// prints: frames, the code of the error that ended the stream (0: none), and each frame's
/// re-encoding in hex followed by ',' ("!" for an EVENT whose canonical form passes the limit).
/// The input is read as `desk_wire::fuzz_check` reads it: the first byte says how many of the
/// next bytes are read sizes, the rest is the stream.
fn rust_verdict(data: &[u8]) -> String {
    let Some((&first, rest)) = data.split_first() else { return "0 0 ".to_string() };
    let stream = &rest[usize::from(first % 16).min(rest.len())..];
    let mut decoder = FrameDecoder::new();
    decoder.push(stream);
    let (mut frames, mut error, mut encoded) = (0, 0u16, String::new());
    loop {
        match decoder.next_frame() {
            Ok(Some(frame)) => {
                frames += 1;
                let oversized = match &frame {
                    Frame::Event(body) => serde_json::to_vec(body).map_or(true, |b| b.len() > MAX_PAYLOAD),
                    _ => false,
                };
                if oversized {
                    encoded.push('!');
                } else {
                    encoded.extend(frame.to_bytes().iter().map(|b| format!("{b:02x}")));
                }
                encoded.push(',');
            }
            Ok(None) => break,
            Err(e) => {
                error = e.code() as u16;
                break;
            }
        }
    }
    format!("{frames} {error} {encoded}")
}

/// Runs `test_vectors --verdicts` on `files` and compares each line with [`rust_verdict`].
fn assert_codecs_agree(files: &[PathBuf]) {
    // In batches, to stay far below the kernel's limit on the size of a command line.
    let mut verdicts = String::new();
    for batch in files.chunks(2000) {
        let out = Command::new(native_program("test_vectors"))
            .arg("--verdicts")
            .args(batch)
            .output()
            .expect("run test_vectors");
        assert!(out.status.success(), "test_vectors --verdicts failed:\n{}", String::from_utf8_lossy(&out.stderr));
        verdicts.push_str(&String::from_utf8(out.stdout).expect("hex and digits"));
    }
    let c_lines: Vec<&str> = verdicts.lines().collect();
    assert_eq!(c_lines.len(), files.len(), "one verdict per input");
    let mut disagreements = Vec::new();
    for (file, c) in files.iter().zip(c_lines) {
        let rust = rust_verdict(&std::fs::read(file).expect("input"));
        if rust != c {
            disagreements.push(format!("{}:\n  rust: {rust}\n  C:    {c}", file.display()));
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} of {} inputs differ:\n{}",
        disagreements.len(),
        files.len(),
        disagreements.join("\n")
    );
}

#[test]
fn the_c_and_rust_codecs_agree_on_every_fuzz_corpus_input() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/wire_decode");
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&dir).expect("fuzz/corpus/wire_decode").map(|e| e.expect("entry").path()).collect();
    files.sort();
    assert!(files.len() > 100, "expected the committed corpus in {}", dir.display());
    assert_codecs_agree(&files);
}

/// Mutants per test vector: with about 170 vectors, some 40,000 inputs, which both codecs
/// decode in about a second.
const MUTANTS_PER_VECTOR: usize = 240;

/// Bytes a mutation inserts: JSON's structural characters, number and escape pieces, a byte that
/// is never UTF-8, and a few values that sit on range edges of the fixed layouts.
const INTERESTING: &[u8] = b"{}[]\",:-+.0159eEu\\ntrfalsenull\x00\x01\x1f\x7f\x80\xc3\xa9\xff\x40\x41\xe8\x03";

#[test]
fn the_c_and_rust_codecs_agree_on_mutants_of_every_vector() {
    // Every vector's bytes, then deterministic mutants of each: a byte flipped, inserted or
    // removed in the payload, with the header's length fixed up so the payload is judged
    // rather than awaited. Each input is written in fuzz_check's form (a 0 first byte: no read
    // sizes, the rest is the stream).
    let vectors = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/wire");
    let scratch = tempfile::tempdir().expect("temp dir");
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut files = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&vectors)
        .expect("tests/vectors/wire")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    entries.sort();
    for path in entries {
        let cases: Vec<serde_json::Value> =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("vector file")).expect("vector JSON");
        for case in cases {
            let hex = case["hex"].as_str().expect("hex");
            let bytes: Vec<u8> =
                (0..hex.len() / 2).map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex")).collect();
            let mut inputs = vec![bytes.clone()];
            for _ in 0..MUTANTS_PER_VECTOR {
                let mut m = bytes.clone();
                let pick = next();
                let at = (next() as usize) % (m.len() + 1);
                let byte = INTERESTING[(next() as usize) % INTERESTING.len()];
                match pick % 3 {
                    0 if at < m.len() => m[at] = byte,
                    1 if at < m.len() && m.len() > 8 => {
                        m.remove(at.max(8));
                    }
                    _ => m.insert(at.max(8.min(m.len())), byte),
                }
                if m.len() >= 8 && pick % 5 != 0 {
                    let len = (m.len() - 8) as u32;
                    m[..4].copy_from_slice(&len.to_le_bytes());
                }
                inputs.push(m);
            }
            for input in inputs {
                let file = scratch.path().join(format!("{:05}", files.len()));
                let mut data = vec![0u8];
                data.extend_from_slice(&input);
                std::fs::write(&file, data).expect("write input");
                files.push(file);
            }
        }
    }
    assert!(files.len() > 30_000, "only {} inputs", files.len());
    assert_codecs_agree(&files);
}

/// `deskc snapshot` prints a master's screen lines as text: control characters in them (a C1
/// CSI, an ESC, a BEL — none of which desk's own screen model ever draws, so a stand-in master
/// sends them) come out as `?`, never as bytes that would drive the reader's terminal.
#[test]
fn deskc_prints_control_characters_in_a_snapshot_as_question_marks() {
    use std::io::{Read, Write};
    let deskc = deskc();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("fake.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut decoder = FrameDecoder::new();
        let mut buf = [0u8; 4096];
        loop {
            match decoder.next_frame().unwrap() {
                // Answered as a master answers: in the HELLO's version (deskc speaks 1).
                Some(Frame::Hello { version, .. }) => {
                    let info = crate::support::fake_session_info("fake", "sh");
                    let welcome = Frame::Welcome { version, info: Box::new(info) };
                    stream.write_all(&welcome.to_bytes()).unwrap();
                }
                Some(Frame::SnapshotRequest { .. }) => {
                    let mut screen = desk_term::screen::Screen::new(80, 24).snapshot();
                    screen.lines = vec!["plain".into(), "csi \u{9b}2J esc \x1b]0;t\x07 nel \u{85} end".into()];
                    let reply =
                        desk_wire::SnapshotReply { generation: 1, ..desk_wire::SnapshotReply::of_screen(screen) };
                    stream.write_all(&Frame::Snapshot(Box::new(reply)).to_bytes()).unwrap();
                }
                Some(_) => {}
                None => match stream.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => decoder.push(&buf[..n]),
                },
            }
        }
    });
    let out = Command::new(&deskc).arg(&socket).arg("snapshot").output().expect("run deskc snapshot");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    assert_eq!(text, "plain\ncsi ?2J esc ?]0;t? nel ? end\n");
    server.join().unwrap();
}
