//! The README and the guide (`docs/guide/`) read as one document: their pages in reading order,
//! which the tests that run their commands walk (`readme.rs`), and every relative link of the
//! README and of `docs/` checked to lead somewhere: a file that exists and, with an anchor, a
//! heading that file has, as GitHub renders it.

use std::collections::{BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The guide's contents page, whose links give the guide's reading order.
const CONTENTS: &str = "docs/guide/README.md";

/// A README the front door must fit in (issue 40: "at most about 300 lines").
const FRONT_DOOR_LINES: usize = 300;

/// One page of the documentation: its path from the repository's root, and its text.
pub struct Page {
    pub path: String,
    pub text: String,
}

/// The pages whose examples the tests run, in the order a reader meets them: the README, then
/// each guide page in the order the contents link it, then any guide page the contents do not
/// link (by name; `every_guide_page_is_in_the_contents` fails on it, but its commands still run).
pub fn in_reading_order() -> Vec<Page> {
    let mut paths = vec!["README.md".to_owned()];
    let listed = guide_pages_in_contents();
    paths.extend(listed.iter().cloned());
    paths.extend(
        guide_pages()
            .into_iter()
            .filter(|page| !listed.contains(page)),
    );
    paths
        .into_iter()
        .map(|path| Page {
            text: read(&path),
            path,
        })
        .collect()
}

/// Every Markdown page under `docs/guide/` but its contents, by name.
fn guide_pages() -> Vec<String> {
    let mut pages: Vec<String> = std::fs::read_dir(format!("{ROOT}/docs/guide"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md") && name != "README.md")
        .map(|name| format!("docs/guide/{name}"))
        .collect();
    pages.sort();
    pages
}

/// The guide pages the contents link, in the order it links them, each once.
fn guide_pages_in_contents() -> Vec<String> {
    let mut pages = Vec::new();
    for link in links(&read(CONTENTS)) {
        let (target, _) = split_anchor(&link);
        if target.is_empty() || external(target) || target.contains('/') {
            continue;
        }
        let page = format!("docs/guide/{target}");
        if page.ends_with(".md") && !pages.contains(&page) {
            pages.push(page);
        }
    }
    pages
}

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every Markdown file the link check reads: the README and everything under `docs/`.
fn markdown_files() -> Vec<String> {
    fn walk(dir: &Path, into: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, into);
            } else if path.extension().is_some_and(|e| e == "md") {
                let relative = path.strip_prefix(ROOT).unwrap();
                into.push(relative.to_string_lossy().into_owned());
            }
        }
    }
    let mut files = vec!["README.md".to_owned()];
    walk(&Path::new(ROOT).join("docs"), &mut files);
    files.sort();
    files
}

/// The targets of every inline link and image (`[text](target)`, `![alt](target)`) outside code:
/// fenced blocks and code spans are skipped, as a renderer shows them as text.
fn links(markdown: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut fenced = false;
    // A code span may go on over the lines of its paragraph.
    let mut in_code = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            in_code = false;
            continue;
        }
        if fenced {
            continue;
        }
        if line.trim().is_empty() {
            in_code = false;
        }
        let text = without_code_spans(line, &mut in_code);
        let mut rest = text.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            found.push(after[..end].trim().to_owned());
            rest = &after[end + 1..];
        }
    }
    found
}

/// `line` with the text of each code span (between backticks) left out; `in_code` says whether
/// the line starts inside one, and is left saying whether it ends inside one.
fn without_code_spans(line: &str, in_code: &mut bool) -> String {
    let mut kept = String::new();
    for c in line.chars() {
        if c == '`' {
            *in_code = !*in_code;
        } else if !*in_code {
            kept.push(c);
        }
    }
    kept
}

fn external(target: &str) -> bool {
    ["http://", "https://", "mailto:"]
        .iter()
        .any(|scheme| target.starts_with(scheme))
}

fn split_anchor(target: &str) -> (&str, Option<&str>) {
    match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    }
}

/// The anchors GitHub makes of a page's headings: each heading's text (code spans' text kept,
/// their backticks dropped) lower-cased, every character but letters, digits, `-` and `_`
/// dropped, spaces made `-`; a repeated anchor gets `-1`, `-2`, ... after it.
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut anchors = BTreeSet::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let level = line.chars().take_while(|c| *c == '#').count();
        if fenced || level == 0 || level > 6 || !line[level..].starts_with(' ') {
            continue;
        }
        let slug: String = line[level..]
            .trim()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .flat_map(char::to_lowercase)
            .collect();
        let count = seen.entry(slug.clone()).or_insert(0);
        anchors.insert(match *count {
            0 => slug.clone(),
            n => format!("{slug}-{n}"),
        });
        *count += 1;
    }
    anchors
}

/// `path` with its `.` and `..` components resolved (without touching the file system).
fn normalised(path: &Path) -> PathBuf {
    let mut parts: Vec<Component> = Vec::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir if matches!(parts.last(), Some(Component::Normal(_))) => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.iter().collect()
}

#[test]
fn every_relative_link_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in markdown_files() {
        let text = read(&file);
        let dir = Path::new(&file).parent().unwrap();
        for link in links(&text) {
            if external(&link) {
                continue;
            }
            let (target, anchor) = split_anchor(&link);
            let target_file = if target.is_empty() {
                PathBuf::from(&file)
            } else {
                normalised(&dir.join(target))
            };
            checked += 1;
            if target_file.starts_with("..") || !Path::new(ROOT).join(&target_file).exists() {
                broken.push(format!("{file}: ({link}) leads to no file"));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            let target_text = read(&target_file.to_string_lossy());
            if !anchors(&target_text).contains(anchor) {
                broken.push(format!(
                    "{file}: ({link}) names no heading of {}",
                    target_file.display()
                ));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(checked >= 100, "only {checked} links were checked");
}

#[test]
fn every_guide_page_is_in_the_contents() {
    let listed = guide_pages_in_contents();
    let missing: Vec<String> = guide_pages()
        .into_iter()
        .filter(|page| !listed.contains(page))
        .collect();
    assert!(
        missing.is_empty(),
        "add a line for each to {CONTENTS}, where a reader finds it: {missing:?}"
    );
}

#[test]
fn the_readme_is_a_front_door() {
    let lines = read("README.md").lines().count();
    assert!(
        lines <= FRONT_DOOR_LINES,
        "README.md has {lines} lines: put the topic into a page of docs/guide/ and link it"
    );
}

/// The link check's own rules, on examples whose answers GitHub gives.
#[test]
fn anchors_and_links_are_read_as_github_renders_them() {
    let page = "# Check the table: `fsck`\n## Change & audit log\n## Tests\n## Tests\n\
                ```sh\n# not a heading\n```\n#hashtag\n";
    let anchors = anchors(page);
    assert_eq!(
        anchors.into_iter().collect::<Vec<_>>(),
        [
            "change--audit-log",
            "check-the-table-fsck",
            "tests",
            "tests-1"
        ]
    );
    let text = "See [a](b.md#c) and ![i](../x.png), not `[d](e.md)` nor `a\n[h](i.md)`:\n\
                ```\n[f](g.md)\n```\n";
    assert_eq!(links(text), ["b.md#c", "../x.png"]);
    assert_eq!(
        normalised(Path::new("docs/guide/../../README.md")),
        Path::new("README.md")
    );
}
