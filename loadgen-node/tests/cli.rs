//! The `loadgen-node` binary as a user runs it: real process, real files.

use std::process::Command;

use tempfile::TempDir;

/// A fresh directory for one test's files, removed when the test ends.
fn temp_dir(name: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(&format!("netdiv-cli-{name}-"))
        .tempdir()
        .unwrap()
}

fn loadgen(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_loadgen-node"))
        .args(args)
        .output()
        .expect("run loadgen-node")
}

#[test]
fn short_server_run_writes_the_four_logs_and_is_valid() {
    let tmp = temp_dir("server");
    let dir = tmp.path();
    let conf = dir.join("user.conf");
    std::fs::write(
        &conf,
        "*.*.min_duration = 500\n*.Server.target_qps = 2000\n",
    )
    .unwrap();
    let out = loadgen(&[
        "run",
        "--sut",
        "null",
        "--scenario",
        "Server",
        "--user-conf",
        conf.to_str().unwrap(),
        "--total-sample-count",
        "4096",
        "--performance-sample-count",
        "1024",
        "--output",
        dir.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Result is : VALID"), "{stdout}");
    for name in ["summary.txt", "detail.txt", "accuracy.json", "trace.json"] {
        let path = dir.join(format!("mlperf_log_{name}"));
        assert!(path.is_file(), "{} missing", path.display());
    }
    let detail = std::fs::read_to_string(dir.join("mlperf_log_detail.txt")).unwrap();
    assert!(detail.lines().all(|l| l.starts_with(":::MLLOG {")));
    assert!(detail.contains("\"key\": \"result_validity\", \"value\": \"VALID\""));
}

#[test]
fn accuracy_run_logs_every_sample_once_with_its_data() {
    let tmp = temp_dir("accuracy");
    let dir = tmp.path();
    let out = loadgen(&[
        "run",
        "--sut",
        "null",
        "--scenario",
        "Offline",
        "--mode",
        "AccuracyOnly",
        "--total-sample-count",
        "300",
        "--performance-sample-count",
        "128",
        "--output",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = std::fs::read_to_string(dir.join("mlperf_log_accuracy.json")).unwrap();
    let mut seen: Vec<usize> = json
        .lines()
        .filter_map(|l| l.split("\"qsl_idx\" : ").nth(1))
        .map(|rest| {
            let idx: usize = rest.split(',').next().unwrap().parse().unwrap();
            let data = rest
                .split("\"data\" : \"")
                .nth(1)
                .unwrap()
                .trim_end_matches(&['"', ' ', '}', ','][..]);
            assert_eq!(
                data,
                format!("{:08X}", (idx as u32).swap_bytes()),
                "response of {idx}"
            );
            idx
        })
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..300).collect::<Vec<_>>());
}

#[test]
fn a_bad_config_line_is_named_with_file_and_line() {
    let tmp = temp_dir("badconf");
    let dir = tmp.path();
    let conf = dir.join("user.conf");
    std::fs::write(
        &conf,
        "# ok\n*.Server.target_qps = 100\n*.*.min_duration = soon\n",
    )
    .unwrap();
    let out = loadgen(&[
        "run",
        "--sut",
        "null",
        "--scenario",
        "Server",
        "--user-conf",
        conf.to_str().unwrap(),
        "--total-sample-count",
        "10",
        "--performance-sample-count",
        "10",
        "--output",
        dir.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{}:3: value \"soon\" is not an integer or a number",
            conf.display()
        )),
        "{stderr}"
    );
}

#[test]
fn missing_files_and_bad_flags_are_clear_errors() {
    let tmp = temp_dir("missing");
    let dir = tmp.path();
    let out = loadgen(&[
        "run",
        "--sut",
        "null",
        "--scenario",
        "Offline",
        "--user-conf",
        "/nonexistent/user.conf",
        "--total-sample-count",
        "10",
        "--performance-sample-count",
        "10",
        "--output",
        dir.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("cannot read config file /nonexistent/user.conf"));

    let out = loadgen(&[
        "run",
        "--sut",
        "null",
        "--scenario",
        "Offline",
        "--total-sample-count",
        "many",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--total-sample-count"));
}

#[test]
fn synthetic_cost_flags_need_the_synthetic_sut() {
    let tmp = temp_dir("synthetic");
    let dir = tmp.path();
    let common = [
        "run",
        "--scenario",
        "Offline",
        "--synthetic-sample-cost-us",
        "10",
        "--total-sample-count",
        "64",
        "--performance-sample-count",
        "64",
        "--output",
        dir.to_str().unwrap(),
    ];
    let mut args = common.to_vec();
    args.extend(["--sut", "null"]);
    let out = loadgen(&args);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the --synthetic-* flags set the cost model of --sut synthetic"),
        "{stderr}"
    );
    let conf = dir.join("user.conf");
    std::fs::write(
        &conf,
        "*.Offline.min_duration = 100\n*.Offline.target_qps = 1000\n",
    )
    .unwrap();
    let mut args = common.to_vec();
    args.extend(["--sut", "synthetic", "--user-conf", conf.to_str().unwrap()]);
    let out = loadgen(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The backend ran: the summary counts the samples it answered.
    assert!(stdout.contains("Samples per second"), "{stdout}");
}

/// A token model under `--sut null`: without --null-output-tokens the run
/// is refused by name; with it, first tokens and counts are measured.
#[test]
fn token_models_run_with_first_tokens_and_counts() {
    let tmp = temp_dir("tokens");
    let dir = tmp.path();
    let out_dir = dir.to_str().unwrap();
    let conf = dir.join("user.conf");
    std::fs::write(
        &conf,
        "*.Server.min_duration = 300\n*.Server.target_qps = 2000\n*.Server.min_query_count = 600\n",
    )
    .unwrap();
    let base = [
        "run",
        "--sut",
        "null",
        "--benchmark",
        "llama2-70b",
        "--total-sample-count",
        "64",
        "--performance-sample-count",
        "64",
        "--user-conf",
        conf.to_str().unwrap(),
        "--output",
        out_dir,
        "--progress",
        "never",
    ];
    let out = loadgen(&[&base[..], &["--scenario", "Server"]].concat());
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("llama2-70b measures token latencies")
            && stderr.contains("--null-output-tokens"),
        "{stderr}"
    );

    // Interactive: Server with llama2-70b-interactive's bounds.
    let out = loadgen(
        &[
            &base[..],
            &["--scenario", "Interactive", "--null-output-tokens", "8"],
        ]
        .concat(),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Result is : VALID"), "{stdout}");
    assert!(stdout.contains("ttft_latency (ns): 450000000"), "{stdout}");
    assert!(stdout.contains("TTFT Early Stopping Result:"), "{stdout}");
    let detail = std::fs::read_to_string(dir.join("mlperf_log_detail.txt")).unwrap();
    let trace = std::fs::read_to_string(dir.join("mlperf_log_trace.json")).unwrap();
    assert!(
        trace.contains("\"name\":\"Token_Latency\""),
        "no token events in the trace"
    );
    for key in [
        "result_first_token_99.00_percentile_latency_ns",
        "result_time_per_output_token_99.00_percentile_ns",
        "early_stopping_ttft_result",
        "result_completed_tokens_per_second",
    ] {
        assert!(detail.contains(&format!("\"key\": \"{key}\"")), "{key}");
    }

    // One token per answer: the official runtime error for every sample,
    // and a failing exit status.
    let out = loadgen(
        &[
            &base[..],
            &["--scenario", "Server", "--null-output-tokens", "1"],
        ]
        .concat(),
    );
    assert_eq!(out.status.code(), Some(1));
    let detail = std::fs::read_to_string(dir.join("mlperf_log_detail.txt")).unwrap();
    let errors = detail
        .lines()
        .filter(|l| l.contains("Number of tokens need to be greater than 1"))
        .count();
    let issued = detail
        .lines()
        .find(|l| l.contains("\"key\": \"result_query_count\""))
        .expect("result_query_count");
    assert!(errors >= 100, "{errors} errors; {issued}");
    assert!(
        issued.contains(&format!("\"value\": {errors},")),
        "{errors} errors; {issued}"
    );
}

/// `--scenario Interactive` needs a benchmark with an interactive variant.
#[test]
fn interactive_needs_an_llm() {
    let out = loadgen(&[
        "run",
        "--sut",
        "null",
        "--scenario",
        "Interactive",
        "--benchmark",
        "bert",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("benchmark bert has no interactive variant"),
        "{stderr}"
    );
}

/// Bad network and sample flags are refused before anything runs, each
/// naming what is wrong.
#[test]
fn network_run_errors_name_the_flag_the_file_or_the_node() {
    let tmp = temp_dir("network-errors");
    let dir = tmp.path();
    let out_dir = dir.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "--scenario", "Offline", "--output", out_dir];
        args.extend_from_slice(extra);
        let out = loadgen(&args);
        assert!(!out.status.success(), "{extra:?} succeeded");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let err = run(&[
        "--sut-node",
        "grpc://127.0.0.1:1",
        "--benchmark",
        "gptj",
        "--sample-codec",
        "lz4",
    ]);
    assert!(
        err.contains("--sample-codec: the rules allow no lz4 inputs for gptj (allowed: none)"),
        "{err}"
    );
    let err = run(&[
        "--sut-node",
        "grpc://127.0.0.1:1",
        "--data-dir",
        "/nonexistent/npy",
    ]);
    assert!(err.contains("/nonexistent/npy"), "{err}");
    let err = run(&["--sut-node", "grpc://127.0.0.1:1", "--benchmark", "resnt50"]);
    assert!(
        err.contains("--benchmark")
            && err.contains("unknown benchmark \"resnt50\" (known: resnet50,"),
        "{err}"
    );
    let err = run(&["--sut-node", "grpc://127.0.0.1:1", "--benchmark", "bert-98"]);
    assert!(
        err.contains("benchmark bert has no accuracy target 98 (its targets: 99, 99.9)"),
        "{err}"
    );
    let err = run(&["--sut-node", "grpc://127.0.0.1:1", "--benchmark", "null"]);
    assert!(
        err.contains("node grpc://127.0.0.1:1:") && err.contains("refused"),
        "{err}"
    );
    let err = run(&["--sut-node", "quic://127.0.0.1:1", "--benchmark", "null"]);
    assert!(err.contains("QUIC always runs over TLS"), "{err}");
    let err = run(&[
        "--sut-node",
        "grpc://no-such-node.invalid:7000",
        "--benchmark",
        "null",
    ]);
    assert!(
        err.contains("node grpc://no-such-node.invalid:7000:")
            && err.contains("cannot resolve no-such-node.invalid"),
        "{err}"
    );
    let err = run(&[
        "--sut-node",
        "quic://127.0.0.1:1",
        "--benchmark",
        "null",
        "--tls-ca",
        "/nonexistent/ca.pem",
    ]);
    assert!(err.contains("TLS file /nonexistent/ca.pem"), "{err}");
    let err = run(&[
        "--sut-node",
        "grpc://127.0.0.1:1",
        "--sample-dtype",
        "float64",
    ]);
    assert!(err.contains("float64"), "{err}");
}

/// `submission` needs the official LoadGen; the default build says so and
/// how to rebuild, before it touches any node.
#[cfg(not(feature = "official"))]
#[test]
fn submission_without_the_official_loadgen_is_refused() {
    let out = loadgen(&[
        "submission",
        "--submitter",
        "acme",
        "--system",
        "s",
        "--system-json",
        "s.json",
        "--benchmark",
        "3d-unet-99",
        "--sut-node",
        "grpc://10.0.0.2:7000",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("must come from the official LoadGen")
            && stderr.contains("--features official"),
        "{stderr}"
    );
}

#[test]
fn user_conf_lines_that_apply_to_nothing_are_named_with_the_key_read() {
    let tmp = temp_dir("unmatched");
    let dir = tmp.path();
    let conf = dir.join("user.conf");
    // The checker's spelling of resnet50, a scenario in lower case, a
    // setting that does not exist, and one line that applies.
    std::fs::write(
        &conf,
        "resnet.Offline.target_qps = 100\n*.offline.min_duration = 100\n\
         *.Offline.target_qsp = 5\n*.Offline.min_duration = 200\n",
    )
    .unwrap();
    let out = loadgen(&[
        "run",
        "--sut",
        "null",
        "--benchmark",
        "resnet50",
        "--scenario",
        "Offline",
        "--user-conf",
        conf.to_str().unwrap(),
        "--total-sample-count",
        "1024",
        "--output",
        dir.to_str().unwrap(),
        "--progress",
        "never",
        "--no-report",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for want in [
        "user.conf:1: \"resnet.Offline.target_qps\" applies to no model: mlperf.conf calls \
         resnet \"resnet50\", so the LoadGen ignores this line (write \
         resnet50.Offline.target_qps)",
        "user.conf:2: \"*.offline.min_duration\" names no scenario, so the LoadGen ignores \
         this line (write Offline)",
        "user.conf:3: \"*.Offline.target_qsp\" names no setting",
    ] {
        assert!(stderr.contains(want), "no {want:?} in:\n{stderr}");
    }
    assert!(!stderr.contains("user.conf:4"), "{stderr}");
}
