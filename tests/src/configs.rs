//! Config files built from values, so a test that changes one setting
//! changes that setting (or fails to build), never a string that silently
//! matched nothing: [`UserConf`] for LoadGen's `user.conf`, and
//! [`node_toml`] for a sut-node's config file from a
//! [`sut_node::config::FileConfig`].

use std::fmt;

use anyhow::{Context, Result};
use sut_node::config::FileConfig;

/// A llama2-70b sut-node with the synthetic LLM (5 us per prompt token,
/// `decode_us_per_token` per decode step, `max_sequences` at once, every
/// answer `output_tokens` long): nodes of different speeds for dispatch
/// and per-node latency tests.
pub fn llm_node(decode_us_per_token: f64, max_sequences: usize, output_tokens: u32) -> FileConfig {
    FileConfig {
        benchmark: Some("llama2-70b".into()),
        llm: sut_node::backend::synthetic_llm::LlmConfig {
            prefill_us_per_token: 5.0,
            decode_us_per_token,
            max_sequences,
            output_tokens: Some(output_tokens),
            ..Default::default()
        },
        ..FileConfig::default()
    }
}

/// A sut-node of `benchmark` with one synthetic device that costs nothing,
/// so a benchmark measures the transport, not the backend.
pub fn zero_cost_node(benchmark: &str) -> FileConfig {
    FileConfig {
        benchmark: Some(benchmark.into()),
        synthetic: sut_node::backend::synthetic::SyntheticConfig {
            batch_cost_us: 0,
            sample_cost_us: 0,
            devices: 1,
            ..Default::default()
        },
        ..FileConfig::default()
    }
}

/// `loadgen-node run` flags for the in-process counterpart of
/// [`zero_cost_node`]: the synthetic backend, one device, no cost.
pub fn zero_cost_in_process_flags() -> Vec<String> {
    [
        "--sut",
        "synthetic",
        "--synthetic-batch-cost-us",
        "0",
        "--synthetic-sample-cost-us",
        "0",
        "--synthetic-devices",
        "1",
    ]
    .map(String::from)
    .to_vec()
}

/// A LoadGen `user.conf`: `key = value` lines, in the order keys were
/// first set. Its [`Display`](fmt::Display) is the file's text.
///
/// ```
/// # use netdiv_tests::configs::UserConf;
/// let conf = UserConf::new()
///     .set("*.*.min_duration", 300)
///     .set("*.Offline.target_qps", 40000)
///     .set("*.*.min_duration", 2500);
/// assert_eq!(
///     conf.to_string(),
///     "*.*.min_duration = 2500\n*.Offline.target_qps = 40000\n"
/// );
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserConf {
    lines: Vec<(String, String)>,
}

impl UserConf {
    /// An empty file.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` (e.g. `*.Server.target_qps`) to `value`: replaces the
    /// value where `key` is already set, appends a line otherwise.
    ///
    /// Panics on a key or value that cannot be one line of the file.
    pub fn set(mut self, key: &str, value: impl fmt::Display) -> Self {
        let value = value.to_string();
        assert!(
            !key.trim().is_empty() && !key.contains(['=', '\n', '#']) && key.trim() == key,
            "not a user.conf key: {key:?}"
        );
        assert!(
            !value.trim().is_empty() && !value.contains(['\n', '#']),
            "not a user.conf value for {key}: {value:?}"
        );
        match self.lines.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = value,
            None => self.lines.push((key.to_string(), value)),
        }
        self
    }

    /// The value `key` is set to, if it is.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.lines
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

impl fmt::Display for UserConf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (key, value) in &self.lines {
            writeln!(f, "{key} = {value}")?;
        }
        Ok(())
    }
}

/// The TOML text of a sut-node config file (`sut-node --config`,
/// `loadgen-node run --sut local --node-config`).
pub fn node_toml(config: &FileConfig) -> Result<String> {
    toml::to_string(config).context("cannot write a sut-node config as TOML")
}

#[cfg(test)]
mod tests {
    use super::*;
    use sut_node::backend::synthetic::SyntheticConfig;

    #[test]
    fn set_replaces_a_key_in_place_or_appends_it() {
        let conf = UserConf::new()
            .set("*.*.min_duration", 300)
            .set("*.Server.target_qps", 800)
            .set("*.Server.target_latency", 200);
        assert_eq!(
            conf.to_string(),
            "*.*.min_duration = 300\n*.Server.target_qps = 800\n*.Server.target_latency = 200\n"
        );
        let changed = conf
            .clone()
            .set("*.Server.target_qps", 1000)
            .set("*.Offline.target_qps", 3000.5);
        assert_eq!(
            changed.to_string(),
            "*.*.min_duration = 300\n*.Server.target_qps = 1000\n*.Server.target_latency = 200\n\
             *.Offline.target_qps = 3000.5\n"
        );
        assert_eq!(changed.get("*.Server.target_qps"), Some("1000"));
        assert_eq!(changed.get("*.Offline.min_query_count"), None);
        assert_eq!(conf.get("*.Server.target_qps"), Some("800"));
        assert_eq!(UserConf::new().to_string(), "");
    }

    #[test]
    #[should_panic(expected = "not a user.conf key")]
    fn a_key_with_an_equals_sign_is_refused() {
        let _ = UserConf::new().set("*.*.min_duration = 3", 4);
    }

    #[test]
    #[should_panic(expected = "not a user.conf value")]
    fn a_value_of_two_lines_is_refused() {
        let _ = UserConf::new().set("*.*.min_duration", "3\n*.*.mode = 2");
    }

    #[test]
    fn a_node_config_round_trips_through_toml() {
        let config = FileConfig {
            benchmark: Some("3d-unet".into()),
            synthetic: SyntheticConfig {
                batch_cost_us: 500,
                output_bytes: 32,
                ..SyntheticConfig::default()
            },
            ..FileConfig::default()
        };
        let text = node_toml(&config).unwrap();
        let back: FileConfig = toml::from_str(&text).unwrap();
        assert_eq!(back.benchmark.as_deref(), Some("3d-unet"));
        assert_eq!(back.synthetic, config.synthetic);
        assert_eq!(back.batching, config.batching);
    }
}
