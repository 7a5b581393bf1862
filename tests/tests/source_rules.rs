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
/// a `return` out of a branch taken on a probe of the machine with no
/// `skip_unless_ci` in that branch (so CI would pass a test it never
/// ran). Branches are read from the syntax tree: an `if` whose condition
/// spans lines, and a `let ... else` whose value probes the machine.
fn silent_skips(text: &str) -> Vec<(usize, String)> {
    let mut found: Vec<(usize, String)> = text
        .lines()
        .enumerate()
        .filter(|(_, line)| {
            let code = line.trim_start();
            !code.starts_with("//")
                && ["println!", "eprintln!"].iter().any(|p| code.contains(p))
                && code.to_lowercase().contains("skip")
        })
        .map(|(n, line)| (n + 1, line.trim().to_string()))
        .collect();
    let file = syn::parse_file(text).unwrap_or_else(|e| {
        panic!("the skip rule cannot read this test code as Rust ({e}):\n{text}")
    });
    let mut finder = SkipFinder { found: Vec::new() };
    syn::visit::visit_file(&mut finder, &file);
    found.extend(finder.found);
    found.sort();
    found.dedup();
    found
}

/// Tokens with the spaces `quote` puts between them taken out, so the
/// probes match however the code was laid out.
fn squeezed(tokens: impl quote::ToTokens) -> String {
    tokens
        .to_token_stream()
        .to_string()
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect()
}

fn probes_the_machine(tokens: impl quote::ToTokens) -> bool {
    let code = squeezed(tokens);
    MACHINE_PROBES.iter().any(|p| code.contains(p))
}

/// Whether a branch leaves the test without the helper: it holds a
/// `return` and no `skip_unless_ci`.
fn leaves_silently(block: &syn::Block) -> bool {
    struct Returns(bool);
    impl<'ast> syn::visit::Visit<'ast> for Returns {
        fn visit_expr_return(&mut self, _: &'ast syn::ExprReturn) {
            self.0 = true;
        }
        // A closure's return is not the test's.
        fn visit_expr_closure(&mut self, _: &'ast syn::ExprClosure) {}
    }
    let mut returns = Returns(false);
    syn::visit::Visit::visit_block(&mut returns, block);
    returns.0 && !squeezed(block).contains("skip_unless_ci")
}

struct SkipFinder {
    found: Vec<(usize, String)>,
}

impl<'ast> syn::visit::Visit<'ast> for SkipFinder {
    fn visit_expr_if(&mut self, node: &'ast syn::ExprIf) {
        if probes_the_machine(&node.cond) && leaves_silently(&node.then_branch) {
            let line = node.if_token.span.start().line;
            self.found.push((
                line,
                format!("if {} {{ return ... }}", squeezed(&node.cond)),
            ));
        }
        syn::visit::visit_expr_if(self, node);
    }

    fn visit_local(&mut self, node: &'ast syn::Local) {
        if let Some(init) = &node.init {
            if let Some((_, diverge)) = &init.diverge {
                let silent = match diverge.as_ref() {
                    syn::Expr::Block(b) => leaves_silently(&b.block),
                    other => {
                        squeezed(other).starts_with("return")
                            && !squeezed(other).contains("skip_unless_ci")
                    }
                };
                if probes_the_machine(&init.expr) && silent {
                    let line = node.let_token.span.start().line;
                    self.found.push((
                        line,
                        format!("let ... = {} else {{ return ... }}", squeezed(&init.expr)),
                    ));
                }
            }
        }
        syn::visit::visit_local(self, node);
    }

    // A closure's `return` leaves the closure, not the test.
    fn visit_expr_closure(&mut self, _: &'ast syn::ExprClosure) {}
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
    if std::env::var("NETDIV_X")
        .is_err()
    {
        return Ok(());
    }
    let Some(dir) = std::env::var_os("NETDIV_DIR") else {
        return Ok(());
    };
    let Some(dir) = std::env::var_os("NETDIV_DIR") else {
        return skip_unless_ci("a dir");
    };
    let run = |p: &Path| {
        if !p.exists() {
            return 1;
        }
        0
    };
}
"#;
    let lines: Vec<usize> = silent_skips(text).into_iter().map(|(n, _)| n).collect();
    assert_eq!(lines, vec![3, 4, 7, 21, 26]);
}

/// `file.rs::test` references in backticks (`file` bare or a path; `test`
/// may hold `*`), with the line they are on.
fn test_references(text: &str) -> Vec<(usize, String, String)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for (i, span) in line.split('`').enumerate() {
            if i % 2 == 0 {
                continue; // outside backticks
            }
            let Some((file, name)) = span.split_once(".rs::") else {
                continue;
            };
            let name: String = name
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '*')
                .collect();
            if !file.contains(' ') && !name.is_empty() {
                found.push((n + 1, format!("{file}.rs"), name));
            }
        }
    }
    found
}

