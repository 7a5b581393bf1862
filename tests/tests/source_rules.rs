//! Rules about the source itself that CI checks: library crates never
//! print (their diagnostics are `tracing` events; only the binaries'
//! `main.rs` and the LoadGen node's command-line modules write to the
//! terminal), and no test skips except through the helper that fails
//! under CI.

use std::path::{Path, PathBuf};

use netdiv_tests::workspace_root;

/// The library sources: every `.rs` under each library crate's `src/`,
/// except the binaries' entry points and `loadgen-node`'s CLI.
fn library_sources() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("readable source folder") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let root = workspace_root();
    let mut files = Vec::new();
    for krate in ["proto", "qdl", "sut-node", "loadgen-node"] {
        walk(&root.join(krate).join("src"), &mut files);
    }
    let binary = |p: &Path| {
        p.ends_with("src/main.rs")
            || p.starts_with(root.join("loadgen-node/src/cli"))
            || p.components().any(|c| c.as_os_str() == "bin")
    };
    files.retain(|p| !binary(p));
    files
}

/// Lines of `text` that print, outside comments.
fn printing_lines(text: &str) -> Vec<(usize, String)> {
    const PRINTS: [&str; 5] = ["println!", "eprintln!", "print!(", "eprint!(", "dbg!("];
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .filter(|(_, line)| PRINTS.iter().any(|p| line.contains(p)))
        .map(|(n, line)| (n + 1, line.trim().to_string()))
        .collect()
}

#[test]
fn library_crates_do_not_print() {
    let files = library_sources();
    assert!(
        files.len() > 50,
        "found only {} library sources: is the workspace layout what this test expects?",
        files.len()
    );
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("readable source");
        for (line, code) in printing_lines(&text) {
            found.push(format!("{}:{line}: {code}", file.display()));
        }
    }
    assert!(
        found.is_empty(),
        "library crates print (use tracing):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_print_finder_finds_prints() {
    let text = "let a = 1;\n    eprintln!(\"x\");\n// println!(\"in a comment\")\nprint!(\"y\");\n";
    let lines: Vec<usize> = printing_lines(text).into_iter().map(|(n, _)| n).collect();
    assert_eq!(lines, vec![2, 4]);
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Test code, with its file: the tests package whole, each crate's
/// integration tests, and in library sources what follows `#[cfg(test)]`
/// (line numbers kept).
fn test_code() -> Vec<(PathBuf, String)> {
    let root = workspace_root();
    let mut whole = Vec::new();
    rust_files(&root.join("tests"), &mut whole);
    for krate in ["proto", "qdl", "sut-node", "loadgen-node"] {
        rust_files(&root.join(krate).join("tests"), &mut whole);
    }
    let mut code: Vec<(PathBuf, String)> = whole
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("readable source");
            (p, text)
        })
        .collect();
    let mut sources = Vec::new();
    for krate in ["proto", "qdl", "sut-node", "loadgen-node"] {
        rust_files(&root.join(krate).join("src"), &mut sources);
    }
    for path in sources {
        let text = std::fs::read_to_string(&path).expect("readable source");
        if let Some(at) = text.find("#[cfg(test)]") {
            let blanked: String = text[..at].chars().filter(|&c| c == '\n').collect();
            code.push((path, blanked + &text[at..]));
        }
    }
    code
}

/// What a test may not test before skipping without [`skip_unless_ci`]:
/// the machine (its environment, user, files, tools).
const MACHINE_PROBES: [&str; 6] = [
    "var_os(",
    "env::var(",
    "geteuid",
    "available()",
    ".exists()",
    "is_file()",
];

/// Lines of test code that skip silently: a print that says it skips, or
/// a `return` from an `if` that probes the machine with no
/// `skip_unless_ci` in that block (so CI would pass a test it never ran).
fn silent_skips(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let prints = ["println!", "eprintln!"].iter().any(|p| code.contains(p));
        if prints && code.to_lowercase().contains("skip") {
            found.push((n + 1, code.to_string()));
        }
        let probes = MACHINE_PROBES.iter().any(|p| code.contains(p));
        if code.starts_with("if ") && probes && code.ends_with('{') {
            let indent = line.len() - code.len();
            let close = " ".repeat(indent) + "}";
            let block: Vec<&str> = lines[n + 1..]
                .iter()
                .take_while(|l| !l.starts_with(&close))
                .copied()
                .collect();
            let returns = block.iter().any(|l| l.trim_start().starts_with("return"));
            let helped = block.iter().any(|l| l.contains("skip_unless_ci"));
            if returns && !helped {
                found.push((n + 1, code.to_string()));
            }
        }
    }
    found
}

/// Under CI no test passes without running: every skip goes through
/// `netdiv_tests::skip_unless_ci`, which fails there.
#[test]
fn every_skip_goes_through_the_helper_that_fails_under_ci() {
    let code = test_code();
    assert!(code.len() > 40, "found only {} test files", code.len());
    let helper = workspace_root().join("tests/src/prerequisites.rs");
    let this = workspace_root().join("tests/tests/source_rules.rs");
    let mut found = Vec::new();
    for (file, text) in &code {
        if *file == helper || *file == this {
            continue;
        }
        for (line, code) in silent_skips(text) {
            found.push(format!("{}:{line}: {code}", file.display()));
        }
    }
    assert!(
        found.is_empty(),
        "tests that skip without skip_unless_ci (CI would pass them unrun):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_skip_finder_finds_silent_skips() {
    let text = r#"
fn a() -> Result<()> {
    if !lab::available() {
        eprintln!("skipped: no lab");
        return Ok(());
    }
    if std::env::var_os("RUST_LOG").is_some() {
        return;
    }
    if !netns::available() {
        return skip_unless_ci("root");
    }
    if !Path::new(DEVICE).exists() {
        skip_unless_ci("the device")?;
        return Ok(None);
    }
    if x.is_empty() {
        return Ok(());
    }
    // eprintln!("skipped in a comment");
}
"#;
    let lines: Vec<usize> = silent_skips(text).into_iter().map(|(n, _)| n).collect();
    assert_eq!(lines, vec![3, 4, 7]);
}
