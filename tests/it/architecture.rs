//! The workspace's boundaries, checked: each pure crate's normal dependencies (transitively, as
//! Cargo resolved them in Cargo.lock) include nothing that makes syscalls and no desk crate above
//! it. A Cargo.toml is the boundary; this test is what stops someone moving it by accident.

use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::process::Command;

/// Crates that talk to the kernel (or run an event loop): the shells' business, never a pure
/// crate's.
const SYSTEM: &[&str] = &["nix", "libc", "mio", "signal-hook", "signal-hook-mio", "signal-hook-registry", "tokio"];

/// Every pure crate, and the desk crates it may not reach (those above it in the graph).
const LAYERS: &[(&str, &[&str])] = &[
    ("desk-term", &["desk-wire", "desk-core", "desk", "desk-demo-agent"]),
    ("desk-wire", &["desk-core", "desk", "desk-demo-agent"]),
    ("desk-core", &["desk", "desk-demo-agent"]),
];

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
        .current_dir(env!("CARGO_MANIFEST_DIR"))
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
fn pure_crates_reach_no_syscall_crate_and_no_desk_crate_above_them() {
    let graph = normal_graph();
    // The walk must see system crates where they are, or the checks below prove nothing.
    let shell = closure(&graph, "desk");
    assert!(shell.contains("nix") && shell.contains("libc") && shell.contains("desk-core"), "{shell:?}");
    for (krate, above) in LAYERS {
        let reach = closure(&graph, krate);
        let system: Vec<_> = reach.iter().filter(|d| SYSTEM.contains(&d.as_str())).collect();
        assert!(system.is_empty(), "{krate} depends (transitively) on {system:?}: pure crates make no syscalls");
        let upward: Vec<_> = reach.iter().filter(|d| above.contains(&d.as_str())).collect();
        assert!(upward.is_empty(), "{krate} depends on {upward:?}, which sit above it");
    }
}

#[test]
fn the_demo_agent_stands_alone() {
    let reach = closure(&normal_graph(), "desk-demo-agent");
    let desk: Vec<_> = reach.iter().filter(|d| d.starts_with("desk")).collect();
    assert!(desk.is_empty(), "the demo agent depends on {desk:?}; it must build without desk");
}