/// Whether `name` (with `*` for any run of characters) matches `text`.
fn glob_matches(name: &str, text: &str) -> bool {
    let parts: Vec<&str> = name.split('*').collect();
    if parts.len() == 1 {
        return name == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || !text.ends_with(last) || text.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// The function names defined in a Rust source.
fn function_names(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l.strip_prefix("pub ").unwrap_or(l);
            let l = l.strip_prefix("async ").unwrap_or(l);
            l.strip_prefix("fn ")
        })
        .map(|rest| {
            rest.chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()
        })
        .collect()
}

/// Every `file.rs::test` the docs and the README cite names a test that
/// exists, so a rename cannot leave a rule "shown by" nothing.
#[test]
fn every_test_the_docs_cite_exists() {
    let root = workspace_root();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.push(root.join("README.md"));
    let mut all_sources = Vec::new();
    for dir in ["proto", "qdl", "sut-node", "loadgen-node", "tests"] {
        rust_files(&root.join(dir), &mut all_sources);
    }
    let (mut cited, mut missing) = (0, Vec::new());
    for doc in &docs {
        let text = std::fs::read_to_string(doc).expect("readable doc");
        for (line, file, name) in test_references(&text) {
            cited += 1;
            let path = if file.contains('/') {
                Some(root.join(&file))
            } else if root.join("tests/tests").join(&file).is_file() {
                Some(root.join("tests/tests").join(&file))
            } else {
                let named: Vec<&PathBuf> = all_sources
                    .iter()
                    .filter(|p| p.file_name().is_some_and(|n| n == file.as_str()))
                    .collect();
                (named.len() == 1).then(|| named[0].clone())
            };
            let exists = path
                .and_then(|p| std::fs::read_to_string(p).ok())
                .is_some_and(|src| function_names(&src).iter().any(|f| glob_matches(&name, f)));
            if !exists {
                missing.push(format!("{}:{line}: {file}::{name}", doc.display()));
            }
        }
    }
    assert!(cited > 40, "only {cited} test references found in the docs");
    assert!(
        missing.is_empty(),
        "the docs cite tests that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn test_references_and_globs_are_read_as_written() {
    let refs = test_references("see `network.rs::*_all_scenarios` and `a/b.rs::x_y` (`c.rs`)");
    assert_eq!(
        refs,
        vec![
            (1, "network.rs".to_string(), "*_all_scenarios".to_string()),
            (1, "a/b.rs".to_string(), "x_y".to_string())
        ]
    );
    assert!(glob_matches(
        "*_all_scenarios",
        "grpc_two_nodes_all_scenarios"
    ));
    assert!(!glob_matches("*_all_scenarios", "grpc_two_nodes"));
    assert!(glob_matches("a*c*e", "abcde"));
    assert!(!glob_matches("exact", "exactly"));
}

/// The top-level folders of this repository: a backticked span in the
/// docs that starts with one of them names a path of ours.
const REPO_FOLDERS: [&str; 9] = [
    "loadgen-node/",
    "sut-node/",
    "qdl/",
    "proto/",
    "deploy/",
    "docs/",
    "tests/",
    ".ci/",
    ".config/",
];

/// The repository paths a doc names in backticks, with their lines
/// (`file.rs::test` names the file; placeholders such as `NAME`, `<x>`,
/// `*` or `$VAR` are not paths).
fn repo_paths(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for (i, span) in line.split('`').enumerate() {
            if i % 2 == 0 || span.contains(' ') {
                continue;
            }
            let path = span.split("::").next().unwrap_or(span);
            let path = path.strip_prefix("./").unwrap_or(path);
            // `file.rs:181` names a line of the file.
            let path = match path.rsplit_once(':') {
                Some((file, line)) if line.chars().all(|c| c.is_ascii_digit()) => file,
                _ => path,
            };
            let placeholder = path.contains(['<', '{', '*', '$'])
                || path.split('/').any(|part| {
                    part.len() > 1 && part.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                });
            if REPO_FOLDERS.iter().any(|f| path.starts_with(f)) && !placeholder {
                found.push((n + 1, path.trim_end_matches([':', ',', '.']).to_string()));
            }
        }
    }
    found
}

