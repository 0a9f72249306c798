//! The workspace's boundaries, checked, so nobody moves one by accident:
//!
//! - the manifests: each crate's normal dependencies (transitively, as Cargo resolved them in
//!   Cargo.lock) include no desk crate above it, nothing that makes syscalls for a pure crate,
//!   and no argument parser or terminal UI library for a crate the master or the daemon links;
//! - the sources: each crate's code (its modules reached from its root, tests left out) names
//!   only the desk crates below it, and a pure crate's code reads no clock and touches no file,
//!   socket, process or environment — a manifest cannot see `std::os::unix::net` or
//!   `Instant::now`, which are in std;
//! - the module graph of the shell crates (desk-common, desk-master, desk-daemon and the CLI):
//!   no module imports from a sibling that imports it back, directly or around a longer
//!   circle, so each crate reads from its top down.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Crates that talk to the kernel (or run an event loop): the shells' business, never a pure
/// crate's.
const SYSTEM: &[&str] = &["nix", "libc", "mio", "signal-hook", "signal-hook-mio", "signal-hook-registry", "tokio"];

/// The command line's and the dashboard's libraries: only the CLI's crate links them, so the
/// master (a process per session, every page of its code resident) and the daemon do not.
const CLI_ONLY: &[&str] = &["clap", "clap_complete", "clap_mangen", "ratatui", "crossterm"];

/// The desk crates, bottom up, and what each may not reach (by manifest) besides the crates
/// above it: `pure` crates may not reach [`SYSTEM`], and every crate but the CLI may not
/// reach [`CLI_ONLY`].
struct Layer {
    package: &'static str,
    /// The crate's root file, from the workspace root.
    root: &'static str,
    pure: bool,
    /// The desk crates its code may name (as paths: `desk_core::...`).
    may_use: &'static [&'static str],
}

const LAYERS: &[Layer] = &[
    Layer { package: "desk-term", root: "crates/desk-term/src/lib.rs", pure: true, may_use: &[] },
    Layer { package: "desk-wire", root: "crates/desk-wire/src/lib.rs", pure: true, may_use: &["desk-term"] },
    Layer {
        package: "desk-core",
        root: "crates/desk-core/src/lib.rs",
        pure: true,
        may_use: &["desk-term", "desk-wire"],
    },
    Layer {
        package: "desk-common",
        root: "crates/desk-common/src/lib.rs",
        pure: false,
        may_use: &["desk-term", "desk-wire", "desk-core"],
    },
    Layer {
        package: "desk-master",
        root: "crates/desk-master/src/lib.rs",
        pure: false,
        may_use: &["desk-term", "desk-wire", "desk-core", "desk-common"],
    },
    Layer {
        package: "desk-daemon",
        root: "crates/desk-daemon/src/lib.rs",
        pure: false,
        may_use: &["desk-term", "desk-wire", "desk-core", "desk-common"],
    },
    Layer {
        package: "desk",
        root: "src/lib.rs",
        pure: false,
        // The package also builds the demo agent's executable (src/bin/desk-demo-agent.rs).
        may_use: &[
            "desk-term",
            "desk-wire",
            "desk-core",
            "desk-common",
            "desk-master",
            "desk-daemon",
            "desk-demo-agent",
        ],
    },
];

/// Every desk crate, by package name: the stand-in agent depends on none of them.
const DESK_CRATES: &[&str] =
    &["desk-term", "desk-wire", "desk-core", "desk-common", "desk-master", "desk-daemon", "desk", "desk-demo-agent"];

/// What a pure crate's code may not name: its clock is an argument (`Instant` as a type is
/// fine, reading it is not), and it has no files, sockets, processes, threads or environment.
const IMPURE: &[&str] = &[
    "Instant::now",
    "SystemTime",
    "Timestamp::now",
    "Zoned::now",
    "TimeZone::system",
    "std::net",
    "unix::net",
    "UnixStream",
    "UnixListener",
    "TcpStream",
    "std::fs",
    "std::process",
    "std::thread",
    "std::env",
    "OpenOptions",
];

