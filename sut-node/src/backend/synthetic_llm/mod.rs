//! A synthetic LLM accelerator for the benchmarks that measure token
//! latencies: a cost model of prefill and decode with continuous batching,
//! and answers streamed token by token, so a node sends each sample's
//! first token the moment it exists and its completion, with the token
//! count, when the last token does.
//!
//! * The prompt is the input: for token-id prompts its element count
//!   (int32 or int64 ids, unpadded); for Whisper's audio features the
//!   encoder positions every sample fills.
//! * The answer's length is drawn from the input's bytes (the same sample
//!   always answers with as many tokens), from the benchmark's profile or
//!   from `[llm]`; its tokens are [`expected_tokens`] of the input, so an
//!   answer delivered to the wrong sample is caught end to end.
//! * Time: each device runs steps ([`scheduler`]): a step prefills the
//!   sequences it admits (`prefill_us_per_token` per prompt token) and
//!   gives every running sequence one more token (`decode_us_per_token`
//!   per step), up to `max_sequences` at once. [`driver`] runs the steps
//!   in real time on a device thread.
//!
//! It knows nothing of transports or the node: items come from a
//! [`DeviceQueue`](crate::backend::device::DeviceQueue) and tokens go to
//! the node as [`DeviceEvent`](crate::backend::device::DeviceEvent)s.

pub mod driver;
pub mod scheduler;

use netdiv_proto::benchmark::{TokenCounts, TokenProfile};
use netdiv_proto::dtype::DType;
use netdiv_proto::Benchmark;
use serde::{Deserialize, Serialize};

use self::scheduler::{Scheduler, StepCost};
use super::hash::word_hash;

/// `NodeInfo.backend` of this backend.
pub const KIND: &str = "synthetic-llm";

/// Token ids are drawn below this, like the ids of a vocabulary.
const VOCABULARY: u64 = 32000;

/// Element type of token-id prompts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum TokenIds {
    /// 4-byte little-endian ids.
    Int32,
    /// 8-byte little-endian ids.
    Int64,
}

impl TokenIds {
    /// Bytes per id.
    pub fn size(self) -> usize {
        match self {
            TokenIds::Int32 => 4,
            TokenIds::Int64 => 8,
        }
    }

    /// `int32` or `int64`.
    pub fn name(self) -> &'static str {
        match self {
            TokenIds::Int32 => "int32",
            TokenIds::Int64 => "int64",
        }
    }
}

/// The `[llm]` section: cost model and answer lengths of the synthetic
/// LLM backend.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LlmConfig {
    /// Prefill time per prompt token, in microseconds.
    pub prefill_us_per_token: f64,
    /// One decode step, in microseconds: every running sequence gains one
    /// token per step, so this is the time per output token.
    pub decode_us_per_token: f64,
    /// Sequences one device runs at once; more wait in a queue.
    pub max_sequences: usize,
    /// Devices, each with its own sequences.
    pub devices: usize,
    /// Every answer has this many tokens (overrides the three below).
    pub output_tokens: Option<u32>,
    /// Mean answer length [default: the benchmark's; with only a min or a
    /// max given, halfway: uniform].
    pub output_tokens_mean: Option<u32>,
    /// Shortest answer, at least 2 [default: the benchmark's].
    pub output_tokens_min: Option<u32>,
    /// Longest answer [default: the benchmark's].
    pub output_tokens_max: Option<u32>,
    /// Element type of token-id prompts [default: the benchmark's].
    pub token_ids: Option<TokenIds>,
}

impl Default for LlmConfig {
    /// A fast but plausible accelerator: 20 µs per prompt token, 2 ms per
    /// output token, 64 sequences at once. A Llama2-70B node answers a
    /// typical OpenOrca prompt with its first token in about 6 ms.
    fn default() -> Self {
        Self {
            prefill_us_per_token: 20.0,
            decode_us_per_token: 2000.0,
            max_sequences: 64,
            devices: 1,
            output_tokens: None,
            output_tokens_mean: None,
            output_tokens_min: None,
            output_tokens_max: None,
            token_ids: None,
        }
    }
}

impl LlmConfig {
    /// No time at all (tokens are still produced one step at a time): for
    /// measuring the harness.
    pub fn zero_cost() -> Self {
        Self {
            prefill_us_per_token: 0.0,
            decode_us_per_token: 0.0,
            ..Self::default()
        }
    }

