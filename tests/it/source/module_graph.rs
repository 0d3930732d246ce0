//! The folders of `src/` are the library's layers, and this test keeps them so: a module uses
//! only its own layer and the layers below it (`api/` → `hold/` → `member/` → `protocol/` →
//! `config/` → the leaves at the root of `src/`), and no modules import each other, even
//! through others. The crate docs' `# Layout` names every layer and leaf, and says each
//! section once.
//!
//! The imports are read from the sources as the compiler would see them outside tests:
//! comments and strings are blanked first; every `#[cfg(test)]` item is cut out, only that
//! item (code after a `#[cfg(test)] mod tests;` still counts); then every path that starts
//! at `crate::` (grouped and nested `use` trees included), `super::`, or a name the crate
//! root re-exports. Each kind of violation is planted in a fixture below, so the checker is
//! known to see it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// The layer folders, top to bottom; every other module of the crate root is a leaf, below
/// them all.
const LAYERS: [&str; 5] = ["api", "hold", "member", "protocol", "config"];

/// Outside the layering: the benches' window onto the coordinator (a negative-control-only
/// module behind `--cfg redquorum_unsafe`), which may reach into any layer.
const ASIDE: [&str; 1] = ["internals"];

/// The row of a module path's first name: its layer's index, or the leaves' (below all).
fn layer(first: &str) -> usize {
    LAYERS
        .iter()
        .position(|l| *l == first)
        .unwrap_or(LAYERS.len())
}

/// The unit the graph is drawn over: the module a path names, down to two levels
/// (`hold::lock`, `error::node_failure`; `error` for what `error.rs` itself defines or
/// re-exports).
fn unit(path: &[String], modules: &BTreeSet<String>) -> String {
    match path {
        [first, second, ..] if modules.contains(&format!("{first}::{second}")) => {
            format!("{first}::{second}")
        }
        [first, ..] => first.clone(),
        [] => String::new(),
    }
}

