//! With the `official` feature: for each round of `official/releases`,
//! fetches that round's official MLPerf LoadGen source
//! (official/fetch-source.sh: pinned PyPI sdist, sha256-checked, cached
//! outside the repository) and compiles it, unaltered, with our shim
//! (official/shim.cc) into a shared library that the program embeds and
//! loads for `--round` (two LoadGens cannot be linked into one program:
//! their symbols are the same). `NETDIV_OFFICIAL_ROUNDS=v6.1,v5.1` limits
//! the rounds built. Without the feature it does nothing, so the default
//! build needs no C++ compiler.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    source::archive();
    #[cfg(feature = "official")]
    official::build();
}

/// The QDL's source above the session layer (`qdl/` and `proto/`, and the
/// glue through which the official LoadGen calls it: its
/// `QueryDispatchLibrary` in `official/shim.cc` and `src/sut/official.rs`),
/// as a tar archive with the commit it came from: a submission's tree
/// must hold it (the rules' Network division), and the program writes it
/// there (`OUT_DIR/qdl-source.tar`).
mod source {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    /// What the archive holds, from the workspace's root: folders (their
    /// source files) and single files.
    const ARCHIVED: [&str; 4] = [
        "qdl",
        "proto",
        "loadgen-node/official/shim.cc",
        "loadgen-node/src/sut/official.rs",
    ];

    /// Every file of `dir` (recursively) that is source: `.rs`, `.proto`,
    /// `Cargo.toml`.
    fn files(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs" || e == "proto")
                || path.file_name().is_some_and(|n| n == "Cargo.toml")
            {
                out.push(path);
            }
        }
    }

    /// One ustar entry: a 512-byte header, the data, padding to 512.
    fn entry(tar: &mut Vec<u8>, name: &str, data: &[u8]) {
        let mut header = [0u8; 512];
        let (prefix, name) = if name.len() > 100 {
            name.rsplit_once('/').expect("a long name has folders")
        } else {
            ("", name)
        };
        header[..name.len()].copy_from_slice(name.as_bytes());
        header[100..108].copy_from_slice(b"0000644\0");
        header[108..116].copy_from_slice(b"0000000\0");
        header[116..124].copy_from_slice(b"0000000\0");
        header[124..136].copy_from_slice(format!("{:011o}\0", data.len()).as_bytes());
        header[136..148].copy_from_slice(b"00000000000\0");
        header[156] = b'0';
        header[257..263].copy_from_slice(b"ustar\0");
        header[263..265].copy_from_slice(b"00");
        header[345..345 + prefix.len()].copy_from_slice(prefix.as_bytes());
        header[148..156].copy_from_slice(b"        ");
        let sum: u32 = header.iter().map(|&b| u32::from(b)).sum();
        header[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        tar.extend_from_slice(&header);
        tar.extend_from_slice(data);
        tar.resize(tar.len().div_ceil(512) * 512, 0);
    }

    /// The commit the sources came from, and whether they differ from it.
    fn commit(workspace: &Path) -> String {
        let git = |args: &[&str]| {
            Command::new("git")
                .arg("-C")
                .arg(workspace)
                .args(args)
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        };
        match git(&["rev-parse", "HEAD"]) {
            Some(head) => {
                let mut status = vec!["status", "--porcelain", "--"];
                status.extend(ARCHIVED);
                let dirty = git(&status).is_some_and(|s| !s.is_empty());
                if dirty {
                    format!("{head} with uncommitted changes to {}", ARCHIVED.join(", "))
                } else {
                    head
                }
            }
            None => "unknown (not built from a git checkout)".into(),
        }
    }

    pub(super) fn archive() {
        let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
        let workspace = manifest.parent().expect("the crate is in the workspace");
        let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
        let mut sources = Vec::new();
        for part in ARCHIVED {
            let path = workspace.join(part);
            println!("cargo:rerun-if-changed={}", path.display());
            if path.is_dir() {
                files(&path, &mut sources);
            } else {
                sources.push(path);
            }
        }
        for git in [".git/HEAD", ".git/refs/heads", ".git/packed-refs"] {
            if workspace.join(git).exists() {
                println!("cargo:rerun-if-changed={}", workspace.join(git).display());
            }
        }
        sources.sort();
        let mut tar = Vec::new();
        let about = format!(
            "The QDL's source above the session layer: netdiv's qdl/ (the Query Dispatch \
             Library), proto/ (the session-layer API, netdiv/v1/sut_node.proto) and the glue \
             the official LoadGen calls it through (loadgen-node/official/shim.cc, its \
             QueryDispatchLibrary; loadgen-node/src/sut/official.rs), as built into this \
             loadgen-node {}.\nCommit: {}\nRepository: {}\n",
            std::env::var("CARGO_PKG_VERSION").unwrap_or_default(),
            commit(workspace),
            std::env::var("CARGO_PKG_REPOSITORY").unwrap_or_default()
        );
        entry(&mut tar, "netdiv-qdl-source/SOURCE.txt", about.as_bytes());
        for path in &sources {
            let relative = path.strip_prefix(workspace).expect("under the workspace");
            let data = std::fs::read(path).expect("a source file is readable");
            entry(
                &mut tar,
                &format!("netdiv-qdl-source/{}", relative.display()),
                &data,
            );
        }
        tar.extend_from_slice(&[0u8; 1024]);
        std::fs::write(out.join("qdl-source.tar"), tar).expect("OUT_DIR is writable");
    }
}