/// Every repository path docs/*.md and the README name exists.
#[test]
fn every_path_the_docs_name_exists() {
    let root = workspace_root();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.push(root.join("README.md"));
    let (mut named, mut missing) = (0, Vec::new());
    for doc in &docs {
        let text = std::fs::read_to_string(doc).expect("readable doc");
        for (line, path) in repo_paths(&text) {
            named += 1;
            if !root.join(&path).exists() {
                missing.push(format!("{}:{line}: {path}", doc.display()));
            }
        }
    }
    assert!(
        named > 80,
        "only {named} repository paths found in the docs"
    );
    assert!(
        missing.is_empty(),
        "the docs name paths that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn doc_paths_are_read_as_written() {
    let text = "see `loadgen-node/src/cli/run/mod.rs`, `network.rs::x`, \
                `tests/fuzz-regressions/TARGET/`, `docs/qdl.md::y` and `/etc/netdiv/`";
    let paths: Vec<String> = repo_paths(text).into_iter().map(|(_, p)| p).collect();
    assert_eq!(paths, ["loadgen-node/src/cli/run/mod.rs", "docs/qdl.md"]);
}

/// Functions of the engine that mirror the official LoadGen's C++ one for
/// one (reading them side by side is worth their length).
const MIRRORS_OF_THE_OFFICIAL_LOADGEN: [&str; 5] = [
    "loadgen-node/src/engine/settings/config.rs::apply_config",
    "loadgen-node/src/engine/logs/summary.rs::render",
    "loadgen-node/src/engine/generate.rs::generate_queries",
    "loadgen-node/src/engine/settings/effective.rs::new",
    "loadgen-node/src/engine/start_test/peak.rs::find_peak_performance",
];

/// The longest a function outside tests may be.
const MAX_FUNCTION_LINES: usize = 100;

/// `(first line, name, lines)` of each function of `text` outside its
/// `#[cfg(test)]` part: from its `fn` line to the closing brace at the
/// same indentation.
fn function_lengths(text: &str) -> Vec<(usize, String, usize)> {
    let code = text.split("#[cfg(test)]").next().unwrap_or(text);
    let lines: Vec<&str> = code.lines().collect();
    let mut found = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let mut rest = trimmed;
        for prefix in [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "const ",
            "async ",
            "unsafe ",
            "extern \"C\" ",
        ] {
            rest = rest.strip_prefix(prefix).unwrap_or(rest);
        }
        let Some(signature) = rest.strip_prefix("fn ") else {
            continue;
        };
        if indent > 8 || line.trim_end().ends_with(';') {
            continue;
        }
        let name: String = signature
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let close = " ".repeat(indent) + "}";
        if let Some(end) = lines[n..].iter().position(|l| l.trim_end() == close) {
            found.push((n + 1, name, end + 1));
        }
    }
    found
}

