//! The library's top-level modules form layers with arrows one way: a module may use only the
//! modules of the layers below it (and the base modules). This test fails on a new upward import,
//! and on a use of a crate-root re-export inside the library (which would hide the real module).
//!
//! Layers, bottom to top (ARCHITECTURE.md draws them):
//! visible → cancellation → protocol → error, timeout → auth → transport → connection → client → config →
//! servers, web
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

use std::{collections::BTreeSet, fs, path::Path};

const LAYERS: &[&[&str]] = &[
    // Server-supplied text made safe to show: uses nothing, used by every layer that shows it.
    &["visible"],
    &["cancellation"],
    &["protocol"],
    // The error type carries protocol types (the URL elicitations a server asks for).
    &["error", "timeout"],
    &["pool"],
    &["auth"],
    &["transport"],
    &["connection"],
    &["client"],
    &["config"],
    &["servers", "web"],
    // The manager's live inspector: a page over `servers`.
    &["inspector"],
    // Only for the fuzz targets (feature `fuzzing`): thin wrappers over the layers below.
    &["fuzzing"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// The source of every file of a top-level module, without comments and unit-test modules.
fn sources(src: &Path, module: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let file = src.join(format!("{module}.rs"));
    let dir = src.join(module);
    let mut paths = Vec::new();
    if file.exists() {
        paths.push(file);
    }
    let mut stack = vec![dir];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                paths.push(path);
            }
        }
    }
    for path in paths {
        let text = fs::read_to_string(&path).expect("readable source");
        // Unit tests may reach anywhere; so may a model test of the whole module.
        let text = match text.find("#[cfg(test)]\nmod tests") {
            Some(at) => &text[..at],
            None => &text[..],
        };
        let code: String = text
            .lines()
            .map(|line| match line.find("//") {
                Some(at) => &line[..at],
                None => line,
            })
            .collect::<Vec<_>>()
            .join("\n");
        out.push((path.display().to_string(), code));
    }
    out
}

/// Every `crate::NAME` the code names, including inside `use crate::{a::.., b, ..}` groups.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level names of the group: split at commas at brace depth 0.
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        names.insert(head(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 {
                    item.push(c);
                }
            }
            names.insert(head(&item));
        } else {
            names.insert(head(rest));
        }
    }
    names.remove("");
    names
}

fn head(path: &str) -> String {
    path.trim()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

#[test]
fn no_module_imports_one_above_it_and_no_root_re_exports_are_used_inside() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut problems = Vec::new();
    let mut seen_modules = 0;
    for entry in fs::read_dir(&src).expect("src").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let module = name.trim_end_matches(".rs").to_owned();
        if matches!(module.as_str(), "lib" | "main" | "bin") {
            continue;
        }
        let Some(layer) = layer_of(&module) else {
            problems.push(format!("module {module} is in no layer: add it to LAYERS"));
            continue;
        };
        seen_modules += 1;
        for (file, code) in sources(&src, &module) {
            for used in crate_paths(&code) {
                if used.starts_with(|c: char| c.is_ascii_uppercase()) {
                    problems.push(format!(
                        "{file}: crate::{used} (name the module it lives in)"
                    ));
                    continue;
                }
                match layer_of(&used) {
                    Some(other) if other > layer => {
                        problems.push(format!("{file}: {module} imports {used}, a layer above"))
                    }
                    Some(_) => {}
                    None => problems.push(format!("{file}: crate::{used} is in no layer")),
                }
            }
        }
    }
    assert!(seen_modules >= 8, "the test found the modules");
    assert!(
        problems.is_empty(),
        "layering broken:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_checker_sees_an_upward_import() {
    let names = crate_paths("use crate::{client::Client, error::{Error, CloseReason}, Cancellation};\nlet x = crate::connection::Link;");
    let expected: BTreeSet<String> = ["client", "error", "Cancellation", "connection"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(names, expected);
}