/// `source` with comments blanked and the contents of string and char literals blanked, so
/// that neither can be mistaken for code. Lengths and line breaks are kept.
fn blank(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    let keep = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(keep(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !chars[..i]
                .last()
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            // A raw string: r"…", r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            out.push('"');
            j += 1;
            while j < chars.len() {
                if chars[j] == '"' && (0..hashes).all(|h| chars.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                out.push(keep(chars[j]));
                j += 1;
            }
            out.push('"');
            i = j;
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(keep(chars[i]));
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A char literal ('x', '\n', '\''); a lifetime has no closing quote.
            out.push('\'');
            i += 1;
            if chars.get(i) == Some(&'\\') {
                out.push(' ');
                i += 1;
            }
            while i < chars.len() && chars[i] != '\'' {
                out.push(' ');
                i += 1;
            }
            out.push('\'');
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// `code` (blanked) without its `#[cfg(test)]` items: from the attribute to the end of the
/// item it stands on (its `;`, or the `}` that closes its body), and nothing after that.
fn without_test_items(code: &str) -> String {
    const ATTR: &str = "#[cfg(test)]";
    let bytes = code.as_bytes();
    let mut out = String::with_capacity(code.len());
    let mut at = 0;
    while let Some(found) = code[at..].find(ATTR) {
        let start = at + found;
        out.push_str(&code[at..start]);
        let mut i = start + ATTR.len();
        let mut depth = 0i32;
        // Further attributes, then the item itself.
        while i < bytes.len() {
            match bytes[i] {
                b'{' | b'(' | b'[' => depth += 1,
                b'}' | b')' | b']' => {
                    depth -= 1;
                    if depth == 0 && bytes[i] == b'}' {
                        // A body ends the item; a `use` tree's `}` is followed by `;`.
                        let rest = code[i + 1..].trim_start();
                        if rest.starts_with(';') {
                            i = code.len() - rest.len();
                        }
                        i += 1;
                        break;
                    }
                }
                b';' if depth == 0 => {
                    i += 1;
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        // Keep line breaks, so that line-oriented readers still line up.
        out.extend(
            code[start..i.min(code.len())]
                .chars()
                .filter(|c| *c == '\n'),
        );
        at = i.min(code.len());
    }
    out.push_str(&code[at..]);
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The paths of a `use` tree (or a plain path) that starts at `text`: `a::b::{c, d::{e, f}}`
/// gives `a::b::c`, `a::b::d::e`, `a::b::d::f`. Returns the paths and where the tree ended.
fn tree(text: &str) -> (Vec<Vec<String>>, usize) {
    let chars: Vec<char> = text.chars().collect();
    let (paths, end) = tree_at(&chars, 0);
    (paths, end)
}

fn skip_ws(chars: &[char], mut i: usize) -> usize {
    while chars.get(i).is_some_and(|c| c.is_whitespace()) {
        i += 1;
    }
    i
}

fn tree_at(chars: &[char], mut i: usize) -> (Vec<Vec<String>>, usize) {
    let mut prefix: Vec<String> = Vec::new();
    loop {
        i = skip_ws(chars, i);
        if chars.get(i) == Some(&'{') {
            let mut paths = Vec::new();
            i += 1;
            loop {
                i = skip_ws(chars, i);
                match chars.get(i) {
                    Some('}') => {
                        i += 1;
                        break;
                    }
                    Some(',') => i += 1,
                    None => break,
                    _ => {
                        let (inner, end) = tree_at(chars, i);
                        for p in inner {
                            let mut full = prefix.clone();
                            full.extend(p);
                            paths.push(full);
                        }
                        i = end.max(i + 1);
                    }
                }
            }
            return (paths, i);
        }
        let start = i;
        while chars.get(i).is_some_and(|c| is_ident(*c) || *c == '*') {
            i += 1;
        }
        if i == start {
            return (vec![prefix], i);
        }
        prefix.push(chars[start..i].iter().collect());
        let after = skip_ws(chars, i);
        if chars.get(after) == Some(&':') && chars.get(after + 1) == Some(&':') {
            i = after + 2;
        } else {
            // `as alias`, `;`, `,`, `(`, …: the path ends here.
            return (vec![prefix], i);
        }
    }
}

/// One source file: its module path (`["hold", "lock"]` for `hold/lock.rs`) and the
/// absolute module paths it names outside tests.
fn paths_in(
    module: &[String],
    source: &str,
    reexports: &BTreeMap<String, Vec<String>>,
) -> Vec<Vec<String>> {
    let code = without_test_items(&blank(source));
    let mut found = Vec::new();
    let bytes: Vec<char> = code.chars().collect();
    let text: String = bytes.iter().collect();
    for (at, _) in text.match_indices("crate::") {
        if text[..at]
            .chars()
            .last()
            .is_some_and(|c| is_ident(c) || c == ':' || c == '$')
        {
            continue;
        }
        let (paths, _) = tree(&text[at + "crate::".len()..]);
        for path in paths {
            // A name the crate root re-exports stands for where it comes from.
            let resolved = match path.first().and_then(|n| reexports.get(n)) {
                Some(origin) => origin.clone(),
                None => path,
            };
            found.push(resolved);
        }
    }
    for (at, _) in text.match_indices("super::") {
        if text[..at]
            .chars()
            .last()
            .is_some_and(|c| is_ident(c) || c == ':')
        {
            continue;
        }
        let mut rest = &text[at..];
        let mut base: Vec<String> = module.to_vec();
        while let Some(r) = rest.strip_prefix("super::") {
            base.pop();
            rest = r.trim_start();
        }
        for path in tree(rest).0 {
            let mut full = base.clone();
            full.extend(path);
            found.push(full);
        }
    }
    found
}

/// The names the crate root re-exports (`pub use a::b::{C, D}`), each with its module path.
fn reexports(lib: &str) -> BTreeMap<String, Vec<String>> {
    let code = without_test_items(&blank(lib));
    let mut names = BTreeMap::new();
    for (at, _) in code.match_indices("pub use ") {
        for path in tree(&code[at + "pub use ".len()..]).0 {
            if let Some(last) = path.last()
                && path.len() > 1
            {
                names.insert(last.clone(), path.clone());
            }
        }
    }
    names
}

/// The module path of a file under `src/`: `hold/lock.rs` → `hold::lock`, `api/mod.rs` →
/// `api`; `None` for the crate root.
fn module_of(rel: &str) -> Option<Vec<String>> {
    let rel = rel.strip_suffix(".rs")?;
    let mut parts: Vec<String> = rel.split('/').map(str::to_owned).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    (parts != ["lib"] && !parts.is_empty()).then_some(parts)
}

/// Whether a file is a module's unit tests (`tests.rs`, `*_tests.rs`): compiled only under
/// `#[cfg(test)]`, so outside the layering.
fn is_test_file(module: &[String]) -> bool {
    module.iter().any(|p| p == "tests" || p.ends_with("_tests"))
}

/// Everything wrong with the layering of `files` (path under `src/`, source), with `lib` the
/// crate root's source: imports that go up a layer, and import cycles.
fn check(lib: &str, files: &[(String, String)]) -> Vec<String> {
    let reexports = reexports(lib);
    let modules: BTreeSet<String> = files
        .iter()
        .filter_map(|(rel, _)| module_of(rel))
        .map(|m| m.join("::"))
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut problems = Vec::new();
    let mut reported = BTreeSet::new();
    for (rel, source) in files {
        let Some(module) = module_of(rel) else {
            continue;
        };
        if is_test_file(&module) || ASIDE.contains(&module[0].as_str()) {
            continue;
        }
        let from = unit(&module, &modules);
        graph.entry(from.clone()).or_default();
        for path in paths_in(&module, source, &reexports) {
            let Some(first) = path.first() else { continue };
            if first == "self" || first == "super" || ASIDE.contains(&first.as_str()) {
                continue;
            }
            let to = unit(&path, &modules);
            if to == from || to.is_empty() {
                continue;
            }
            if layer(first) < layer(&module[0]) {
                // Once per module used, however many of its names.
                if reported.insert((rel.clone(), to.clone())) {
                    problems.push(format!(
                        "{rel}: {from} ({}) uses {} ({}), a layer above",
                        row_name(&module[0]),
                        path.join("::"),
                        row_name(first),
                    ));
                }
            }
            graph.entry(from.clone()).or_default().insert(to);
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
    problems
}

fn row_name(first: &str) -> String {
    if LAYERS.contains(&first) {
        format!("{first}/")
    } else {
        "a leaf".to_owned()
    }
}

fn src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `src/`, by its path under `src/`.
fn sources() -> Vec<(String, String)> {
    let root = src();
    let mut stack = vec![root.clone()];
    let mut files = Vec::new();
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).expect("src readable") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(&root).expect("under src");
                let rel = rel.to_string_lossy().replace('\\', "/");
                files.push((rel, fs::read_to_string(&path).expect("readable")));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn modules_use_only_their_layer_and_those_below_without_cycles() {
    let lib = fs::read_to_string(src().join("lib.rs")).expect("lib.rs");
    let files = sources();
    let problems = check(&lib, &files);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The check saw the tree: every layer folder, and more than a handful of imports.
    for layer in LAYERS {
        assert!(
            files
                .iter()
                .any(|(rel, _)| rel.starts_with(&format!("{layer}/"))),
            "no files in src/{layer}/"
        );
    }
    let reexports = reexports(&lib);
    let imports: usize = files
        .iter()
        .filter_map(|(rel, s)| Some(paths_in(&module_of(rel)?, s, &reexports).len()))
        .sum();
    assert!(imports > 100, "only {imports} imports found");
}

/// The `# Layout` section of the crate docs names every layer folder and every leaf module.
#[test]
fn crate_docs_layout_names_every_layer_and_leaf() {
    let lib = fs::read_to_string(src().join("lib.rs")).expect("lib.rs");
    let layout = lib
        .split("//! # Layout")
        .nth(1)
        .and_then(|s| s.split("\n//! # ").next())
        .expect("a # Layout section");
    let mut missing = Vec::new();
    for (rel, _) in sources() {
        let Some(module) = module_of(&rel) else {
            continue;
        };
        if module.len() > 1 && !LAYERS.contains(&module[0].as_str()) {
            continue; // a leaf's own submodules
        }
        if is_test_file(&module) || module.len() > 2 {
            continue;
        }
        let name = module.last().expect("non-empty");
        let shown = if module.len() == 1 && LAYERS.contains(&name.as_str()) {
            format!("{name}/")
        } else {
            name.clone()
        };
        if !layout.contains(&format!("`{shown}`")) && !layout.contains(&format!("{shown} ")) {
            missing.push(module.join("::"));
        }
    }
    assert!(
        missing.is_empty(),
        "not in the crate docs' # Layout: {missing:?}"
    );
}

/// Each section of the crate docs once: a second copy drifts from the first (the restart
/// guard's once kept an older proof that contradicted the current one).
#[test]
fn crate_docs_say_each_section_once() {
    let lib = fs::read_to_string(src().join("lib.rs")).expect("lib.rs");
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

// Planted violations: the checker must find each kind.

const FIXTURE_LIB: &str =
    "mod api;\nmod config;\nmod error;\npub use api::client::Redlock;\npub use error::Error;\n";

fn fixture(files: &[(&str, &str)]) -> Vec<String> {
    let files: Vec<(String, String)> = files
        .iter()
        .map(|(p, s)| ((*p).to_owned(), (*s).to_owned()))
        .collect();
    check(FIXTURE_LIB, &files)
}

/// A fixture's problems, which must be exactly one naming `needle`.
fn one_problem(files: &[(&str, &str)], needle: &str) {
    let problems = fixture(files);
    assert!(
        problems.len() == 1 && problems[0].contains(needle),
        "expected one problem naming {needle:?}, got {problems:?}"
    );
}

#[test]
fn fixture_clean_tree_passes() {
    let problems = fixture(&[
        (
            "api/client.rs",
            "use crate::hold::lock::Lock;\nuse crate::{error::Error, config::url};\n",
        ),
        (
            "hold/lock.rs",
            "use crate::{member::{node::Node, voter}, error};\n",
        ),
        // Comments, doc links and strings name nothing.
        (
            "config/url.rs",
            "// use crate::api::client::Redlock;\n/// [`Redlock`](crate::Redlock)\nconst S: &str = \"crate::api::client\";\nconst R: &str = r#\"use crate::hold\"#;\nfn f<'a>(x: &'a str) -> char { let _ = x; '{' }\nuse crate::error::Error;\n",
        ),
        // Only the #[cfg(test)] item is cut out: its body, whatever it names.
        (
            "config/retry.rs",
            "use crate::error::Error;\n#[cfg(test)]\nmod tests {\n    use crate::api::client::Redlock;\n}\n",
        ),
        (
            "config/group.rs",
            "#[cfg(test)]\nuse crate::{api::client::Redlock, hold};\nuse crate::error;\n",
        ),
        (
            "error.rs",
            "mod node_failure;\npub use node_failure::NodeFailure;\n",
        ),
        ("error/node_failure.rs", "use super::Error;\n"),
    ]);
    assert!(problems.is_empty(), "{problems:?}");
}

#[test]
fn fixture_plain_import_up_a_layer_fails() {
    one_problem(
        &[("config/url.rs", "use crate::hold::lock::Lock;\n")],
        "hold::lock",
    );
}

#[test]
fn fixture_grouped_import_up_a_layer_fails() {
    one_problem(
        &[(
            "protocol/wire.rs",
            "use crate::{error::Error, member::node::Node};\n",
        )],
        "member::node",
    );
}

#[test]
fn fixture_nested_use_tree_up_a_layer_fails() {
    one_problem(
        &[(
            "config/url.rs",
            "use crate::{error, hold::{lease::{Lease, self}}};\n",
        )],
        "hold::lease",
    )
}

#[test]
fn fixture_path_in_code_up_a_layer_fails() {
    one_problem(
        &[(
            "kind.rs",
            "fn f() -> usize { crate::protocol::quorum::majority(3) }\n",
        )],
        "protocol::quorum",
    );
}

#[test]
fn fixture_reexported_name_up_a_layer_fails() {
    one_problem(
        &[("member/node.rs", "fn f(_: &crate::Redlock) {}\n")],
        "api::client",
    );
}

#[test]
fn fixture_super_path_up_a_layer_fails() {
    one_problem(
        &[("config/url.rs", "use super::super::hold::lock::Lock;\n")],
        "hold::lock",
    );
}

#[test]
fn fixture_code_after_a_test_module_is_checked() {
    one_problem(
        &[(
            "config/url.rs",
            "use crate::error::Error;\n#[cfg(test)]\nmod tests;\n\nfn late() { let _ = crate::api::client::Redlock::builder(); }\n",
        )],
        "api::client",
    );
    one_problem(
        &[(
            "config/url.rs",
            "#[cfg(test)]\nmod tests {\n    use super::*;\n}\n\n#[cfg(test)]\nfn helper() {}\n\nuse crate::{api::owner};\n",
        )],
        "api::owner",
    );
}

#[test]
fn fixture_cycle_fails() {
    let problems = fixture(&[
        ("kind.rs", "use crate::value::LockValue;\n"),
        ("value.rs", "use crate::{kind::LockKind};\n"),
    ]);
    assert!(
        !problems.is_empty() && problems.iter().all(|p| p.starts_with("cycle:")),
        "{problems:?}"
    );
    let problems = fixture(&[
        ("hold/lock.rs", "use crate::hold::lease::Lease;\n"),
        ("hold/lease.rs", "use crate::hold::held;\n"),
        ("hold/held.rs", "use super::lock::Lock;\n"),
    ]);
    assert!(
        problems.iter().any(|p| p.starts_with("cycle:")),
        "a cycle through three modules of one layer: {problems:?}"
    );
}