/// The shell crates whose module graph must have no circle.
const SHELLS: &[&str] = &["desk-common", "desk-master", "desk-daemon", "desk"];

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The host's target triple, as rustc names it (`host: x86_64-unknown-linux-gnu`).
fn host_triple() -> String {
    let out = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .arg("-vV")
        .output()
        .expect("rustc runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines().find_map(|l| l.strip_prefix("host: ")).expect("rustc -vV names the host").trim().to_string()
}

/// Package name → names of its normal (not dev, not build) dependencies on this host, from
/// `cargo metadata` (filtered to the host so it needs no other platform's packages offline).
fn normal_graph() -> HashMap<String, Vec<String>> {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked", "--offline", "--filter-platform", &host_triple()])
        .current_dir(workspace())
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr));
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let name_of: HashMap<&str, &str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let mut graph = HashMap::new();
    for node in meta["resolve"]["nodes"].as_array().unwrap() {
        let deps = node["deps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["dep_kinds"].as_array().unwrap().iter().any(|k| k["kind"].is_null()))
            .map(|d| name_of[d["pkg"].as_str().unwrap()].to_string())
            .collect();
        graph.insert(name_of[node["id"].as_str().unwrap()].to_string(), deps);
    }
    graph
}

fn closure(graph: &HashMap<String, Vec<String>>, root: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![root.to_string()];
    while let Some(name) = todo.pop() {
        for dep in graph.get(&name).into_iter().flatten() {
            if seen.insert(dep.clone()) {
                todo.push(dep.clone());
            }
        }
    }
    seen
}

#[test]
fn each_crate_reaches_only_the_crates_below_it() {
    let graph = normal_graph();
    // The walk must see system crates where they are, or the checks below prove nothing.
    let shell = closure(&graph, "desk");
    assert!(shell.contains("nix") && shell.contains("clap") && shell.contains("desk-core"), "{shell:?}");
    for layer in LAYERS {
        let reach = closure(&graph, layer.package);
        let upward: Vec<_> = reach
            .iter()
            .filter(|d| DESK_CRATES.contains(&d.as_str()) && !layer.may_use.contains(&d.as_str()))
            .collect();
        assert!(
            upward.is_empty(),
            "{} depends on {upward:?}, which it may not (it may use {:?})",
            layer.package,
            layer.may_use
        );
        if layer.pure {
            let system: Vec<_> = reach.iter().filter(|d| SYSTEM.contains(&d.as_str())).collect();
            assert!(
                system.is_empty(),
                "{} depends (transitively) on {system:?}: pure crates make no syscalls",
                layer.package
            );
        }
        if layer.package != "desk" {
            let ui: Vec<_> = reach.iter().filter(|d| CLI_ONLY.contains(&d.as_str())).collect();
            assert!(
                ui.is_empty(),
                "{} depends (transitively) on {ui:?}: only the CLI's crate links them",
                layer.package
            );
        }
    }
}

#[test]
fn the_demo_agent_stands_alone() {
    let reach = closure(&normal_graph(), "desk-demo-agent");
    let desk: Vec<_> = reach.iter().filter(|d| d.starts_with("desk")).collect();
    assert!(desk.is_empty(), "the demo agent depends on {desk:?}; it must build without desk");
}