    /// Answer lengths for `profile` (the benchmark's), as configured.
    pub fn output_lengths(&self, profile: &TokenProfile) -> Result<TokenCounts, LlmConfigError> {
        let counts = match self.output_tokens {
            Some(n) => TokenCounts::fixed(n),
            None => {
                let base = profile.output;
                let ranged = self.output_tokens_min.is_some() || self.output_tokens_max.is_some();
                let min = self.output_tokens_min.unwrap_or(base.min);
                let max = self.output_tokens_max.unwrap_or(base.max);
                let mean = match self.output_tokens_mean {
                    Some(mean) => mean,
                    None if ranged => min + (max.saturating_sub(min)) / 2,
                    None => base.mean,
                };
                TokenCounts { mean, min, max }
            }
        };
        if counts.min < 2 {
            return Err(LlmConfigError::TooFewOutputTokens(counts.min));
        }
        if !counts.is_consistent() {
            return Err(LlmConfigError::OutputTokens(counts));
        }
        Ok(counts)
    }

    fn check(&self) -> Result<(), LlmConfigError> {
        for (field, value) in [
            ("prefill_us_per_token", self.prefill_us_per_token),
            ("decode_us_per_token", self.decode_us_per_token),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(LlmConfigError::Cost { field, value });
            }
        }
        for (field, value) in [
            ("max_sequences", self.max_sequences),
            ("devices", self.devices),
        ] {
            if value == 0 {
                return Err(LlmConfigError::Zero(field));
            }
        }
        Ok(())
    }
}

/// Why an `[llm]` configuration cannot run.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LlmConfigError {
    /// The benchmark has no token latencies, so no token profile.
    #[error(
        "the synthetic LLM backend streams tokens, but benchmark {0} does not measure token \
         latencies (use_token_latencies = 0 in mlperf.conf)"
    )]
    NoTokenLatencies(String),
    /// A node of one benchmark given an LLM backend built for another.
    #[error("a node of benchmark {node} cannot run an LLM backend built for {backend}")]
    OtherBenchmark {
        /// The node's benchmark.
        node: String,
        /// The backend's.
        backend: String,
    },
    /// A cost that is not a number of microseconds.
    #[error("llm.{field} = {value} is not a number of microseconds (at least 0)")]
    Cost {
        /// The key.
        field: &'static str,
        /// Its value.
        value: f64,
    },
    /// A count that must be at least 1.
    #[error("llm.{0} must be at least 1")]
    Zero(&'static str),
    /// Answers shorter than 2 tokens.
    #[error(
        "answers of {0} token(s): at least 2 are needed (the LoadGen's time per output token \
         divides by n_tokens - 1)"
    )]
    TooFewOutputTokens(u32),
    /// min <= mean <= max does not hold.
    #[error(
        "output tokens: min {} <= mean {} <= max {} does not hold",
        .0.min,
        .0.mean,
        .0.max
    )]
    OutputTokens(TokenCounts),
}

/// Why a sample's input is not a prompt; a per-sample error.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InvalidPrompt {
    /// The input is empty.
    #[error("the prompt is empty")]
    Empty,
    /// Its size is not a whole number of token ids.
    #[error("an input of {bytes} bytes is not a whole number of {ids} token ids")]
    NotTokenIds {
        /// Its size.
        bytes: usize,
        /// The configured element type.
        ids: &'static str,
    },
    /// An id that is negative or too large for a vocabulary.
    #[error("token id {id} at position {index} is not a vocabulary id")]
    BadTokenId {
        /// Its position in the prompt.
        index: usize,
        /// The id.
        id: i64,
    },
}

/// How a sample runs: its prompt length and its answer length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SequencePlan {
    /// Prompt tokens to prefill.
    pub prompt_tokens: usize,
    /// Tokens of the answer (n_tokens).
    pub output_tokens: usize,
}

/// How a prompt's length is found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PromptLength {
    /// One element per token.
    TokenIds(TokenIds),
    /// The same for every input (an encoder over features).
    Positions(u32),
}

/// The synthetic LLM backend of one benchmark.
#[derive(Debug)]
pub struct SyntheticLlmBackend {
    config: LlmConfig,
    benchmark: Benchmark,
    output: TokenCounts,
    prompt: PromptLength,
}

impl SyntheticLlmBackend {
    /// The backend `config` describes, for `benchmark`, which must measure
    /// token latencies.
    pub fn new(config: LlmConfig, benchmark: &Benchmark) -> Result<Self, LlmConfigError> {
        let profile = benchmark
            .token_profile()
            .filter(|_| benchmark.uses_token_latencies())
            .ok_or_else(|| LlmConfigError::NoTokenLatencies(benchmark.to_string()))?;
        config.check()?;
        let output = config.output_lengths(profile)?;
        let prompt = if profile.input_token_ids {
            PromptLength::TokenIds(config.token_ids.unwrap_or(match benchmark.spec().dtype {
                DType::I64 => TokenIds::Int64,
                _ => TokenIds::Int32,
            }))
        } else {
            PromptLength::Positions(profile.input.mean)
        };
        Ok(Self {
            config,
            benchmark: *benchmark,
            output,
            prompt,
        })
    }

