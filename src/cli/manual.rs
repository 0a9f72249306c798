//! The manual pages (`desk man --out-dir DIR`, `make man`, the Debian package): `desk.1` and
//! one page per command (`desk-new.1`, `desk-channel-post.1`, ...).
//!
//! Owns putting each page together: what clap_mangen makes from the same definitions as
//! `--help` (name, synopsis, description, options, subcommands), and the sections a manual page
//! is read for that `--help` has no room for — EXIT STATUS, ENVIRONMENT, FILES, EXAMPLES and SEE
//! ALSO — taken from docs/cli.md, the contract the tests hold the code to, so the pages never
//! say something the document does not. Invariants: every visible command has a page; every page
//! has the five sections; the markdown of docs/cli.md is turned into roff here (tables,
//! paragraphs, lists, code blocks, `code` in bold) and nowhere else.

use anyhow::{Context, Result};
use roff::{Inline, Roff, bold, roman};
use std::path::{Path, PathBuf};

/// docs/cli.md as it was when desk was built.
const CLI_MD: &str = include_str!("../../docs/cli.md");

/// Write every page into `out_dir` (created if missing); returns their paths, `desk.1` first.
pub(super) fn write_pages(cmd: clap::Command, out_dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(out_dir).with_context(|| format!("cannot create {}", out_dir.display()))?;
    let mut root = cmd.disable_help_subcommand(true);
    root.build();
    let names: Vec<String> = root.get_subcommands().filter(|s| !s.is_hide_set()).map(|s| s.get_name().into()).collect();
    let mut written = Vec::new();
    let mut pages: Vec<(clap::Command, Vec<String>)> = vec![(root, Vec::new())];
    while let Some((cmd, path)) = pages.pop() {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            let mut sub_path = path.clone();
            sub_path.push(sub.get_name().to_string());
            pages.push((sub.clone(), sub_path));
        }
        let man = clap_mangen::Man::new(cmd);
        let file = out_dir.join(man.get_filename());
        let mut page = Vec::new();
        man.render(&mut page).with_context(|| format!("cannot render {}", file.display()))?;
        let page = String::from_utf8(page).context("a manual page is not UTF-8")?;
        let extra = extra_sections(&path, &names);
        std::fs::write(&file, insert_sections(&page, &extra))
            .with_context(|| format!("cannot write {}", file.display()))?;
        written.push(file);
    }
    written.sort_by_key(|p| p.file_name() != Some("desk.1".as_ref()));
    Ok(written)
}

/// The page with `extra` before its VERSION section (or at its end).
fn insert_sections(page: &str, extra: &str) -> String {
    match page.find("\n.SH VERSION") {
        Some(at) => format!("{}\n{}{}", &page[..at], extra.trim_end_matches('\n'), &page[at..]),
        None => format!("{page}{extra}"),
    }
}

/// The text of docs/cli.md under the heading `heading` (a whole line), up to the next heading
/// of the same or a higher level (a `#` line inside a code block is no heading).
fn section(heading: &str) -> Option<&'static str> {
    let level = heading.chars().take_while(|c| *c == '#').count();
    let start = CLI_MD.find(&format!("\n{heading}\n"))? + heading.len() + 2;
    let rest = &CLI_MD[start..];
    let (mut len, mut in_code) = (0, false);
    for line in rest.split_inclusive('\n') {
        in_code ^= line.starts_with("```");
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !in_code && hashes > 0 && hashes <= level && line[hashes..].starts_with(' ') {
            break;
        }
        len += line.len();
    }
    Some(&rest[..len])
}

/// EXIT STATUS, ENVIRONMENT, FILES, EXAMPLES and SEE ALSO for the page of `desk PATH...`
/// (`[]` for desk.1); `commands` are the visible top-level commands.
fn extra_sections(path: &[String], commands: &[String]) -> String {
    let mut roff = Roff::new();
    let own = path.first().and_then(|c| section(&format!("### `desk {c}`")));
    roff.control("SH", ["EXIT STATUS"]);
    match own.and_then(exit_codes) {
        Some(text) => paragraph(&mut roff, &text),
        None => blocks(&mut roff, section("## Exit codes").unwrap_or_default()),
    }
    roff.control("SH", ["ENVIRONMENT"]);
    blocks(&mut roff, section("## Environment").unwrap_or_default());
    roff.control("SH", ["FILES"]);
    blocks(&mut roff, section("## Files").unwrap_or_default());
    roff.control("SH", ["EXAMPLES"]);
    match own.and_then(examples) {
        Some(code) => blocks(&mut roff, &code),
        None => blocks(&mut roff, section("## Examples").unwrap_or_default()),
    }
    roff.control("SH", ["SEE ALSO"]);
    let mut see: Vec<String> = Vec::new();
    if path.is_empty() {
        see.extend(commands.iter().map(|c| format!("desk-{c}(1)")));
    } else {
        see.push("desk(1)".into());
        let text = own.unwrap_or_default();
        for c in commands.iter().filter(|c| Some(*c) != path.first()) {
            if text.contains(&format!("desk {c}")) {
                see.push(format!("desk-{c}(1)"));
            }
        }
    }
    let mut line: Vec<Inline> = Vec::new();
    for (i, page) in see.iter().enumerate() {
        if i > 0 {
            line.push(roman(", "));
        }
        line.push(bold(page.as_str()));
    }
    roff.text(line);
    roff.control("PP", [] as [&str; 0]);
    roff.text([roman(
        "docs/cli.md (every command, flag, exit code and JSON field), docs/operator-guide.md and README.md \
         in desk's source.",
    )]);
    // Apostrophes as the page's own preamble defines them (a plain one is typeset as a quote).
    roff.to_roff().replace('\'', r"\*(Aq")
}

