//! Which source file imports which, read from the code's own `use` items
//! (syntax trees, not line patterns), and the circles among them: two
//! files of one crate that each take something from the other cannot be
//! read, changed or tested one at a time.
//!
//! Each crate root (`lib.rs`, `main.rs`) is followed through its `mod`
//! declarations to the files of its module tree; a `use` path is resolved
//! from the module it is written in (`crate::`, `self::`, `super::`, a
//! child module's name) to the file that defines the name it takes,
//! through re-exports: a module's `pub use` makes it a face for its
//! children, not an importer of them, so a facade `mod.rs` and the
//! children that take its own definitions are no circle. Paths into other
//! crates are left out: Cargo keeps crates acyclic.
//!
//! Run: `cargo nextest run -p netdiv-tests --test import_circles`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module of a crate: its path from the root and the file it lives in
/// (an inline `mod` lives in its parent's file).
#[derive(Debug, Clone, Default)]
struct Module {
    file: PathBuf,
    /// Names its own items define.
    defined: BTreeSet<String>,
    /// Names its `use` items bring in (re-exported or not: its child
    /// modules see both), each with the path it names.
    bindings: BTreeMap<String, Vec<String>>,
}

/// One crate's module tree: module path (`a::b`, `""` for the root) to
/// its module.
#[derive(Debug, Default)]
struct Tree {
    modules: BTreeMap<String, Module>,
}

/// An edge: `from` imports the names `names` from `to`.
pub type Imports = BTreeMap<(PathBuf, PathBuf), BTreeSet<String>>;

fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}::{name}")
    }
}

/// The file of module `name` declared in `file` at module path `parent`
/// (`name.rs` or `name/mod.rs` beside a `mod.rs`, `lib.rs` or `main.rs`;
/// under `stem/` otherwise).
fn child_file(file: &Path, name: &str) -> Option<PathBuf> {
    let dir = file.parent()?;
    let stem = file.file_stem()?.to_str()?;
    let base = if matches!(stem, "mod" | "lib" | "main") {
        dir.to_path_buf()
    } else {
        dir.join(stem)
    };
    [
        base.join(format!("{name}.rs")),
        base.join(name).join("mod.rs"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

/// Reads the module tree under `root` (a crate's `lib.rs` or `main.rs`).
/// A file of a module tree, parsed: its module path, where it is, its
/// syntax.
type Parsed = (String, PathBuf, syn::File);

fn read_tree(root: &Path) -> Result<(Tree, Vec<Parsed>), String> {
    let mut tree = Tree::default();
    let mut parsed = Vec::new();
    let mut pending = vec![(String::new(), root.to_path_buf())];
    while let Some((path, file)) = pending.pop() {
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let syntax = syn::parse_file(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        tree.modules
            .insert(path.clone(), module_of(&file, &syntax.items));
        collect_mods(&syntax.items, &path, &file, &mut tree, &mut pending);
        parsed.push((path, file, syntax));
    }
    Ok((tree, parsed))
}

/// Records the `mod` items of `items` (in module `path` of `file`):
/// inline ones as modules of the same file, others as files to read.
fn collect_mods(
    items: &[syn::Item],
    path: &str,
    file: &Path,
    tree: &mut Tree,
    pending: &mut Vec<(String, PathBuf)>,
) {
    for item in items {
        let syn::Item::Mod(m) = item else { continue };
        let child = join(path, &m.ident.to_string());
        match &m.content {
            Some((_, inner)) => {
                tree.modules.insert(child.clone(), module_of(file, inner));
                collect_mods(inner, &child, file, tree, pending);
            }
            None => {
                if let Some(f) = child_file(file, &m.ident.to_string()) {
                    pending.push((child, f));
                }
            }
        }
    }
}

/// The module whose items are `items`, in `file`: what it defines and
/// the names its `use` items bind.
fn module_of(file: &Path, items: &[syn::Item]) -> Module {
    let mut module = Module {
        file: file.to_path_buf(),
        ..Module::default()
    };
    for item in items {
        let name = match item {
            syn::Item::Const(i) => i.ident.to_string(),
            syn::Item::Enum(i) => i.ident.to_string(),
            syn::Item::Fn(i) => i.sig.ident.to_string(),
            syn::Item::Macro(i) => match &i.ident {
                Some(ident) => ident.to_string(),
                None => continue,
            },
            syn::Item::Static(i) => i.ident.to_string(),
            syn::Item::Struct(i) => i.ident.to_string(),
            syn::Item::Trait(i) => i.ident.to_string(),
            syn::Item::Type(i) => i.ident.to_string(),
            syn::Item::Union(i) => i.ident.to_string(),
            syn::Item::Use(u) => {
                let mut paths = Vec::new();
                flatten(&u.tree, &mut Vec::new(), &mut paths);
                for (alias, path) in paths {
                    module.bindings.insert(alias, path);
                }
                continue;
            }
            _ => continue,
        };
        module.defined.insert(name);
    }
    module
}

/// Every path a `use` tree names, whole (`a::b::{c, d::e}` is `a::b::c`
/// and `a::b::d::e`; a glob names its module).
fn flatten(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(String, Vec<String>)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            let mut whole = prefix.clone();
            // `a::{self, B}` names module `a` itself.
            if name != "self" {
                whole.push(name.clone());
            }
            let seen = whole.last().cloned().unwrap_or_default();
            out.push((seen, whole));
        }
        syn::UseTree::Rename(r) => {
            let mut whole = prefix.clone();
            if r.ident != "self" {
                whole.push(r.ident.to_string());
            }
            out.push((r.rename.to_string(), whole));
        }
        syn::UseTree::Glob(_) => out.push(("*".into(), prefix.clone())),
        syn::UseTree::Group(g) => {
            for item in &g.items {
                flatten(item, prefix, out);
            }
        }
    }
}

/// The module path `segments` names from module `at`, or `None` for a
/// path into another crate or the standard library.
fn absolute(tree: &Tree, at: &str, segments: &[String]) -> Option<Vec<String>> {
    let mut module: Vec<String> = if at.is_empty() {
        Vec::new()
    } else {
        at.split("::").map(str::to_string).collect()
    };
    let mut rest = segments;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            module.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                module.pop()?;
                rest = &rest[1..];
            }
        }
        Some(first) if tree.modules.contains_key(&join(at, first)) => {}
        _ => return None,
    }
    module.extend(rest.iter().cloned());
    Some(module)
}

