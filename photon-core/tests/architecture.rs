//! ARCHITECTURE.md names files and modules; this keeps it true to the tree: every path it
//! names exists, every module of its photon-core table is a module of the crate, and every
//! file of its port table is in the port crates (all of them, except the concerns a port
//! may lack).

use std::path::{Path, PathBuf};

const PORT_CRATES: [&str; 4] = [
    "photon-backend-sqlite",
    "photon-backend-nats",
    "photon-backend-fluvio",
    "photon-backend-postgres",
];

/// Files of the port table that only ports with that concern have.
const OPTIONAL_PORT_FILES: [&str; 1] = ["transaction.rs"];

fn root() -> PathBuf {
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by the test runner"))
        .parent()
        .expect("photon-core sits in the workspace")
        .to_owned()
}

fn architecture() -> String {
    std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md is readable")
}

/// The text in backticks on `text`.
fn quoted(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The lines of the section headed `heading`, up to the next heading of its level.
fn section<'a>(text: &'a str, heading: &str) -> Vec<&'a str> {
    text.lines()
        .skip_while(|line| *line != heading)
        .skip(1)
        .take_while(|line| !line.starts_with("## "))
        .collect()
}

/// The first cell of each row of the tables in `lines` (header and rule rows left out).
fn first_cells<'a>(lines: &[&'a str]) -> Vec<&'a str> {
    lines
        .iter()
        .filter(|line| line.starts_with("| `"))
        .filter_map(|line| line.split('|').nth(1))
        .collect()
}

#[test]
fn every_path_it_names_exists() {
    let text = architecture();
    let paths: Vec<&str> = quoted(&text)
        .into_iter()
        .filter(|token| token.starts_with("photon") && token.contains('/'))
        .collect();
    assert!(paths.len() >= 10, "paths found: {paths:?}");
    let missing: Vec<&&str> = paths
        .iter()
        .filter(|path| !root().join(path).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names missing paths: {missing:?}"
    );
}

#[test]
fn every_core_module_in_its_table_exists() {
    let text = architecture();
    let table = section(&text, "## Modules of photon-core, by reader");
    let src = root().join("photon-core/src");
    let mut checked = 0;
    for cell in first_cells(&table) {
        for module in quoted(cell) {
            let exists = src.join(format!("{module}.rs")).exists()
                || src.join(module).join("mod.rs").exists();
            assert!(
                exists,
                "ARCHITECTURE.md names module `{module}`, not in photon-core/src"
            );
            checked += 1;
        }
    }
    let raw = std::fs::read_to_string(src.join("raw/mod.rs")).expect("photon-core has raw");
    for line in &table {
        for token in quoted(line) {
            let Some(module) = token.strip_prefix("raw::") else {
                continue;
            };
            let exists = src.join(format!("raw/{module}.rs")).exists()
                || raw.contains(&format!("pub mod {module} "));
            assert!(
                exists,
                "ARCHITECTURE.md names `raw::{module}`, not in photon-core/src/raw"
            );
            checked += 1;
        }
    }
    assert!(checked >= 15, "modules checked: {checked}");
}

#[test]
fn every_port_file_in_its_table_is_in_the_port_crates() {
    let text = architecture();
    let table = section(&text, "## Inside a port crate");
    let files: Vec<&str> = first_cells(&table).into_iter().flat_map(quoted).collect();
    assert!(files.len() >= 14, "files found: {files:?}");
    for file in files {
        let holders: Vec<&str> = PORT_CRATES
            .iter()
            .copied()
            .filter(|krate| root().join(krate).join("src").join(file).exists())
            .collect();
        if OPTIONAL_PORT_FILES.contains(&file) {
            assert!(!holders.is_empty(), "no port crate has `{file}`");
        } else {
            assert_eq!(holders, PORT_CRATES, "`{file}` is not in every port crate");
        }
    }
}
