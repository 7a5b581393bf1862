//! Rules about the source itself that CI checks: library crates never
//! print (their diagnostics are `tracing` events; only the binaries'
//! `main.rs` and the LoadGen node's command-line modules write to the
//! terminal).

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
