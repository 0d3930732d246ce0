//! The claims ledger (`src/safety.rs`) stays honest: every row names a test on real masters,
//! a model instance and a negative control that exist. A test is a `fn` of that name in the
//! workspace's tests (integration or unit); a model instance is a `name: "…"` in the model's
//! presets. A row whose names went missing (renamed, deleted) fails here.

use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// One row: the claim, and the names in its test, model and control cells.
#[derive(Debug)]
struct Row {
    claim: String,
    tests: Vec<String>,
    models: Vec<String>,
    controls: Vec<String>,
}

/// The names between backticks in `cell`.
fn names(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

fn ledger() -> Vec<Row> {
    let text = std::fs::read_to_string(Path::new(ROOT).join("src/safety.rs")).expect("safety.rs");
    let start = text.find("LEDGER-START").expect("LEDGER-START marker");
    let end = text.find("LEDGER-END").expect("LEDGER-END marker");
    text[start..end]
        .lines()
        .map(|l| l.trim_start_matches("//!").trim())
        .filter(|l| l.starts_with('|') && !l.starts_with("|---") && !l.starts_with("| claim"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            assert_eq!(cells.len(), 5, "a ledger row has five cells: {l}");
            Row {
                claim: cells[0].to_owned(),
                tests: names(cells[2]),
                models: names(cells[3]),
                controls: names(cells[4]),
            }
        })
        .collect()
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "target") {
                sources(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn text_of(dirs: &[&str]) -> String {
    let mut files = Vec::new();
    for dir in dirs {
        sources(&Path::new(ROOT).join(dir), &mut files);
    }
    files
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_row_names_tests_model_instances_and_controls_that_exist() {
    let rows = ledger();
    assert!(rows.len() >= 9, "the ledger has {} rows", rows.len());
    let code = text_of(&["tests", "src", "cli", "testkit"]);
    let model = text_of(&["model/src"]);
    let is_test = |name: &str| code.contains(&format!("fn {name}("));
    let is_model = |name: &str| model.contains(&format!("name: \"{name}\""));
    let mut missing = Vec::new();
    for row in &rows {
        if row.tests.is_empty() || row.models.is_empty() || row.controls.is_empty() {
            missing.push(format!("{}: a cell is empty", row.claim));
        }
        for t in &row.tests {
            if !is_test(t) {
                missing.push(format!("{}: no test `{t}`", row.claim));
            }
        }
        for m in &row.models {
            if !is_model(m) {
                missing.push(format!("{}: no model instance `{m}`", row.claim));
            }
        }
        for c in &row.controls {
            if !is_test(c) && !is_model(c) {
                missing.push(format!("{}: no control `{c}`", row.claim));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn a_planted_missing_name_is_caught() {
    let code = text_of(&["tests"]);
    assert!(!code.contains(&format!("fn {}(", "no_such_test_anywhere")));
    assert_eq!(names("`a` and `b`"), ["a", "b"]);
}