/// Rust source with comments, string literals and char literals blanked out (each replaced by
/// spaces, newlines kept), so a scan sees only code and reports true line numbers.
fn code_only(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let blank = |out: &mut String, s: &[char]| out.extend(s.iter().map(|&c| if c == '\n' { '\n' } else { ' ' }));
    let mut i = 0;
    while i < b.len() {
        let at = |k: usize| b.get(k).copied().unwrap_or('\0');
        let start = i;
        if at(i) == '/' && at(i + 1) == '/' {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if at(i) == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < b.len() {
                if at(i) == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if at(i) == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if at(i) == 'r'
            && (at(i + 1) == '"' || at(i + 1) == '#')
            && (i == 0 || !ident(b[i - 1]) || b[i - 1] == 'b')
        {
            // A raw string: r"..." or r#"..."#, any number of #.
            let mut j = i + 1;
            let mut hashes = 0;
            while at(j) == '#' {
                hashes += 1;
                j += 1;
            }
            if at(j) != '"' {
                out.push(b[i]);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (1..=hashes).all(|h| at(j + h) == '#') {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            i = j;
        } else if at(i) == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                i += if b[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if at(i) == '\'' && (at(i + 1) == '\\' || (at(i + 2) == '\'' && at(i + 1) != '\'')) {
            // A char literal ('x', '\n', '\u{..}'); a lifetime ('a) has no closing quote.
            i += 2;
            while i < b.len() && b[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let end = i.min(b.len());
        blank(&mut out, &b[start..end]);
        i = end;
    }
    out
}

/// `code` with every item under `#[cfg(test)]` blanked (to its matching `}` or its `;`), and
/// the names of test modules declared as files (`#[cfg(test)] mod tests;`), which are skipped.
fn without_tests(code: &str) -> (String, Vec<String>) {
    let mut out: Vec<char> = code.chars().collect();
    let mut test_files = Vec::new();
    let marker: Vec<char> = "#[cfg(test)]".chars().collect();
    let mut i = 0;
    while i + marker.len() <= out.len() {
        if out[i..i + marker.len()] != marker[..] {
            i += 1;
            continue;
        }
        let mut j = i + marker.len();
        let mut depth = 0;
        while j < out.len() {
            match out[j] {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                ';' if depth == 0 => break,
                _ => {}
            }
            j += 1;
        }
        let item: String = out[i + marker.len()..j.min(out.len())].iter().collect();
        let words: Vec<&str> =
            item.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).collect();
        if let Some(at) = words.iter().position(|w| *w == "mod")
            && !item.contains('{')
            && let Some(name) = words.get(at + 1)
        {
            test_files.push(name.to_string());
        }
        let end = (j + 1).min(out.len());
        for c in &mut out[i..end] {
            if *c != '\n' {
                *c = ' ';
            }
        }
        i = j + 1;
    }
    (out.into_iter().collect(), test_files)
}

/// One module of a crate: its path from the crate root, its file, and its code (comments,
/// strings and tests blanked).
struct Module {
    path: Vec<String>,
    file: PathBuf,
    code: String,
}

/// The modules of the crate rooted at `root`, found by following `mod name;` declarations
/// (test modules left out).
fn modules(root: &Path) -> Vec<Module> {
    let mut found = Vec::new();
    let mut todo = vec![(Vec::<String>::new(), root.to_path_buf())];
    while let Some((path, file)) = todo.pop() {
        let src = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let (code, test_files) = without_tests(&code_only(&src));
        // Children of lib.rs, main.rs and mod.rs live beside them; those of foo.rs in foo/.
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        let dir = if ["lib", "main", "mod"].contains(&stem.as_str()) || path.is_empty() {
            file.parent().unwrap().to_path_buf()
        } else {
            file.parent().unwrap().join(&stem)
        };
        for line in code.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let Some(at) = words.iter().position(|w| *w == "mod") else { continue };
            let Some(name) = words.get(at + 1).and_then(|w| w.strip_suffix(';')) else { continue };
            if words[..at].iter().any(|w| !w.starts_with("pub")) || test_files.iter().any(|t| t == name) {
                continue;
            }
            let child = [dir.join(format!("{name}.rs")), dir.join(name).join("mod.rs")]
                .into_iter()
                .find(|p| p.exists())
                .unwrap_or_else(|| panic!("{}: no file for `mod {name};`", file.display()));
            let mut child_path = path.clone();
            child_path.push(name.to_string());
            todo.push((child_path, child));
        }
        found.push(Module { path, file, code });
    }
    found
}

/// Where `needle` occurs in `code` as a path (not inside a longer name), as 1-based lines.
fn lines_naming(code: &str, needle: &str) -> Vec<usize> {
    let mut lines = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let mut from = 0;
        while let Some(rel) = line[from..].find(needle) {
            let at = from + rel;
            let before = line[..at].chars().next_back();
            let after = line[at + needle.len()..].chars().next();
            let starts_a_name = needle.chars().next().is_some_and(|c| c.is_alphanumeric());
            let ends_a_name = needle.chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_');
            let clean_before = !starts_a_name || before.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
            let clean_after = !ends_a_name || after.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
            if clean_before && clean_after {
                lines.push(n + 1);
                break;
            }
            from = at + needle.len();
        }
    }
    lines
}

/// What `code` names that it may not: `forbidden` paths, each with the lines naming it.
fn violations(modules: &[Module], forbidden: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    for module in modules {
        for needle in forbidden {
            let lines = lines_naming(&module.code, needle);
            if !lines.is_empty() {
                let file = module.file.strip_prefix(workspace()).unwrap_or(&module.file);
                found.push(format!("{}:{lines:?} names {needle}", file.display()));
            }
        }
    }
    found
}

/// The paths a crate's code may not name: desk crates it may not use, the CLI's libraries
/// outside the CLI, and for a pure crate anything that reads the clock or reaches the system.
fn forbidden_for(layer: &Layer) -> Vec<String> {
    let mut forbidden: Vec<String> = DESK_CRATES
        .iter()
        .filter(|c| **c != layer.package && !layer.may_use.contains(c))
        .map(|c| format!("{}::", c.replace('-', "_")))
        .collect();
    if layer.package != "desk" {
        forbidden.extend(CLI_ONLY.iter().map(|c| format!("{c}::")));
    }
    if layer.pure {
        forbidden.extend(SYSTEM.iter().map(|c| format!("{}::", c.replace('-', "_"))));
        forbidden.extend(IMPURE.iter().map(|s| s.to_string()));
    }
    forbidden
}

#[test]
fn each_crate_names_only_what_it_may_use() {
    let mut found = Vec::new();
    for layer in LAYERS {
        let modules = modules(&workspace().join(layer.root));
        // The walk must reach the crate's modules, or the scan proves nothing.
        assert!(modules.len() > 3, "{}: only {} modules found", layer.package, modules.len());
        found.extend(violations(&modules, &forbidden_for(layer)));
    }
    // The master's executable is its crate's, and nothing of the CLI's.
    let master_bin = modules(&workspace().join("src/bin/desk-master.rs"));
    let not_master: Vec<String> =
        DESK_CRATES.iter().filter(|c| **c != "desk-master").map(|c| format!("{}::", c.replace('-', "_"))).collect();
    found.extend(violations(&master_bin, &not_master));
    assert!(found.is_empty(), "imports across a boundary:\n{}", found.join("\n"));
}

/// The sibling modules each module imports from, each with a line that does: for a reference
/// to `crate::a::b::c` from module `a::x`, the sibling pair is (`a::x`, `a::b`) — parents and
/// children are not siblings (a module's children are its own business).
fn sibling_edges(modules: &[Module]) -> BTreeMap<(Vec<String>, Vec<String>), String> {
    let known: BTreeSet<&Vec<String>> = modules.iter().map(|m| &m.path).collect();
    let mut edges = BTreeMap::new();
    for module in modules {
        for (line, target) in referenced_paths(&module.path, &module.code) {
            let Some(target) = (1..=target.len()).rev().map(|k| target[..k].to_vec()).find(|p| known.contains(p))
            else {
                continue;
            };
            let common = module.path.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common == module.path.len() || common == target.len() {
                continue;
            }
            let file = module.file.strip_prefix(workspace()).unwrap_or(&module.file);
            let text = module.code.lines().nth(line - 1).unwrap_or("").trim();
            edges
                .entry((module.path[..=common].to_vec(), target[..=common].to_vec()))
                .or_insert_with(|| format!("{}:{line}: {text}", file.display()));
        }
    }
    edges
}

/// The module paths `code` refers to through `crate::`, `super::` or `self::`, including the
/// members of a `use crate::{a, b::c}` group (over several lines too), as paths from the crate
/// root, each with the line it is on.
fn referenced_paths(module: &[String], code: &str) -> Vec<(usize, Vec<String>)> {
    let ident = |c: &char| c.is_alphanumeric() || *c == '_';
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let mut paths = Vec::new();
    for anchor in ["crate::", "super::", "self::"] {
        for (at, _) in code.match_indices(anchor) {
            if code[..at].chars().next_back().is_some_and(|c| ident(&c) || c == ':') {
                continue;
            }
            let mut base: Vec<String> = match anchor {
                "crate::" => Vec::new(),
                "self::" => module.to_vec(),
                _ => module[..module.len().saturating_sub(1)].to_vec(),
            };
            let mut rest = &code[at + anchor.len()..];
            while let Some(more) = rest.strip_prefix("super::") {
                base.pop();
                rest = more;
            }
            loop {
                let name: String = rest.chars().take_while(ident).collect();
                if name.is_empty() {
                    break;
                }
                rest = &rest[name.len()..];
                base.push(name);
                match rest.strip_prefix("::") {
                    Some(more) => rest = more,
                    None => break,
                }
            }
            if let Some(group) = rest.strip_prefix('{') {
                // `crate::{a, b::{c, d}}`: each top-level member names a path under the prefix.
                let mut depth = 0;
                let mut member_start = true;
                for (k, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => member_start = true,
                        c if member_start && ident(&c) => {
                            member_start = false;
                            let name: String = group[k..].chars().take_while(ident).collect();
                            let offset = code.len() - group.len() + k;
                            paths.push((line_of(offset), [base.clone(), vec![name]].concat()));
                        }
                        _ => {}
                    }
                }
            }
            paths.push((line_of(at), base));
        }
    }
    paths
}

/// The circles among siblings: each strongly connected set of two or more modules, with the
/// imports that close it.
fn circles(edges: &BTreeMap<(Vec<String>, Vec<String>), String>) -> Vec<String> {
    let nodes: BTreeSet<&Vec<String>> = edges.keys().flat_map(|(a, b)| [a, b]).collect();
    let reaches = |from: &Vec<String>, to: &Vec<String>| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for ((a, b), _) in edges.range((n.clone(), Vec::new())..) {
                if *a != n {
                    break;
                }
                if b == to {
                    return true;
                }
                if seen.insert(b.clone()) {
                    todo.push(b.clone());
                }
            }
        }
        false
    };
    let mut reported = BTreeSet::new();
    let mut found = Vec::new();
    for &node in &nodes {
        if reported.contains(node) {
            continue;
        }
        let circle: Vec<&Vec<String>> = nodes
            .iter()
            .copied()
            .filter(|other| *other == node || (reaches(node, other) && reaches(other, node)))
            .collect();
        if circle.len() < 2 {
            continue;
        }
        reported.extend(circle.iter().map(|p| (*p).clone()));
        let names: Vec<String> = circle.iter().map(|p| p.join("::")).collect();
        let closing: Vec<&String> = edges
            .iter()
            .filter(|((a, b), _)| circle.contains(&a) && circle.contains(&b))
            .map(|(_, evidence)| evidence)
            .collect();
        found.push(format!(
            "{}:\n  {}",
            names.join(" <-> "),
            closing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  ")
        ));
    }
    found
}

#[test]
fn no_module_of_a_shell_crate_imports_from_a_sibling_that_imports_it_back() {
    let mut found = Vec::new();
    for layer in LAYERS.iter().filter(|l| SHELLS.contains(&l.package)) {
        let modules = modules(&workspace().join(layer.root));
        let edges = sibling_edges(&modules);
        // The scan must see the imports between modules, or it proves nothing.
        assert!(edges.len() > 3, "{}: only {} imports between modules found", layer.package, edges.len());
        found.extend(circles(&edges).into_iter().map(|c| format!("{}: {c}", layer.package)));
    }
    assert!(found.is_empty(), "module circles:\n{}", found.join("\n"));
}