    /// What it was built with.
    pub fn config(&self) -> &LlmConfig {
        &self.config
    }

    /// The benchmark whose prompts and answers it models.
    pub fn benchmark(&self) -> &Benchmark {
        &self.benchmark
    }

    /// The answer lengths it draws from.
    pub fn output_lengths(&self) -> TokenCounts {
        self.output
    }

    /// Device threads to run.
    pub fn devices(&self) -> usize {
        self.config.devices.max(1)
    }

    /// Human-readable parameters for `NodeInfo.backend_detail`.
    pub fn detail(&self) -> String {
        let c = &self.config;
        let o = self.output;
        let prompt = match self.prompt {
            PromptLength::TokenIds(ids) => format!("{}-token-ids", ids.name()),
            PromptLength::Positions(n) => format!("{n}-positions"),
        };
        format!(
            "prefill_us_per_token={} decode_us_per_token={} max_sequences={} devices={} \
             output_tokens=mean:{},min:{},max:{} prompt={prompt}",
            c.prefill_us_per_token,
            c.decode_us_per_token,
            c.max_sequences,
            self.devices(),
            o.mean,
            o.min,
            o.max
        )
    }

    /// How `input` runs: its prompt length and the answer length drawn
    /// from its bytes.
    pub fn plan(&self, input: &[u8]) -> Result<SequencePlan, InvalidPrompt> {
        let prompt_tokens = match self.prompt {
            PromptLength::Positions(n) => n as usize,
            PromptLength::TokenIds(ids) => {
                if input.is_empty() {
                    return Err(InvalidPrompt::Empty);
                }
                if !input.len().is_multiple_of(ids.size()) {
                    return Err(InvalidPrompt::NotTokenIds {
                        bytes: input.len(),
                        ids: ids.name(),
                    });
                }
                input.len() / ids.size()
            }
        };
        let mut state = word_hash(input) ^ 0x6c65_6e67_7468; // "length"
        Ok(SequencePlan {
            prompt_tokens,
            output_tokens: self.output.draw(splitmix64(&mut state)) as usize,
        })
    }

    /// A scheduler for one device with this cost model.
    pub fn scheduler<T>(&self) -> Scheduler<T> {
        Scheduler::new(
            StepCost {
                prefill_ns_per_token: self.config.prefill_us_per_token * 1e3,
                decode_ns_per_step: self.config.decode_us_per_token * 1e3,
            },
            self.config.max_sequences,
        )
    }
}

