//! Every Rust example of README.md and docs/ compiles: each ```` ```rust ```` block is
//! preceded by `<!-- compiled: photon/examples/<file>.rs -->`, and its lines stand, word
//! for word and one after the other, in that example between a `// docs: <name>` line and
//! the next `// end docs` (indentation aside). `cargo test` builds the examples, so a
//! block that no longer compiles fails the build of its example, and a block changed on
//! one side only fails here.
//!
//! The examples are programs of their own rather than doctests: rustdoc's hidden `# `
//! lines would show on the pages as GitHub renders them.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// What the comment before a block says.
const COMPILED: &str = "<!-- compiled: ";
const REGION_START: &str = "// docs:";
const REGION_END: &str = "// end docs";

/// A ```` ```rust ```` block of a page.
struct Block {
    page: String,
    /// 1-based line of the opening fence.
    line: usize,
    /// The example named by the comment before it, relative to the workspace root.
    compiled: Option<String>,
    /// Its lines, without their common indentation.
    lines: Vec<String>,
}

/// A `// docs:` region of an example.
struct Region {
    name: String,
    lines: Vec<String>,
}

fn workspace_root() -> PathBuf {
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by the test runner"))
        .parent()
        .expect("photon/ is inside the workspace")
        .to_path_buf()
}

/// README.md and every page under docs/, in a stable order.
fn pages(root: &Path) -> Vec<PathBuf> {
    fn markdown_under(directory: &Path, found: &mut Vec<PathBuf>) {
        let entries = fs::read_dir(directory)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", directory.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                markdown_under(&path, found);
            } else if path.extension().is_some_and(|extension| extension == "md") {
                found.push(path);
            }
        }
    }
    let mut found = vec![root.join("README.md")];
    markdown_under(&root.join("docs"), &mut found);
    found.sort();
    found
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// `lines` without trailing blanks and without the indentation all non-blank lines share.
fn dedent<'a>(lines: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let lines: Vec<&str> = lines.into_iter().map(str::trim_end).collect();
    let indentation = lines
        .iter()
        .filter(|line| !line.is_empty())
        .map(|line| line.len() - line.trim_start().len())
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|line| line.get(indentation..).unwrap_or("").to_owned())
        .collect()
}

/// The ```` ```rust ```` blocks of a page; the comment may stand on the last non-blank line
/// before the fence.
fn rust_blocks(page: &str, text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let fence = lines[index].trim();
        let Some(info) = fence.strip_prefix("```") else {
            index += 1;
            continue;
        };
        let close = (index + 1..lines.len())
            .find(|&i| lines[i].trim() == "```")
            .unwrap_or_else(|| panic!("{page}:{}: a code block is never closed", index + 1));
        let language = info.split([',', ' ']).next().unwrap_or("");
        if language == "rust" {
            let compiled = lines[..index]
                .iter()
                .rev()
                .find(|line| !line.trim().is_empty())
                .and_then(|line| line.trim().strip_prefix(COMPILED))
                .and_then(|rest| rest.strip_suffix("-->"))
                .map(|path| path.trim().to_owned());
            blocks.push(Block {
                page: page.to_owned(),
                line: index + 1,
                compiled,
                lines: dedent(lines[index + 1..close].iter().copied()),
            });
        }
        index = close + 1;
    }
    blocks
}

/// The `// docs:` regions of an example, each without its common indentation.
fn regions(file: &str, text: &str) -> Vec<Region> {
    let lines: Vec<&str> = text.lines().collect();
    let mut regions = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let Some(name) = lines[index].trim().strip_prefix(REGION_START) else {
            index += 1;
            continue;
        };
        let end = (index + 1..lines.len())
            .find(|&i| lines[i].trim() == REGION_END)
            .unwrap_or_else(|| {
                panic!(
                    "{file}:{}: `{REGION_START}` without `{REGION_END}`",
                    index + 1
                )
            });
        regions.push(Region {
            name: name.trim().to_owned(),
            lines: dedent(lines[index + 1..end].iter().copied()),
        });
        index = end + 1;
    }
    regions
}

fn contains(haystack: &[String], needle: &[String]) -> bool {
    needle.is_empty()
        || haystack
            .windows(needle.len())
            .any(|window| window == needle)
}

