//! With the `official` feature: fetches the official MLPerf LoadGen source
//! (official/fetch-source.sh: pinned PyPI sdist, sha256-checked, cached
//! outside the repository) and compiles it, unaltered, with our shim
//! (official/shim.cc). Without the feature it does nothing, so the default
//! build needs no C++ compiler.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "official")]
    official::build();
}

#[cfg(feature = "official")]
mod official {
    use std::path::PathBuf;
    use std::process::Command;

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

    pub fn build() {
        let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
        let script = manifest.join("official/fetch-source.sh");
        let shim = manifest.join("official/shim.cc");
        println!("cargo:rerun-if-changed={}", script.display());
        println!("cargo:rerun-if-changed={}", shim.display());
        println!("cargo:rerun-if-env-changed=NETDIV_OFFICIAL_CACHE");
        let output = Command::new("bash")
            .arg(&script)
            .output()
            .unwrap_or_else(|e| panic!("cannot run bash {}: {e}", script.display()));
        if !output.status.success() {
            panic!(
                "{} failed:\n{}",
                script.display(),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        let source = PathBuf::from(
            stdout
                .lines()
                .last()
                .expect("fetch-source.sh prints the source directory")
                .trim(),
        );
        let mut build = cc::Build::new();
        build
            .cpp(true)
            .std("c++17")
            .include(&source)
            .warnings(false)
            .file(&shim);
        for file in OFFICIAL_SOURCES {
            build.file(source.join(file));
        }
        build.compile("netdiv_official_loadgen");
        println!("cargo:rustc-link-lib=pthread");
    }
}