/// One step of splitmix64.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The first `n_tokens` tokens the synthetic LLM answers `input` with:
/// int32 little-endian ids below 32000, a function of the input's bytes
/// alone. A shorter answer is a prefix of a longer one, so a sample's
/// first token is `expected_tokens(input, 1)`.
pub fn expected_tokens(input: &[u8], n_tokens: usize) -> Vec<u8> {
    let mut state = word_hash(input);
    let mut out = Vec::with_capacity(n_tokens * 4);
    for _ in 0..n_tokens {
        let id = (splitmix64(&mut state) >> 33) % VOCABULARY;
        out.extend_from_slice(&(id as i32).to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn llama() -> Benchmark {
        Benchmark::parse("llama2-70b").unwrap()
    }

    fn prompt(tokens: usize, seed: u8) -> Vec<u8> {
        (0..tokens * 4)
            .map(|i| (i as u8).wrapping_mul(seed))
            .collect()
    }

    #[test]
    fn tokens_are_a_function_of_the_input() {
        let a = expected_tokens(b"abcd", 10);
        assert_eq!(a.len(), 40);
        assert_eq!(a, expected_tokens(b"abcd", 10));
        assert_ne!(a, expected_tokens(b"abce", 10));
        assert_eq!(expected_tokens(b"abcd", 1), a[..4]);
        for id in a.chunks_exact(4) {
            assert!((0..32000).contains(&i32::from_le_bytes(id.try_into().unwrap())));
        }
    }

    #[test]
    fn prompt_length_is_the_element_count() {
        let b = SyntheticLlmBackend::new(LlmConfig::default(), &llama()).unwrap();
        assert_eq!(b.plan(&prompt(300, 3)).unwrap().prompt_tokens, 300);
        assert_eq!(
            b.plan(&[1, 2, 3, 4, 5]).unwrap_err().to_string(),
            "an input of 5 bytes is not a whole number of int32 token ids"
        );
        assert_eq!(b.plan(&[]).unwrap_err(), InvalidPrompt::Empty);
        let wide = LlmConfig {
            token_ids: Some(TokenIds::Int64),
            ..LlmConfig::default()
        };
        let b = SyntheticLlmBackend::new(wide, &llama()).unwrap();
        assert_eq!(b.plan(&prompt(300, 3)).unwrap().prompt_tokens, 150);
        assert!(b.plan(&[0; 12]).is_err());
        // Whisper's features fill the encoder whatever their size.
        let whisper = Benchmark::parse("whisper").unwrap();
        let b = SyntheticLlmBackend::new(LlmConfig::default(), &whisper).unwrap();
        assert_eq!(b.plan(&[0; 7]).unwrap().prompt_tokens, 1500);
    }

    #[test]
    fn output_lengths_are_deterministic_and_follow_the_profile() {
        let b = SyntheticLlmBackend::new(LlmConfig::default(), &llama()).unwrap();
        let lengths: Vec<usize> = (0..2000)
            .map(|i| {
                b.plan(&prompt(10 + i % 50, i as u8 | 1))
                    .unwrap()
                    .output_tokens
            })
            .collect();
        let again: Vec<usize> = (0..2000)
            .map(|i| {
                b.plan(&prompt(10 + i % 50, i as u8 | 1))
                    .unwrap()
                    .output_tokens
            })
            .collect();
        assert_eq!(lengths, again);
        assert!(lengths.iter().all(|n| (2..=1024).contains(n)));
        let distinct: std::collections::HashSet<_> = lengths.iter().collect();
        assert!(distinct.len() > 100, "{} distinct", distinct.len());
        // Inputs repeat here (50 lengths x 128 seeds), so the mean is rough.
        let mean = lengths.iter().sum::<usize>() as f64 / lengths.len() as f64;
        assert!((200.0..400.0).contains(&mean), "{mean}");
    }

    #[test]
    fn output_lengths_can_be_fixed_or_uniform() {
        let profile = llama().token_profile().unwrap();
        let fixed = LlmConfig {
            output_tokens: Some(7),
            ..LlmConfig::default()
        };
        assert_eq!(fixed.output_lengths(profile), Ok(TokenCounts::fixed(7)));
        let b = SyntheticLlmBackend::new(fixed, &llama()).unwrap();
        assert_eq!(b.plan(&prompt(3, 1)).unwrap().output_tokens, 7);
        let uniform = LlmConfig {
            output_tokens_min: Some(10),
            output_tokens_max: Some(20),
            ..LlmConfig::default()
        };
        assert_eq!(
            uniform.output_lengths(profile),
            Ok(TokenCounts {
                mean: 15,
                min: 10,
                max: 20
            })
        );
        let one = LlmConfig {
            output_tokens: Some(1),
            ..LlmConfig::default()
        };
        assert_eq!(
            one.output_lengths(profile),
            Err(LlmConfigError::TooFewOutputTokens(1))
        );
        let upside_down = LlmConfig {
            output_tokens_mean: Some(5000),
            ..LlmConfig::default()
        };
        assert!(matches!(
            upside_down.output_lengths(profile),
            Err(LlmConfigError::OutputTokens(_))
        ));
    }

    #[test]
    fn refuses_benchmarks_without_token_latencies_and_bad_costs() {
        let e =
            SyntheticLlmBackend::new(LlmConfig::default(), &Benchmark::parse("resnet50").unwrap())
                .unwrap_err();
        assert_eq!(e, LlmConfigError::NoTokenLatencies("resnet50".into()));
        let e = SyntheticLlmBackend::new(
            LlmConfig {
                decode_us_per_token: -1.0,
                ..LlmConfig::default()
            },
            &llama(),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "llm.decode_us_per_token = -1 is not a number of microseconds (at least 0)"
        );
        let e = SyntheticLlmBackend::new(
            LlmConfig {
                max_sequences: 0,
                ..LlmConfig::default()
            },
            &llama(),
        )
        .unwrap_err();
        assert_eq!(e, LlmConfigError::Zero("max_sequences"));
    }

    #[test]
    fn detail_names_every_parameter() {
        let b = SyntheticLlmBackend::new(LlmConfig::default(), &llama()).unwrap();
        assert_eq!(
            b.detail(),
            "prefill_us_per_token=20 decode_us_per_token=2000 max_sequences=64 devices=1 \
             output_tokens=mean:294,min:2,max:1024 prompt=int32-token-ids"
        );
    }
}