/// The file that defines what `path` (absolute) names, and the name:
/// the deepest module it reaches, followed through the names that
/// module's `use` items bind; `None` where they lead out of the crate.
fn target(tree: &Tree, path: &[String], hops: usize) -> Option<(PathBuf, String)> {
    let n = (0..=path.len())
        .rev()
        .find(|&n| tree.modules.contains_key(&path[..n].join("::")))?;
    let at = path[..n].join("::");
    let module = &tree.modules[&at];
    let Some(name) = path.get(n) else {
        // A module itself (a glob, or `use a::b` of module b).
        let name = path.last().cloned().unwrap_or_default();
        return Some((module.file.clone(), name));
    };
    if module.defined.contains(name) || hops == 0 {
        return Some((module.file.clone(), name.clone()));
    }
    match module.bindings.get(name) {
        Some(bound) => target(tree, &absolute(tree, &at, bound)?, hops - 1),
        None => Some((module.file.clone(), name.clone())),
    }
}

/// What `items` (module `path`) take from other modules: the private
/// `use` items wherever they are written (function bodies too), and the
/// paths written out in code from `crate::`, `self::` or `super::`
/// (`super::plan::check(x)` imports as much as a `use` does), with inline
/// modules' own. A re-export (`pub use`) is a module's face, not its
/// import: whoever takes the name through it is counted as taking it
/// from its file.
fn uses(items: &[syn::Item], path: &str, out: &mut Vec<(String, Vec<String>)>) {
    struct Finder<'o> {
        path: String,
        out: &'o mut Vec<(String, Vec<String>)>,
    }
    impl<'ast> syn::visit::Visit<'ast> for Finder<'_> {
        fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
            if matches!(u.vis, syn::Visibility::Inherited) {
                let mut paths = Vec::new();
                flatten(&u.tree, &mut Vec::new(), &mut paths);
                for (_, segments) in paths {
                    self.out.push((self.path.clone(), segments));
                }
            }
        }
        fn visit_path(&mut self, p: &'ast syn::Path) {
            let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
            if p.leading_colon.is_none()
                && segments.len() > 1
                && matches!(segments[0].as_str(), "crate" | "self" | "super")
            {
                self.out.push((self.path.clone(), segments));
            }
            syn::visit::visit_path(self, p);
        }
        fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
            if let Some((_, inner)) = &m.content {
                let inner_path = join(&self.path, &m.ident.to_string());
                let outer = std::mem::replace(&mut self.path, inner_path);
                for item in inner {
                    self.visit_item(item);
                }
                self.path = outer;
            }
        }
    }
    let mut finder = Finder {
        path: path.to_string(),
        out,
    };
    for item in items {
        syn::visit::Visit::visit_item(&mut finder, item);
    }
}

