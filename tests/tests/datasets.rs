//! The MLPerf reference implementations' data sets, read as their QSLs
//! read them: files written with the reference's own libraries (pandas,
//! pickle, json; `tests/data/datasets/make_datasets.py`) in each format —
//! llama2-70b's pandas pickle (plain and gzipped, token lists and numpy
//! arrays), llama3.1-8b's JSON, 3D-UNet's preprocessed folder — are run
//! with `--data-dir` in AccuracyOnly, and every sample's answer must be
//! the in-process node's answer to exactly that sample's data. Files that
//! are not what a benchmark reads are refused, naming the file and why.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use netdiv_tests::network_run::{loadgen, LoadgenRun};
use netdiv_tests::python::python_for_official_tools;
use netdiv_tests::{test_dir, workspace_root, TestDir};
use serde_json::Value;
use sut_node::backend::synthetic::expected_output;
use sut_node::backend::synthetic_llm::expected_tokens;

/// The data sets, written into a folder of the test's, and what each
/// sample must be (`expected.json`).
fn datasets() -> Result<(TestDir, Value)> {
    let python = python_for_official_tools()?;
    let dir = test_dir("datasets")?;
    let script = workspace_root().join("tests/data/datasets/make_datasets.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(dir.path())
        .output()
        .with_context(|| format!("cannot run {}", python.display()))?;
    ensure!(
        out.status.success(),
        "make_datasets.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{}", String::from_utf8_lossy(&out.stdout).trim());
    let expected = serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json"))?)?;
    Ok((dir, expected))
}

/// An AccuracyOnly Offline run of `benchmark` on `data` with the
/// sut-node's synthetic backend in this process.
fn accuracy_run(benchmark: &str, data: &Path, name: &str) -> Result<(TestDir, LoadgenRun)> {
    accuracy_run_with(benchmark, data, name, &[])
}

/// [`accuracy_run`] with `extra` flags.
fn accuracy_run_with(
    benchmark: &str,
    data: &Path,
    name: &str,
    extra: &[&str],
) -> Result<(TestDir, LoadgenRun)> {
    let dir = test_dir(name)?;
    let flags: Vec<String> = [
        "--sut",
        "synthetic",
        "--benchmark",
        benchmark,
        "--scenario",
        "Offline",
        "--mode",
        "AccuracyOnly",
        "--no-report",
        "--data-dir",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([data.display().to_string()])
    .chain(extra.iter().map(|s| s.to_string()))
    .collect();
    let run = loadgen(dir.path(), &flags, Duration::from_secs(300))?;
    Ok((dir, run))
}

/// Token ids as the QSL sends them: int32, little-endian.
fn int32(ids: &[Value]) -> Vec<u8> {
    ids.iter()
        .flat_map(|id| (id.as_i64().expect("an id") as i32).to_le_bytes())
        .collect()
}

/// Every prompt of `key` answered, each with the answer to its own ids.
fn check_prompts(run: &LoadgenRun, expected: &Value, key: &str) -> Result<()> {
    run.expect_success()?;
    let prompts = expected[key].as_array().context("expected prompts")?;
    let entries = run.accuracy()?;
    ensure!(
        entries.len() == prompts.len(),
        "{} answers for {} prompts",
        entries.len(),
        prompts.len()
    );
    for e in &entries {
        let ids = prompts[e.qsl_idx as usize].as_array().context("a prompt")?;
        let data = hex(&e.data);
        ensure!(
            !data.is_empty() && data == expected_tokens(&int32(ids), data.len() / 4),
            "sample {} was not answered from its own prompt {ids:?}",
            e.qsl_idx
        );
    }
    Ok(())
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len() / 2)
        .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn llama2_70b_pandas_pickles_are_read_as_the_reference_reads_them() -> Result<()> {
    let (dir, expected) = datasets()?;
    for file in ["llama2.pkl", "llama2.pkl.gz", "arrays.pkl"] {
        let (_d, run) = accuracy_run("llama2-70b", &dir.join(file), "dataset-llama2")?;
        check_prompts(&run, &expected, "llama2").with_context(|| file.to_string())?;
        let qsl = run
            .detail()?
            .value("qsl_name")
            .map(|v| v.to_string())
            .unwrap_or_default();
        ensure!(
            qsl.contains("12 prompts (tok_input") && qsl.contains(file),
            "{file}: {qsl}"
        );
    }
    Ok(())
}

/// The same frames as pandas 1.5.3 with numpy 1.26 wrote them (the
/// references' data sets date from those; committed, see their README).
#[test]
fn pickles_of_pandas_1_and_numpy_1_are_read_too() -> Result<()> {
    let dir = workspace_root().join("tests/data/datasets/pandas1.5.3-numpy1.26.4");
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json"))?)?;
    for file in ["llama2.pkl", "arrays.pkl"] {
        let (_d, run) = accuracy_run("llama2-70b", &dir.join(file), "dataset-pandas1")?;
        check_prompts(&run, &expected, "llama2").with_context(|| file.to_string())?;
    }
    Ok(())
}

#[test]
fn llama3_1_8b_json_is_read_as_the_reference_reads_it() -> Result<()> {
    let (dir, expected) = datasets()?;
    let (_d, run) = accuracy_run("llama3.1-8b", &dir.join("cnn_eval.json"), "dataset-cnn")?;
    check_prompts(&run, &expected, "cnn_eval")
}

#[test]
fn three_d_unet_preprocessed_volumes_are_read_as_the_reference_reads_them() -> Result<()> {
    let (dir, expected) = datasets()?;
    let (_d, run) = accuracy_run("3d-unet-99", &dir.join("kits"), "dataset-kits")?;
    run.expect_success()?;
    let cases: Vec<&str> = expected["kits"]
        .as_array()
        .context("cases")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let entries = run.accuracy()?;
    ensure!(entries.len() == cases.len(), "{} answers", entries.len());
    for e in &entries {
        let case = cases[e.qsl_idx as usize];
        let volume = std::fs::read(dir.join("kits_raw").join(format!("{case}.bin")))?;
        let data = hex(&e.data);
        ensure!(
            data == expected_output(&volume, data.len()),
            "{case} was not answered from its own volume ({} bytes)",
            volume.len()
        );
    }
    Ok(())
}

/// What a run on `data` said, when it was refused.
fn refusal(benchmark: &str, data: &Path) -> Result<String> {
    let (_d, run) = accuracy_run(benchmark, data, "dataset-refused")?;
    ensure!(
        !run.status.success(),
        "{} was accepted for {benchmark}",
        data.display()
    );
    Ok(run.stderr)
}

#[test]
fn files_that_are_not_the_benchmarks_data_are_refused_naming_why() -> Result<()> {
    let (dir, _) = datasets()?;
    // deepseek-r1's prompts are text, tokenized at run time.
    let text = dir.join("text_only.pkl");
    let said = refusal("deepseek-r1", &text)?;
    ensure!(
        said.contains(&text.display().to_string()) && said.contains("text_input"),
        "{said}"
    );
    // Volumes are not an LLM's prompts, and prompts not 3D-UNet's input.
    let said = refusal("llama2-70b", &dir.join("kits"))?;
    ensure!(said.contains("is not llama2-70b's input"), "{said}");
    let said = refusal("3d-unet-99", &dir.join("llama2.pkl"))?;
    ensure!(said.contains("is not 3d-unet-99's input"), "{said}");
    // A file that is not a pickle, and a JSON file that is not prompts.
    let broken = dir.join("broken.pkl");
    std::fs::write(&broken, b"\x80\x05not a pickle")?;
    let said = refusal("llama2-70b", &broken)?;
    ensure!(said.contains("broken.pkl"), "{said}");
    let object = dir.join("object.json");
    std::fs::write(&object, br#"{"tok_input": [1, 2]}"#)?;
    let said = refusal("llama3.1-8b", &object)?;
    ensure!(
        said.contains("object.json")
            && said.contains("neither pandas' columns nor its index orient"),
        "{said}"
    );
    Ok(())
}

/// The pandas versions a submitter may have, each pinned: pandas 2 with
/// Python strings and with pyarrow-backed ones (`future.infer_string`),
/// pandas 3 without pyarrow and with it (its default strings are then
/// Arrow arrays, pickled as their buffers).
const PANDAS: [(&str, &[&str], bool); 4] = [
    ("pandas-2.2.3", &["pandas==2.2.3", "numpy==2.4.6"], false),
    (
        "pandas-2.2.3-pyarrow",
        &["pandas==2.2.3", "numpy==2.4.6", "pyarrow==26.0.1"],
        true,
    ),
    ("pandas-3.1.1", &["pandas==3.1.1", "numpy==2.4.6"], false),
    (
        "pandas-3.1.1-pyarrow",
        &["pandas==3.1.1", "numpy==2.4.6", "pyarrow==26.0.1"],
        false,
    ),
];

/// Each pandas of [`PANDAS`], installed from PyPI, writes the frame as a
/// pickle and as JSON in every orient; each file is read as the
/// reference's `pd.read_pickle`/`pd.read_json` reads it: the same prompts
/// in the same row order (the values orient, which holds no column names,
/// is refused naming why). One pickle of pandas 3 with pyarrow also runs
/// end to end.
#[test]
fn data_sets_as_each_pandas_writes_them_are_read() -> Result<()> {
    let dir = test_dir("datasets-pandas")?;
    let script = workspace_root().join("tests/data/datasets/pandas_versions.py");
    for (label, packages, infer_string) in PANDAS {
        let python = netdiv_tests::python::pypi_python(label, packages)?;
        let mut command = Command::new(&python);
        command.arg(&script).arg(dir.path()).arg(label);
        if infer_string {
            command.arg("--infer-string");
        }
        let out = command
            .output()
            .with_context(|| format!("cannot run {}", python.display()))?;
        ensure!(
            out.status.success(),
            "{label}: pandas_versions.py failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("{}", String::from_utf8_lossy(&out.stdout).trim());
        let expected: Vec<Vec<i64>> = serde_json::from_str(&std::fs::read_to_string(
            dir.join(format!("{label}.expected.json")),
        )?)?;
        for kind in [
            "pkl",
            "records.json",
            "split.json",
            "table.json",
            "columns.json",
            "index.json",
        ] {
            let file = dir.join(format!("{label}.{kind}"));
            let data = loadgen_node::qsl::open_dataset(&file)
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .context("not read as a data set")?;
            ensure!(
                data.count() == expected.len(),
                "{label}.{kind}: {} prompts",
                data.count()
            );
            for (row, ids) in expected.iter().enumerate() {
                let sent = data.read(row).map_err(|e| anyhow::anyhow!("{e}"))?;
                let want: Vec<u8> = ids
                    .iter()
                    .flat_map(|id| (*id as i32).to_le_bytes())
                    .collect();
                ensure!(
                    sent[..] == want[..],
                    "{label}.{kind}: row {row} is not its prompt"
                );
            }
        }
        let values = dir.join(format!("{label}.values.json"));
        let refused = loadgen_node::qsl::open_dataset(&values)
            .err()
            .map(|e| e.to_string());
        ensure!(
            refused
                .as_deref()
                .is_some_and(|e| e.contains("values orient")),
            "{label}: the values orient was not refused by name: {refused:?}"
        );
    }
    let expected = serde_json::json!({
        "llama2": serde_json::from_str::<Value>(&std::fs::read_to_string(
            dir.join("pandas-3.1.1-pyarrow.expected.json"),
        )?)?
    });
    let (_d, run) = accuracy_run(
        "llama2-70b",
        &dir.join("pandas-3.1.1-pyarrow.pkl"),
        "dataset-pandas3",
    )?;
    check_prompts(&run, &expected, "llama2")
}

/// A folder of int64 `.npy` prompts (what `np.save` of Python ints
/// writes) is refused, naming the file and the flag; with the flag each
/// prompt reaches the node as the int32 ids it holds.
#[test]
fn int64_npy_prompts_are_refused_or_converted_with_the_flag() -> Result<()> {
    let dir = test_dir("dataset-int64")?;
    let prompts: Vec<Vec<i64>> = (0..6)
        .map(|i| (0..5 + i).map(|k| 100 + 7 * i + k).collect())
        .collect();
    for (i, ids) in prompts.iter().enumerate() {
        let bytes: Vec<u8> = ids.iter().flat_map(|id| id.to_le_bytes()).collect();
        loadgen_node::qsl::write_npy(
            &dir.join(format!("{i:02}.npy")),
            loadgen_node::qsl::DType::I64,
            &[ids.len()],
            &bytes,
        )?;
    }
    let said = refusal("llama2-70b", dir.path())?;
    ensure!(
        said.contains("00.npy holds int64 token ids") && said.contains("--npy-int64-as-int32"),
        "{said}"
    );
    let (_d, run) = accuracy_run_with(
        "llama2-70b",
        dir.path(),
        "dataset-int64-converted",
        &["--npy-int64-as-int32"],
    )?;
    let expected = serde_json::json!({ "prompts": prompts });
    check_prompts(&run, &expected, "prompts")
}