fn first_line(block: &Block) -> &str {
    block
        .lines
        .iter()
        .find(|line| !line.is_empty())
        .map_or("", String::as_str)
}

#[test]
fn every_rust_block_of_the_docs_is_in_a_compiled_example() {
    let root = workspace_root();
    let mut blocks = Vec::new();
    let mut fences = 0;
    for page in pages(&root) {
        let text = fs::read_to_string(&page)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", page.display()));
        fences += text.lines().filter(|line| line.trim() == "```rust").count();
        blocks.extend(rust_blocks(&relative(&root, &page), &text));
    }
    assert_eq!(
        blocks.len(),
        fences,
        "the block parser found {} ```rust blocks in README.md and docs/, the pages open {fences}",
        blocks.len()
    );

    let mut failures = String::new();
    // Every region of every docs example, to find those no block uses any more.
    let mut used: Vec<(String, String, bool)> = Vec::new();
    let examples = root.join("photon/examples");
    let mut docs_examples: Vec<PathBuf> = fs::read_dir(&examples)
        .expect("photon/examples lists")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("docs_") && name.ends_with(".rs"))
        })
        .collect();
    docs_examples.sort();
    for path in &docs_examples {
        let file = relative(&root, path);
        let text = fs::read_to_string(path).expect("a docs example reads");
        for region in regions(&file, &text) {
            used.push((file.clone(), region.name, false));
        }
    }

    for block in &blocks {
        let Some(file) = &block.compiled else {
            let _ = writeln!(
                failures,
                "{}:{}: the ```rust block starting `{}` has no `{COMPILED}photon/examples/<file>.rs -->` \
                 line before it: put it in an example and name the example there",
                block.page,
                block.line,
                first_line(block)
            );
            continue;
        };
        let text = match fs::read_to_string(root.join(file)) {
            Ok(text) => text,
            Err(e) => {
                let _ = writeln!(
                    failures,
                    "{}:{}: the ```rust block starting `{}` names {file}, which cannot be read: {e}",
                    block.page,
                    block.line,
                    first_line(block)
                );
                continue;
            }
        };
        let found = regions(file, &text)
            .into_iter()
            .find(|region| contains(&region.lines, &block.lines));
        match found {
            Some(region) => {
                for entry in used.iter_mut() {
                    if entry.0 == *file && entry.1 == region.name {
                        entry.2 = true;
                    }
                }
            }
            None => {
                let _ = writeln!(
                    failures,
                    "{}:{}: the ```rust block starting `{}` is not word for word in {file} \
                     (between a `{REGION_START} <name>` line and `{REGION_END}`): change the \
                     page and the example together",
                    block.page,
                    block.line,
                    first_line(block)
                );
            }
        }
    }
    for (file, region, _) in used.iter().filter(|(_, _, used)| !used) {
        let _ = writeln!(
            failures,
            "{file}: the region `{REGION_START} {region}` holds no ```rust block of README.md \
             or docs/: remove it, or the comment naming {file} before its block is missing"
        );
    }
    assert!(failures.is_empty(), "\n{failures}");
}

#[test]
fn a_block_is_found_whatever_its_indentation() {
    let page = "Intro\n\n- item\n\n  <!-- compiled: photon/examples/x.rs -->\n  ```rust\n  let a = 1;\n      let b = 2;\n  ```\n\n```text\nnot rust\n```\n";
    let blocks = rust_blocks("page.md", page);
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].compiled.as_deref(), Some("photon/examples/x.rs"));
    assert_eq!(blocks[0].lines, ["let a = 1;", "    let b = 2;"]);
    assert_eq!(blocks[0].line, 6);

    let example = "fn f() {\n        // docs: x\n        let a = 1;\n            let b = 2;\n        // end docs\n}\n";
    let found = regions("x.rs", example);
    assert_eq!(found.len(), 1);
    assert!(contains(&found[0].lines, &blocks[0].lines));
    let drifted = rust_blocks("page.md", &page.replace("let a = 1", "let a = 2"));
    assert!(!contains(&found[0].lines, &drifted[0].lines));
}