/// Which file of the crate rooted at `root` imports what from which
/// other file.
pub fn crate_imports(root: &Path) -> Result<Imports, String> {
    let (tree, parsed) = read_tree(root)?;
    let mut imports = Imports::new();
    for (path, file, syntax) in &parsed {
        let mut found = Vec::new();
        uses(&syntax.items, path, &mut found);
        for (at, segments) in found {
            let Some(whole) = absolute(&tree, &at, &segments) else {
                continue;
            };
            let Some((defined_in, name)) = target(&tree, &whole, 8) else {
                continue;
            };
            if defined_in != *file {
                imports
                    .entry((file.clone(), defined_in))
                    .or_default()
                    .insert(name);
            }
        }
    }
    Ok(imports)
}

/// The circles of `imports`: each set of two or more files that reach one
/// another (strongly connected), each file listed once, in path order.
pub fn circles(imports: &Imports) -> Vec<Vec<PathBuf>> {
    let mut next: BTreeMap<&PathBuf, Vec<&PathBuf>> = BTreeMap::new();
    for (from, to) in imports.keys() {
        next.entry(from).or_default().push(to);
    }
    let reach = |start: &PathBuf| -> BTreeSet<PathBuf> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![start];
        while let Some(file) = stack.pop() {
            for &to in next.get(file).into_iter().flatten() {
                if seen.insert(to.clone()) {
                    stack.push(to);
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&PathBuf, BTreeSet<PathBuf>> =
        next.keys().map(|&f| (f, reach(f))).collect();
    let mut found: BTreeSet<Vec<PathBuf>> = BTreeSet::new();
    for (&file, from_file) in &reached {
        let circle: Vec<PathBuf> = from_file
            .iter()
            .filter(|other| reached.get(other).is_some_and(|r| r.contains(file)))
            .cloned()
            .collect();
        if circle.len() >= 2 {
            found.insert(circle);
        }
    }
    found.into_iter().collect()
}

/// A circle in words: each file, and what it takes from the next ones in
/// the circle.
pub fn describe(circle: &[PathBuf], imports: &Imports, base: &Path) -> String {
    let name = |p: &Path| p.strip_prefix(base).unwrap_or(p).display().to_string();
    let mut lines = Vec::new();
    for ((from, to), names) in imports {
        if circle.contains(from) && circle.contains(to) {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            lines.push(format!(
                "  {} -> {}: {}",
                name(from),
                name(to),
                names.join(", ")
            ));
        }
    }
    lines.join("\n")
}

/// Every crate root of the workspace: libraries, daemons and the test and
/// benchmark programs.
fn crate_roots() -> Vec<PathBuf> {
    let root = netdiv_tests::workspace_root();
    let mut roots: Vec<PathBuf> = [
        "proto/src/lib.rs",
        "qdl/src/lib.rs",
        "sut-node/src/lib.rs",
        "sut-node/src/main.rs",
        "loadgen-node/src/lib.rs",
        "loadgen-node/src/main.rs",
        "tests/src/lib.rs",
    ]
    .iter()
    .map(|p| root.join(p))
    .collect();
    let bins = std::fs::read_dir(root.join("tests/src/bin")).expect("tests/src/bin");
    roots.extend(bins.filter_map(|e| Some(e.ok()?.path())));
    roots
}

#[test]
fn no_two_files_of_a_crate_import_each_other() {
    let base = netdiv_tests::workspace_root();
    let mut report = Vec::new();
    let mut files = 0;
    for root in crate_roots() {
        let imports = crate_imports(&root).unwrap();
        files += imports.len();
        for circle in circles(&imports) {
            report.push(format!(
                "circle of {} files:\n{}",
                circle.len(),
                describe(&circle, &imports, base)
            ));
        }
    }
    assert!(
        files > 100,
        "only {files} imports read: the reader is broken"
    );
    assert!(
        report.is_empty(),
        "import circles (move what both sides need into a module of its own):\n{}",
        report.join("\n")
    );
}

#[test]
fn the_circle_finder_finds_circles_through_every_kind_of_path() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |name: &str, text: &str| {
        let path = src.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "lib.rs",
        "mod a;\nmod b;\nmod c;\nmod d;\nmod e;\nmod f;\nmod g;\nuse a::A;\n",
    );
    // a -> b by crate::, over a group and a rename; b -> a by super::,
    // from a function body.
    write(
        "a.rs",
        "use crate::b::{B, other as _};\nuse crate::e::E;\npub struct A;\n",
    );
    write(
        "b.rs",
        "pub struct B;\npub fn other() {\n    use super::a::A as Renamed;\n}\n",
    );
    // f -> g by a path written out in code, g -> f by a use.
    write("f.rs", "pub fn f() { super::g::g(); }\n");
    write("g.rs", "use crate::f::f;\npub fn g() {}\n");
    // c -> d/mod.rs, d -> c: a circle of a file and a folder module;
    // d's child inner.rs is imported by d and by its own inline tests,
    // which is no circle.
    write("c.rs", "use crate::d::D;\npub struct C;\n");
    write(
        "d/mod.rs",
        "pub mod inner;\nuse inner::X as _;\nuse crate::c::C;\npub struct D;\n",
    );
    write(
        "d/inner.rs",
        "pub struct X;\n#[cfg(test)]\nmod tests { use super::*; }\n",
    );
    // e is a face: it re-exports its child's E, and the child takes e's
    // own Base; a.rs takes E from the child, through the face.
    write(
        "e/mod.rs",
        "mod inner;\npub use inner::E;\npub struct Base;\n",
    );
    write("e/inner.rs", "use super::Base;\npub struct E;\n");
    let imports = crate_imports(&src.join("lib.rs")).unwrap();
    let found = circles(&imports);
    let names: Vec<Vec<String>> = found
        .iter()
        .map(|c| {
            c.iter()
                .map(|p| p.strip_prefix(src).unwrap().display().to_string())
                .collect()
        })
        .collect();
    assert_eq!(
        names,
        vec![
            vec!["a.rs".to_string(), "b.rs".to_string()],
            vec!["c.rs".to_string(), "d/mod.rs".to_string()],
            vec!["f.rs".to_string(), "g.rs".to_string()],
        ],
        "{imports:?}"
    );
    let words = describe(&found[0], &imports, src);
    assert!(words.contains("a.rs -> b.rs: B, other"), "{words}");
    assert!(words.contains("b.rs -> a.rs: A"), "{words}");
    // lib.rs imports a.rs but nothing imports lib.rs: no circle; d
    // imports its child by the child's bare name; what a.rs takes through
    // e's face comes from e's child.
    let edge = |from: &str, to: &str| imports.contains_key(&(src.join(from), src.join(to)));
    assert!(edge("lib.rs", "a.rs"));
    assert!(edge("d/mod.rs", "d/inner.rs"));
    assert!(edge("a.rs", "e/inner.rs") && !edge("a.rs", "e/mod.rs"));
    assert!(edge("e/inner.rs", "e/mod.rs") && !edge("e/mod.rs", "e/inner.rs"));
}