/// The "Exit codes: ..." paragraph of a command's section, without its label.
fn exit_codes(section: &str) -> Option<String> {
    let start = section.find("\nExit codes: ")? + "\nExit codes: ".len();
    let rest = &section[start..];
    let end = rest.find("\n\n").unwrap_or(rest.len());
    Some(rest[..end].replace('\n', " "))
}

/// The code block after an "Examples:" line of a command's section, fenced as it is there.
fn examples(section: &str) -> Option<String> {
    let start = section.find("\nExamples:\n")? + "\nExamples:\n".len();
    let rest = &section[start..];
    let open = rest.find("```")?;
    let close = rest[open + 3..].find("\n```")? + open + 3;
    Some(rest[open..close + 4].to_string())
}

/// Markdown blocks as roff: tables (each row a tagged paragraph), `- ` lists, fenced code and
/// paragraphs.
fn blocks(roff: &mut Roff, markdown: &str) {
    // The paragraph being gathered, and whether it is a list item.
    let mut para: Vec<&str> = Vec::new();
    let mut item = false;
    let mut code: Option<Vec<&str>> = None;
    let flush = |roff: &mut Roff, para: &mut Vec<&str>, item: &mut bool| {
        if !para.is_empty() {
            if *item {
                roff.control("IP", ["\\(bu", "2"]);
                roff.text(inline(&para.join(" ")));
            } else {
                paragraph(roff, &para.join(" "));
            }
            para.clear();
        }
        *item = false;
    };
    for line in markdown.lines() {
        if let Some(lines) = code.as_mut() {
            if line.starts_with("```") {
                roff.control("PP", [] as [&str; 0]);
                roff.control("nf", [] as [&str; 0]);
                for l in lines.iter() {
                    roff.text([roman(format!("    {l}"))]);
                }
                roff.control("fi", [] as [&str; 0]);
                code = None;
            } else {
                lines.push(line);
            }
            continue;
        }
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            flush(roff, &mut para, &mut item);
            code = Some(Vec::new());
        } else if trimmed.starts_with('|') {
            flush(roff, &mut para, &mut item);
            let cells: Vec<&str> = trimmed.trim_matches('|').split(" | ").map(str::trim).collect();
            let header = cells.first().is_some_and(|c| matches!(*c, "code" | "variable" | "path" | "---"));
            if cells.len() >= 2 && !header && !cells[0].starts_with("---") {
                roff.control("TP", [] as [&str; 0]);
                roff.text(inline(cells[0]));
                roff.text(inline(&cells[1..].join(" — ")));
            }
        } else if let Some(text) = trimmed.strip_prefix("- ") {
            flush(roff, &mut para, &mut item);
            item = true;
            para.push(text);
        } else if trimmed.is_empty() {
            flush(roff, &mut para, &mut item);
        } else {
            para.push(trimmed);
        }
    }
    flush(roff, &mut para, &mut item);
}

fn paragraph(roff: &mut Roff, text: &str) {
    roff.control("PP", [] as [&str; 0]);
    roff.text(inline(text));
}

/// One line of markdown: `code` in bold, links as their text, the rest roman.
fn inline(text: &str) -> Vec<Inline> {
    let text = unlink(text);
    text.split('`')
        .enumerate()
        .filter(|(_, part)| !part.is_empty())
        .map(|(i, part)| if i % 2 == 1 { bold(part) } else { roman(part) })
        .collect()
}

/// `[text](target)` as `text`.
fn unlink(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](").map(|m| m + open) else { break };
        let Some(close) = rest[mid..].find(')').map(|c| c + mid) else { break };
        out.push_str(&rest[..open]);
        out.push_str(&rest[open + 1..mid]);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_section_of_docs_cli_md_has_its_exit_codes() {
        let send = section("### `desk send`").expect("desk send's section");
        assert!(exit_codes(send).unwrap().starts_with("0 queued"), "{send}");
        assert!(section("## Environment").unwrap().contains("DESK_HOME"));
        assert!(section("## Files").unwrap().contains("NAME.sock"));
    }

    #[test]
    fn markdown_becomes_roff() {
        let mut roff = Roff::new();
        blocks(&mut roff, "| `a` | one `b` |\n| --- | --- |\n\n- item [link](#x)\n\n```sh\ndesk ls\n```\n");
        let text = roff.to_roff();
        assert!(text.contains(".TP\n\\fBa\\fR\none \\fBb\\fR"), "{text}");
        assert!(text.contains(".IP \\(bu 2\nitem link"), "{text}");
        assert!(text.contains(".nf\n    desk ls\n.fi"), "{text}");
    }
}
