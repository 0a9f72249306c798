//! What an empty composer looks like, learned from the real agents' recorded screens
//! (`tests/data/agents/<agent>/*.screens.txt`): desk must read every idle and working screen's
//! composer as empty (hint text, prompt glyph and frame are not a draft), and every screen with
//! typed or pasted text in it as holding that text — the rule that keeps a prompt out of
//! someone's draft.

use desk_core::state::RuleSet;
use std::path::PathBuf;

/// Every labelled screen of a recording: (label, rows).
fn screens(agent: &str, scenario: &str) -> Vec<(String, Vec<String>)> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/agents/{agent}/{scenario}.screens.txt"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in text.lines() {
        if let Some(head) = line.strip_prefix("===== ") {
            out.push((head.split_whitespace().next().unwrap_or("").to_string(), Vec::new()));
        } else if let Some((_, rows)) = out.last_mut() {
            rows.push(line.to_string());
        }
    }
    out
}

fn composer(agent: &str, rows: &[String]) -> String {
    RuleSet::builtin(agent.parse().expect("a known provider"))
        .delivery
        .composer_text(rows)
        .unwrap_or_else(|| panic!("{agent}: no composer on\n{}", rows.join("\n")))
}

#[test]
fn idle_and_working_composers_of_the_real_agents_read_empty() {
    for agent in ["claude", "codex", "opencode"] {
        for scenario in ["turn", "approval", "queue", "hooks"] {
            for (label, rows) in screens(agent, scenario) {
                if label.starts_with("idle") || label == "working" || label.starts_with("working-before") {
                    assert_eq!(composer(agent, &rows), "", "{agent}/{scenario} at {label}:\n{}", rows.join("\n"));
                }
            }
        }
    }
}

#[test]
fn typed_and_pasted_text_in_the_real_agents_composers_is_seen() {
    for agent in ["claude", "codex", "opencode"] {
        let typed = screens(agent, "turn").into_iter().find(|(l, _)| l == "typed").expect("a typed screen");
        assert!(composer(agent, &typed.1).contains("Say hello TOKEN-turn"), "{agent}: {:?}", composer(agent, &typed.1));
        let pasted: Vec<_> = screens(agent, "paste-placeholder").into_iter().filter(|(l, _)| l == "pasted").collect();
        assert!(!pasted.is_empty());
        for (i, (_, rows)) in pasted.iter().enumerate() {
            let text = composer(agent, rows);
            assert!(
                text.contains("TOKEN-ph") || text.contains("Paste"),
                "{agent}: pasted screen {i} reads {text:?}:\n{}",
                rows.join("\n")
            );
        }
    }
}

#[test]
fn a_draft_typed_or_pasted_into_the_real_agents_boxes_is_seen_and_its_clearing_too() {
    for agent in ["claude", "codex", "opencode"] {
        for (label, rows) in screens(agent, "draft") {
            let text = composer(agent, &rows);
            match label.as_str() {
                "draft-typed" => assert_eq!(text, "half typed draftword", "{agent}:\n{}", rows.join("\n")),
                "draft-pasted" => {
                    assert!(!text.is_empty(), "{agent}: a pasted draft reads empty:\n{}", rows.join("\n"))
                }
                "empty" | "cleared-typed" | "cleared-pasted" | "empty-end" => {
                    assert_eq!(text, "", "{agent} at {label}:\n{}", rows.join("\n"))
                }
                _ => {}
            }
        }
    }
}