#[cfg(feature = "official")]
mod official {
    use std::fmt::Write as _;
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command};

    /// The official library's sources, as its own build lists them.
    const OFFICIAL_SOURCES: &[&str] = &[
        "early_stopping.cc",
        "issue_query_controller.cc",
        "loadgen.cc",
        "logging.cc",
        "test_settings_internal.cc",
        "utils.cc",
        "results.cc",
        "version.cc",
        "generated/version_generated.cc",
    ];

    const FLAGS: &[&str] = &["-std=c++17", "-O2", "-fPIC", "-shared", "-pthread", "-w"];

    /// One round's release: `v6.1 6.0.17 <sha256>`.
    struct Release {
        round: String,
        version: String,
    }

    pub(super) fn build() {
        let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
        let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
        let script = manifest.join("official/fetch-source.sh");
        let shim = manifest.join("official/shim.cc");
        let releases_file = manifest.join("official/releases");
        for path in [&script, &shim, &releases_file] {
            println!("cargo:rerun-if-changed={}", path.display());
        }
        println!("cargo:rerun-if-env-changed=NETDIV_OFFICIAL_CACHE");
        println!("cargo:rerun-if-env-changed=NETDIV_OFFICIAL_ROUNDS");
        let releases = wanted(read_releases(&releases_file));
        let shim_text = std::fs::read(&shim).expect("official/shim.cc is readable");
        let compiler = cc::Build::new().cpp(true).get_compiler();
        let key = fnv1a(&[&shim_text, FLAGS.join(" ").as_bytes()]);

        // Each round's library, cached beside its source (the cache key
        // is the shim and the flags), compiled two at a time at most.
        let jobs: usize = std::env::var("NUM_JOBS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(2)
            .max(1);
        let mut libraries = Vec::new();
        let mut running: Vec<(Child, PathBuf, PathBuf)> = Vec::new();
        for release in &releases {
            let source = fetch(&script, &release.round);
            let library = source
                .parent()
                .expect("the source sits in a versioned cache folder")
                .join(format!("libnetdiv_official-{key:016x}.so"));
            libraries.push((release, library.clone()));
            if library.is_file() {
                continue;
            }
            if running.len() >= jobs {
                let (child, partial, done) = running.remove(0);
                finish(child, &partial, &done);
            }
            let partial = library.with_extension(format!("so.{}", std::process::id()));
            let mut command = Command::new(compiler.path());
            command
                .args(FLAGS)
                .arg("-I")
                .arg(&source)
                .arg(&shim)
                .args(OFFICIAL_SOURCES.iter().map(|f| source.join(f)))
                .arg("-o")
                .arg(&partial);
            let child = command
                .spawn()
                .unwrap_or_else(|e| panic!("cannot run {}: {e}", compiler.path().display()));
            running.push((child, partial, library));
        }
        for (child, partial, done) in running {
            finish(child, &partial, &done);
        }

        let mut table = String::from(
            "/// (round, LoadGen version, shared library) of each round this build compiled.\n\
             pub(crate) static EMBEDDED: &[(&str, &str, &[u8])] = &[\n",
        );
        for (release, library) in &libraries {
            println!("cargo:rerun-if-changed={}", library.display());
            let _ = writeln!(
                table,
                "    ({:?}, {:?}, include_bytes!({:?})),",
                release.round, release.version, library
            );
        }
        table.push_str("];\n");
        std::fs::write(out.join("official_libraries.rs"), table).expect("OUT_DIR is writable");
    }

    fn read_releases(path: &Path) -> Vec<Release> {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let fields: Vec<&str> = l.split_whitespace().collect();
                (fields.len() >= 3).then(|| Release {
                    round: fields[0].into(),
                    version: fields[1].into(),
                })
            })
            .collect()
    }

    /// The releases `NETDIV_OFFICIAL_ROUNDS` names, or all.
    fn wanted(all: Vec<Release>) -> Vec<Release> {
        let Ok(list) = std::env::var("NETDIV_OFFICIAL_ROUNDS") else {
            return all;
        };
        let names: Vec<&str> = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        for name in &names {
            if !all.iter().any(|r| r.round == *name) {
                panic!(
                    "NETDIV_OFFICIAL_ROUNDS names {name:?}, which official/releases does not have"
                );
            }
        }
        all.into_iter()
            .filter(|r| names.contains(&r.round.as_str()))
            .collect()
    }

    /// The unpacked, verified source of `round`.
    fn fetch(script: &Path, round: &str) -> PathBuf {
        let output = Command::new("bash")
            .arg(script)
            .arg(round)
            .output()
            .unwrap_or_else(|e| panic!("cannot run bash {}: {e}", script.display()));
        if !output.status.success() {
            panic!(
                "{} {round} failed:\n{}",
                script.display(),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        PathBuf::from(
            stdout
                .lines()
                .last()
                .expect("fetch-source.sh prints the source directory")
                .trim(),
        )
    }

    /// Waits for a compile and moves its library into place.
    fn finish(mut child: Child, partial: &Path, done: &Path) {
        let status = child.wait().expect("the compiler runs");
        if !status.success() {
            panic!(
                "compiling the official LoadGen into {} failed",
                done.display()
            );
        }
        std::fs::rename(partial, done)
            .unwrap_or_else(|e| panic!("cannot move {} into place: {e}", partial.display()));
    }

    /// FNV-1a over the parts: a cache key, not a checksum.
    fn fnv1a(parts: &[&[u8]]) -> u64 {
        let mut hash = 0xcbf2_9ce4_8422_2325u64;
        for byte in parts.iter().flat_map(|p| p.iter()) {
            hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
        hash
    }
}