/// No function outside tests passes MAX_FUNCTION_LINES, but the listed
/// mirrors of the official LoadGen.
#[test]
fn no_function_is_longer_than_the_bound() {
    let root = workspace_root();
    let mut sources = Vec::new();
    for krate in ["proto", "qdl", "sut-node", "loadgen-node"] {
        rust_files(&root.join(krate).join("src"), &mut sources);
    }
    let mut long = Vec::new();
    for file in &sources {
        let text = std::fs::read_to_string(file).expect("readable source");
        let relative = file.strip_prefix(root).expect("in the workspace");
        for (line, name, lines) in function_lengths(&text) {
            let id = format!("{}::{name}", relative.display());
            if lines > MAX_FUNCTION_LINES && !MIRRORS_OF_THE_OFFICIAL_LOADGEN.contains(&id.as_str())
            {
                long.push(format!(
                    "{}:{line}: {name} ({lines} lines)",
                    relative.display()
                ));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines (split them):\n{}",
        long.join("\n")
    );
}

#[test]
fn function_lengths_are_counted_from_fn_to_its_brace() {
    let text = "fn a() {\n    x;\n}\n\nimpl B {\n    pub fn c(&self) {\n        y;\n        z;\n    }\n}\n#[cfg(test)]\nfn d() {\n}\n";
    assert_eq!(
        function_lengths(text),
        vec![(1, "a".to_string(), 3), (6, "c".to_string(), 4)]
    );
}

/// Every module map of docs/architecture.md: each code block whose first
/// line is a folder (`qdl/src/`), with its entries as paths under that
/// folder. An entry is a name at an indent of two spaces per level
/// (descriptions continue further right), a folder when it ends in `/`.
fn module_maps(doc: &str) -> Vec<(String, Vec<String>)> {
    let mut maps = Vec::new();
    let mut rest = doc;
    while let Some(start) = rest.find("```\n") {
        let block = &rest[start + 4..];
        let end = block.find("```").unwrap_or(block.len());
        let (body, after) = (&block[..end], &block[(end + 3).min(block.len())..]);
        rest = after;
        let mut lines = body.lines();
        let Some(root) = lines.next() else { continue };
        if !root.ends_with('/') || root.contains(' ') {
            continue;
        }
        let mut folders: Vec<String> = Vec::new();
        let mut entries = Vec::new();
        for line in lines {
            let indent = line.len() - line.trim_start().len();
            let Some(name) = line.split_whitespace().next() else {
                continue;
            };
            if indent == 0 || indent >= 20 || indent % 2 != 0 {
                continue;
            }
            folders.truncate(indent / 2 - 1);
            let path = format!("{}{name}", folders.concat());
            if name.ends_with('/') {
                folders.push(name.to_string());
            }
            entries.push(path);
        }
        maps.push((root.to_string(), entries));
    }
    maps
}

/// What `entries`, a map of the folder `root`, leaves out or names
/// wrongly: entries that do not exist, folders of Rust sources it does
/// not name, and, where it lists a folder's files one by one, the files
/// it skips (`mod.rs` aside).
fn map_differences(root: &Path, entries: &[String]) -> Vec<String> {
    let mut wrong: Vec<String> = entries
        .iter()
        .filter(|e| !root.join(e).exists())
        .map(|e| format!("{e} (does not exist)"))
        .collect();
    let mut files = Vec::new();
    rust_files(root, &mut files);
    for file in &files {
        let relative = file
            .strip_prefix(root)
            .expect("under the root")
            .to_string_lossy()
            .to_string();
        let (folder, name) = match relative.rfind('/') {
            Some(i) => (relative[..=i].to_string(), &relative[i + 1..]),
            None => (String::new(), relative.as_str()),
        };
        // Every folder on the way must be named.
        let mut at = 0;
        while let Some(i) = folder[at..].find('/') {
            let parent = &folder[..at + i + 1];
            if !entries.iter().any(|e| e == parent) {
                wrong.push(format!("{parent} (not in the map)"));
            }
            at += i + 1;
        }
        let folder_lists_files = entries.iter().any(|e| {
            e.starts_with(&folder) && e.ends_with(".rs") && !e[folder.len()..].contains('/')
        });
        if folder_lists_files && name != "mod.rs" && !entries.contains(&relative) {
            wrong.push(format!("{relative} (not in the map)"));
        }
    }
    wrong.sort();
    wrong.dedup();
    wrong
}

/// docs/architecture.md maps every crate's sources and the test crate,
/// and each map matches the tree: every entry exists, every folder of
/// Rust sources is in it, and where it lists a folder's files one by one
/// it lists them all.
#[test]
fn the_architecture_docs_module_maps_match_the_tree() {
    let root = workspace_root();
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).expect("architecture.md");
    let maps = module_maps(&doc);
    let mapped: Vec<&str> = maps.iter().map(|(r, _)| r.as_str()).collect();
    for folder in [
        "proto/src/",
        "qdl/src/",
        "sut-node/src/",
        "loadgen-node/src/",
        "tests/",
    ] {
        assert!(
            mapped.contains(&folder),
            "docs/architecture.md has no map of {folder} (maps: {mapped:?})"
        );
    }
    for (folder, entries) in &maps {
        assert!(entries.len() > 5, "the map of {folder} is nearly empty");
        let wrong = map_differences(&root.join(folder), entries);
        assert!(
            wrong.is_empty(),
            "docs/architecture.md's map of {folder}: {wrong:?}"
        );
    }
}

#[test]
fn the_module_maps_are_read_as_written() {
    let doc = "x\n```\nloadgen-node/src/\n  lib.rs\n  cli/                    the CLI\n    \
               run/                  run; plan.rs\n                          more.rs words\n    \
               args.rs               flags\n  main.rs\n```\ntext\n```\nnot a map\n```\n\
               ```\nqdl/src/\n  a.rs\n```\n";
    assert_eq!(
        module_maps(doc),
        [
            (
                "loadgen-node/src/".to_string(),
                ["lib.rs", "cli/", "cli/run/", "cli/args.rs", "main.rs"]
                    .map(String::from)
                    .to_vec()
            ),
            ("qdl/src/".to_string(), vec!["a.rs".to_string()]),
        ]
    );
}

#[test]
fn a_map_that_misses_a_file_or_folder_is_found() {
    let dir = tempfile::tempdir().unwrap();
    for file in ["lib.rs", "a.rs", "deep/mod.rs", "deep/b.rs", "deep/er/c.rs"] {
        let path = dir.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "").unwrap();
    }
    let entries = |list: &[&str]| list.iter().map(|e| e.to_string()).collect::<Vec<_>>();
    assert_eq!(
        map_differences(
            dir.path(),
            &entries(&["lib.rs", "a.rs", "deep/", "deep/er/"])
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        map_differences(
            dir.path(),
            &entries(&["lib.rs", "deep/", "deep/b.rs", "gone.rs"])
        ),
        [
            "a.rs (not in the map)",
            "deep/er/ (not in the map)",
            "gone.rs (does not exist)"
        ]
    );
}

/// The normal dependencies of `krate` (with `features`), as `cargo tree`
/// resolves them for that crate alone: one crate name per line.
fn dependency_names(krate: &str, features: &[&str]) -> Vec<String> {
    let mut command = std::process::Command::new(std::env::var("CARGO").unwrap_or("cargo".into()));
    command.current_dir(workspace_root()).args([
        "tree",
        "--offline",
        "-e",
        "normal",
        "--prefix",
        "none",
        "-p",
        krate,
    ]);
    for feature in features {
        command.args(["--features", feature]);
    }
    let out = command.output().expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree -p {krate}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect()
}

/// Speaking the protocol pulls neither the command line nor the logging
/// subscriber: `netdiv-proto` has them only behind its `logging`
/// feature, which the daemons turn on (shown pulling them, so the check
/// can tell).
#[test]
fn the_protocol_crate_pulls_no_cli_or_logging_crates() {
    const CLI_AND_LOGGING: [&str; 3] = ["clap", "tracing-subscriber", "tracing-journald"];
    for krate in ["netdiv-proto", "qdl"] {
        let names = dependency_names(krate, &[]);
        let pulled: Vec<&&str> = CLI_AND_LOGGING
            .iter()
            .filter(|c| names.iter().any(|n| n == *c))
            .collect();
        assert!(pulled.is_empty(), "{krate} pulls {pulled:?}");
    }
    let with = dependency_names("netdiv-proto", &["netdiv-proto/logging"]);
    for c in CLI_AND_LOGGING {
        assert!(
            with.iter().any(|n| n == c),
            "the logging feature lacks {c}: {with:?}"
        );
    }
}
