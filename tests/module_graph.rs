//! The crate docs' `# Layout` is kept true: every module sits in one row, uses only modules of
//! its own row or the rows below, and no two modules import each other, even through others.
//! Read from the sources (`use crate::…` and `crate::…` paths outside `#[cfg(test)]`
//! modules), so a new import that breaks the layering fails here. The crate docs also say
//! each thing once: no section heading appears twice.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// Module (top-level name under `src/`) → the top-level modules it names.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
    let root = stack[0].clone();
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).expect("src readable") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path.strip_prefix(&root).expect("under src");
            let parts: Vec<String> = rel
                .with_extension("")
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            let is_rust = path.extension().is_some_and(|e| e == "rs");
            let is_test = parts.iter().any(|p| p == "tests" || p.ends_with("_tests"));
            if !is_rust || is_test || parts == ["lib"] {
                continue;
            }
            let top = parts[0].clone();
            let source = fs::read_to_string(&path).expect("readable");
            let code = source.split("#[cfg(test)]").next().unwrap_or_default();
            let deps = graph.entry(top.clone()).or_default();
            for (at, _) in code.match_indices("crate::") {
                let name: String = code[at + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_' || c.is_ascii_digit())
                    .collect();
                if !name.is_empty() && name != top {
                    deps.insert(name);
                }
            }
        }
    }
    graph
}

/// The rows of the `# Layout` block in `src/lib.rs`, top row first.
fn layout_rows() -> Vec<Vec<String>> {
    let lib = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .expect("lib.rs");
    let block = lib
        .split("//! # Layout")
        .nth(1)
        .and_then(|s| s.split("//! ```text\n").nth(1))
        .and_then(|s| s.split("//! ```\n").next())
        .expect("a text block under # Layout");
    let mut rows: Vec<Vec<String>> = Vec::new();
    for line in block.lines() {
        let line = line.trim_start_matches("//!");
        let continued = line.starts_with("  ");
        let mut text = String::new();
        let mut depth = 0;
        for c in line.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ if depth == 0 => text.push(c),
                _ => {}
            }
        }
        let mut words: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
        if !continued {
            words.remove(0); // the row's label
            rows.push(words);
        } else if let Some(last) = rows.last_mut() {
            last.extend(words);
        }
    }
    rows
}

#[test]
fn modules_follow_the_documented_layout_without_cycles() {
    let graph = imports();
    let rows = layout_rows();
    let row_of: BTreeMap<&str, usize> = rows
        .iter()
        .enumerate()
        .flat_map(|(i, row)| row.iter().map(move |m| (m.as_str(), i)))
        .collect();
    // Not part of the layering: the coordinator's simulated masters (unit tests only) and
    // the benches' window onto the coordinator.
    let aside = ["testing", "internals"];
    let mut problems = Vec::new();
    for (module, deps) in &graph {
        if aside.contains(&module.as_str()) {
            continue;
        }
        let Some(&row) = row_of.get(module.as_str()) else {
            problems.push(format!("{module} is in no row of the layout"));
            continue;
        };
        for dep in deps {
            match row_of.get(dep.as_str()) {
                Some(&dep_row) if dep_row < row => {
                    problems.push(format!(
                        "{module} (row {row}) uses {dep} (row {dep_row}, above)"
                    ));
                }
                None if graph.contains_key(dep) => {
                    problems.push(format!("{module} uses {dep}, which is in no row"));
                }
                _ => {}
            }
        }
    }
    // Cycles: depth-first search for a path back to where it began.
    for start in graph.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<Vec<&str>> = vec![vec![start.as_str()]];
        while let Some(path) = stack.pop() {
            let last = *path.last().expect("non-empty");
            for dep in graph.get(last).into_iter().flatten() {
                if dep == start {
                    problems.push(format!("cycle: {} -> {start}", path.join(" -> ")));
                } else if graph.contains_key(dep) && seen.insert(dep.as_str()) {
                    let mut longer = path.clone();
                    longer.push(dep);
                    stack.push(longer);
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(graph.len() > 20, "only {} modules found", graph.len());
}

/// Each section of the crate docs once: a second copy drifts from the first (the restart
/// guard's once kept an older proof that contradicted the current one).
#[test]
fn crate_docs_say_each_section_once() {
    let lib = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .expect("lib.rs");
    let mut seen = BTreeSet::new();
    let mut twice = Vec::new();
    let mut in_code = false;
    for line in lib.lines() {
        let Some(text) = line.strip_prefix("//!") else {
            continue;
        };
        let text = text.trim_start();
        if text.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        // Headings only: `# ` lines inside code blocks are hidden doctest lines.
        if !in_code && text.starts_with('#') && !seen.insert(text.to_owned()) {
            twice.push(text.to_owned());
        }
    }
    assert!(
        twice.is_empty(),
        "sections written twice in src/lib.rs: {twice:?}"
    );
    assert!(seen.len() > 5, "only {} headings found", seen.len());
}
