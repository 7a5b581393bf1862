//! The one benchmark table of netdiv: every benchmark the harness knows,
//! the sample its QSL holds (one preprocessed input tensor), the data-set
//! sizes of the MLPerf reference QSLs, and the codecs the rules'
//! compression table allows in each direction.
//!
//! A [`Benchmark`] is parsed once, from any name a user, a config file or
//! the submission checker uses for it, and then carried as a value: the
//! QDL, the sample store and the sut-node all ask it the same questions,
//! so they cannot disagree about aliases or codecs.
//!
//! The names come in four families:
//!
//! * the canonical name, the model name of mlperf.conf (`resnet50`,
//!   `llama2-70b`);
//! * an accuracy target as a suffix, for benchmarks the rules run at two
//!   targets (`bert-99`, `3d-unet-99.9`);
//! * the interactive variant of an LLM, run as Server with the
//!   `<model>-interactive` keys of mlperf.conf (`llama2-70b-interactive`,
//!   also with a target: `llama2-70b-interactive-99.9`);
//! * the submission checker's spelling where it differs (`resnet`).

use std::fmt;

use crate::codec::Codec;
use crate::dtype::DType;

/// Which way data crosses the fabric.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Samples, from the QSL to the SUT (compressed by the QSL, untimed).
    Input,
    /// Responses, from the SUT back to the QDL (decompressed by the QDL,
    /// timed).
    Output,
}

impl Direction {
    /// Both directions, inputs first.
    pub const BOTH: [Direction; 2] = [Direction::Input, Direction::Output];

    /// `inputs` or `outputs`, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Direction::Input => "inputs",
            Direction::Output => "outputs",
        }
    }
}

/// Token counts over a data set: approximate mean, smallest and largest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenCounts {
    /// Mean count.
    pub mean: u32,
    /// Smallest count.
    pub min: u32,
    /// Largest count.
    pub max: u32,
}

impl TokenCounts {
    /// Always `n`.
    pub const fn fixed(n: u32) -> TokenCounts {
        TokenCounts {
            mean: n,
            min: n,
            max: n,
        }
    }

    /// The count at `u` (in `[0, 1)`) of a distribution on `[min, max]`
    /// whose mean is `mean`: `min + (max - min) * u^k`, with `k` chosen so
    /// that the mean comes out right. `k = 1` (a mean halfway) is uniform;
    /// a mean near `min` gives the long tail of real prompt and answer
    /// lengths. Uniform `u` in, a count in `[min, max]` out.
    pub fn at(&self, u: f64) -> u32 {
        let (min, max) = (self.min.min(self.max), self.max.max(self.min));
        if min == max {
            return min;
        }
        let span = f64::from(max - min);
        let above = f64::from(self.mean.clamp(min, max) - min);
        let value = if above <= 0.0 {
            0.0
        } else {
            // Mean of u^k is 1/(k+1).
            let k = span / above - 1.0;
            span * u.clamp(0.0, 1.0).powf(k)
        };
        (min + value.round() as u32).min(max)
    }

    /// A count drawn from 64 random bits (see [`TokenCounts::at`]).
    pub fn draw(&self, bits: u64) -> u32 {
        self.at((bits >> 11) as f64 / (1u64 << 53) as f64)
    }

    /// Whether `min <= mean <= max` and `min >= 1`.
    pub fn is_consistent(&self) -> bool {
        1 <= self.min && self.min <= self.mean && self.mean <= self.max
    }
}

/// What a benchmark that measures token latencies reads and writes, in
/// tokens. The figures are approximate: published statistics of each
/// reference data set (mean, shortest and longest prompt; mean and longest
/// answer of the reference model), rounded. They shape synthetic prompts
/// and the synthetic LLM backend's answers, not any result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenProfile {
    /// Prompt lengths. For inputs that are not token ids (Whisper's audio
    /// features) the positions the encoder fills for every sample.
    pub input: TokenCounts,
    /// Whether an input is the prompt's token ids, one element per token
    /// and unpadded (so its length is the prompt length).
    pub input_token_ids: bool,
    /// Answer lengths (n_tokens; at least 2, as time per output token
    /// needs).
    pub output: TokenCounts,
}

/// Inputs whose size varies from sample to sample the way the data set's
/// do: volumes of a varying number of slices (3D-UNet's KiTS19 cases). A
/// sample's shape is `[1, slices, slice...]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VolumeProfile {
    /// The shape of one slice.
    pub slice: &'static [usize],
    /// Slices per volume: mean, fewest and most.
    pub slices: TokenCounts,
}

impl VolumeProfile {
    /// The shape of the volume at `u` in `[0, 1)` (see [`TokenCounts::at`]).
    pub fn shape_at(&self, u: f64) -> Vec<usize> {
        let mut shape = vec![1, self.slices.at(u) as usize];
        shape.extend_from_slice(self.slice);
        shape
    }

    /// The shape of volume `index` of a data set drawn with `seed`: the
    /// draws follow a golden-ratio sequence, so even the first few dozen
    /// volumes (KiTS19 has 43) average close to the profile's mean.
    pub fn shape_of(&self, seed: u64, index: usize) -> Vec<usize> {
        const GOLDEN: f64 = 0.618_033_988_749_894_9;
        let offset = (seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) as f64 / (1u64 << 53) as f64;
        self.shape_at((offset + index as f64 * GOLDEN).fract())
    }

    /// Elements of one slice.
    pub fn slice_elements(&self) -> usize {
        self.slice.iter().product()
    }
}

/// One row of the table: what every name of one benchmark shares.
#[derive(Debug, PartialEq, Eq)]
pub struct BenchmarkSpec {
    /// The canonical name: the model name of mlperf.conf.
    pub name: &'static str,
    /// The name the submission checker uses, where it differs.
    pub checker_name: Option<&'static str>,
    /// Accuracy targets that may follow the name as a suffix (`99`,
    /// `99.9`); empty for benchmarks with a single target.
    pub accuracy_targets: &'static [&'static str],
    /// Whether the rules also run it as `<name>-interactive`.
    pub interactive: bool,
    /// Shape of one sample's input tensor (for token-id prompts, the
    /// longest prompt: the padded shape).
    pub shape: &'static [usize],
    /// Element type of that tensor.
    pub dtype: DType,
    /// Samples in the reference data set.
    pub total_sample_count: usize,
    /// Samples the reference QSL holds in memory at once
    /// (mlperf.conf's `performance_sample_count_override`).
    pub performance_sample_count: usize,
    /// Codecs the compression table allows for samples.
    pub input_codecs: &'static [Codec],
    /// Codecs the compression table allows for responses.
    pub output_codecs: &'static [Codec],
    /// Whether the LoadGen measures token latencies (time to first token
    /// and time per output token): `use_token_latencies = 1` in
    /// mlperf.conf. The SUT then sends a first token before each
    /// completion, and the completion's token count.
    pub token_latencies: bool,
    /// Prompt and answer lengths, for benchmarks with token latencies.
    pub tokens: Option<TokenProfile>,
    /// How input sizes vary, for benchmarks whose inputs are volumes of
    /// varying size (`shape` is then the largest).
    pub volumes: Option<VolumeProfile>,
    /// What a sample is, for `--help` and docs.
    pub note: &'static str,
}

/// No compression: what the rules allow where their table names no scheme.
const NONE: &[Codec] = &[Codec::None];
/// No compression, or lz4, the lossless codec netdiv offers (the working
/// group must still approve it for a submission).
const LOSSLESS: &[Codec] = &[Codec::None, Codec::Lz4];
/// The two accuracy targets of benchmarks run at 99 % and 99.9 % of the
/// reference.
const TWO_TARGETS: &[&str] = &["99", "99.9"];

/// What a row has unless it says otherwise: one name, one target, no
/// interactive variant, no compression, no token latencies.
const ROW: BenchmarkSpec = BenchmarkSpec {
    name: "",
    checker_name: None,
    accuracy_targets: &[],
    interactive: false,
    shape: &[1],
    dtype: DType::U8,
    total_sample_count: 1,
    performance_sample_count: 1,
    input_codecs: NONE,
    output_codecs: NONE,
    token_latencies: false,
    tokens: None,
    volumes: None,
    note: "",
};

/// The most slices of a synthetic KiTS19 volume.
const KITS19_MOST_SLICES: usize = 896;

/// Synthetic KiTS19 volumes: 256 x 256 slices, 503 on average, so a volume
/// averages 32,964,608 float32 elements, within 0.1 % of the 32,944,795 of
/// the rules' bandwidth table. The data set's own distribution is not
/// published beside it; the spread (192 to 896 slices, a long tail of
/// large cases) is an approximation.
const KITS19_VOLUMES: VolumeProfile = VolumeProfile {
    slice: &[256, 256],
    slices: TokenCounts {
        mean: 503,
        min: 192,
        max: KITS19_MOST_SLICES as u32,
    },
};

/// A token-id LLM's profile (approximate, see [`TokenProfile`]).
const fn llm(input: TokenCounts, output: TokenCounts) -> Option<TokenProfile> {
    Some(TokenProfile {
        input,
        input_token_ids: true,
        output,
    })
}

/// `TokenCounts` in a row.
const fn counts(mean: u32, min: u32, max: u32) -> TokenCounts {
    TokenCounts { mean, min, max }
}

/// Every benchmark the harness knows: each model of the official LoadGen
/// 6.0.17's mlperf.conf, and two of netdiv's own. The codecs follow the
/// compression table of the Network-division rules: lossless compression
/// of inputs for ResNet-50, RetinaNet, BERT, 3D-UNet and DLRMv2 (JPEG,
/// where allowed, is the data set's own encoding, not a netdiv codec); of
/// outputs only for 3D-UNet ("this rule applies both for the QSL
/// pre-processing and for post-processing function allowed in QDL"); none
/// for GPT-J, every LLM and SDXL, in either direction. Benchmarks the
/// table does not name get no compression: a scheme needs the Working
/// Group's approval.
///
/// Shapes of inputs the reference QSLs hold as more than one tensor, or as
/// media, are approximate (the note says so); token-id prompts are shown
/// at their longest.
pub const TABLE: &[BenchmarkSpec] = &[
    BenchmarkSpec {
        name: "resnet50",
        checker_name: Some("resnet"),
        shape: &[3, 224, 224],
        dtype: DType::U8,
        total_sample_count: 50000,
        performance_sample_count: 1024,
        input_codecs: LOSSLESS,
        note: "the int8 preprocessed ImageNet image (150528 bytes)",
        ..ROW
    },
    BenchmarkSpec {
        name: "retinanet",
        shape: &[3, 800, 800],
        dtype: DType::U8,
        total_sample_count: 24781,
        performance_sample_count: 64,
        input_codecs: LOSSLESS,
        note: "the preprocessed OpenImages image",
        ..ROW
    },
    BenchmarkSpec {
        name: "bert",
        accuracy_targets: TWO_TARGETS,
        shape: &[3, 384],
        dtype: DType::I32,
        total_sample_count: 10833,
        performance_sample_count: 10833,
        input_codecs: LOSSLESS,
        note: "input ids, input mask and segment ids of a SQuAD sequence",
        ..ROW
    },
    BenchmarkSpec {
        name: "3d-unet",
        accuracy_targets: TWO_TARGETS,
        shape: &[1, KITS19_MOST_SLICES, 256, 256],
        dtype: DType::F32,
        total_sample_count: 43,
        performance_sample_count: 43,
        input_codecs: LOSSLESS,
        output_codecs: LOSSLESS,
        volumes: Some(KITS19_VOLUMES),
        note:
            "one preprocessed KiTS19 CT volume, float32, of varying size: 1 x slices x 256 x 256, \
               192 to 896 slices averaging the rules' 32,944,795 elements (about 132 MB)",
        ..ROW
    },
    BenchmarkSpec {
        name: "dlrm-v2",
        accuracy_targets: TWO_TARGETS,
        shape: &[1, 39],
        dtype: DType::F32,
        total_sample_count: 204800,
        performance_sample_count: 204800,
        input_codecs: LOSSLESS,
        note: "dense + sparse features per sample; real queries carry many samples",
        ..ROW
    },
    BenchmarkSpec {
        name: "gptj",
        accuracy_targets: TWO_TARGETS,
        shape: &[1919],
        dtype: DType::I32,
        total_sample_count: 13368,
        performance_sample_count: 13368,
        note: "CNN/DailyMail prompt token ids, padded",
        ..ROW
    },
    BenchmarkSpec {
        name: "llama2-70b",
        accuracy_targets: TWO_TARGETS,
        interactive: true,
        shape: &[1024],
        dtype: DType::I32,
        total_sample_count: 24576,
        performance_sample_count: 24576,
        token_latencies: true,
        // OpenOrca: about 294 tokens in and 294 out (TOKENS_PER_SAMPLE).
        tokens: llm(counts(294, 8, 1024), counts(294, 2, 1024)),
        note: "OpenOrca prompt token ids, unpadded",
        ..ROW
    },
    BenchmarkSpec {
        name: "mixtral-8x7b",
        shape: &[2048],
        dtype: DType::I32,
        total_sample_count: 15000,
        performance_sample_count: 15000,
        token_latencies: true,
        // OpenOrca, GSM8K and MBXP mixed: about 700 in, 145 out.
        tokens: llm(counts(700, 8, 2048), counts(145, 2, 1024)),
        note: "OpenOrca/GSM8K/MBXP prompt token ids, unpadded",
        ..ROW
    },
    BenchmarkSpec {
        name: "llama3_1-405b",
        checker_name: Some("llama3.1-405b"),
        interactive: true,
        shape: &[20000],
        dtype: DType::I32,
        total_sample_count: 8313,
        performance_sample_count: 8313,
        token_latencies: true,
        // Long-context tasks: about 9400 in (up to 20000), 685 out.
        tokens: llm(counts(9400, 100, 20000), counts(685, 2, 2000)),
        note: "long-context prompt token ids, unpadded",
        ..ROW
    },
    BenchmarkSpec {
        name: "llama3_1-8b",
        checker_name: Some("llama3.1-8b"),
        interactive: true,
        shape: &[2048],
        dtype: DType::I32,
        total_sample_count: 13368,
        performance_sample_count: 13368,
        token_latencies: true,
        // CNN/DailyMail summaries: about 870 in, 100 out (at most 128).
        tokens: llm(counts(870, 64, 2048), counts(100, 2, 128)),
        note: "CNN/DailyMail prompt token ids, unpadded",
        ..ROW
    },
    BenchmarkSpec {
        name: "llama3_1-8b-edge",
        checker_name: Some("llama3.1-8b-edge"),
        shape: &[2048],
        dtype: DType::I32,
        total_sample_count: 5000,
        performance_sample_count: 5000,
        token_latencies: true,
        tokens: llm(counts(870, 64, 2048), counts(100, 2, 128)),
        note: "CNN/DailyMail prompt token ids (5000-sample edge set), unpadded",
        ..ROW
    },
    BenchmarkSpec {
        name: "deepseek-r1",
        interactive: true,
        shape: &[4096],
        dtype: DType::I32,
        total_sample_count: 4388,
        performance_sample_count: 4388,
        token_latencies: true,
        // Math, science and code questions; long reasoning answers
        // (about 3890 tokens, up to 20000).
        tokens: llm(counts(800, 16, 4096), counts(3890, 2, 20000)),
        note: "reasoning prompt token ids, unpadded",
        ..ROW
    },
    BenchmarkSpec {
        name: "gpt-oss-120b",
        interactive: true,
        shape: &[8192],
        dtype: DType::I32,
        total_sample_count: 6396,
        performance_sample_count: 6396,
        token_latencies: true,
        // About 1500 in, 1300 out.
        tokens: llm(counts(1500, 64, 8192), counts(1300, 2, 10240)),
        note: "prompt token ids, unpadded (accuracy runs use 4395 samples)",
        ..ROW
    },
    BenchmarkSpec {
        name: "whisper",
        shape: &[128, 3000],
        dtype: DType::F32,
        total_sample_count: 1633,
        performance_sample_count: 1633,
        token_latencies: true,
        // 30 s of log-mel features fill the encoder's 1500 positions; the
        // transcript is about 110 tokens (the decoder holds 448).
        tokens: Some(TokenProfile {
            input: TokenCounts::fixed(1500),
            input_token_ids: false,
            output: counts(110, 2, 448),
        }),
        note: "LibriSpeech log-mel features of 30 s of audio (approximate)",
        ..ROW
    },
    BenchmarkSpec {
        name: "stable-diffusion-xl",
        shape: &[77],
        dtype: DType::I32,
        total_sample_count: 5000,
        performance_sample_count: 5000,
        note: "COCO caption prompt token ids",
        ..ROW
    },
    BenchmarkSpec {
        name: "qwen3-vl-235b-a22b",
        shape: &[3, 448, 448],
        dtype: DType::U8,
        total_sample_count: 48289,
        performance_sample_count: 48289,
        note: "a product image for classification; the text prompt is fixed (approximate)",
        ..ROW
    },
    BenchmarkSpec {
        name: "wan-2.2-t2v-a14b",
        shape: &[512],
        dtype: DType::I32,
        total_sample_count: 248,
        performance_sample_count: 248,
        note: "text-to-video prompt token ids, padded (approximate)",
        ..ROW
    },
    BenchmarkSpec {
        name: "rgat",
        shape: &[1],
        dtype: DType::I64,
        total_sample_count: 788379,
        performance_sample_count: 788379,
        note: "one IGBH paper node id; the SUT samples its neighbourhood",
        ..ROW
    },
    BenchmarkSpec {
        name: "dlrm-v3",
        shape: &[4096],
        dtype: DType::I64,
        total_sample_count: 349823,
        performance_sample_count: 349823,
        note: "a user's history of item ids, padded (approximate)",
        ..ROW
    },
    BenchmarkSpec {
        name: "e2e-rag-qna",
        shape: &[4096],
        dtype: DType::I32,
        total_sample_count: 824,
        performance_sample_count: 824,
        note: "a FRAMES question for the end-to-end RAG pipeline, token ids, padded (approximate; \
               the pipeline's LLM calls are the SUT's)",
        ..ROW
    },
    BenchmarkSpec {
        name: "e2e-rag-db",
        shape: &[65536],
        dtype: DType::U8,
        total_sample_count: 2515,
        performance_sample_count: 2515,
        note: "a document for the RAG vector database to ingest, text bytes (approximate)",
        ..ROW
    },
    BenchmarkSpec {
        name: "pointpainting",
        shape: &[65536, 8],
        dtype: DType::F32,
        total_sample_count: 39987,
        performance_sample_count: 1024,
        note: "Waymo lidar points with painted class scores (approximate)",
        ..ROW
    },
    BenchmarkSpec {
        name: "yolo",
        accuracy_targets: &["95", "99"],
        shape: &[3, 640, 640],
        dtype: DType::U8,
        total_sample_count: 1525,
        performance_sample_count: 64,
        note: "the preprocessed COCO image",
        ..ROW
    },
    BenchmarkSpec {
        name: "rnnt",
        shape: &[240000],
        dtype: DType::F32,
        total_sample_count: 2513,
        performance_sample_count: 2513,
        note: "retired: a LibriSpeech waveform, 16 kHz, padded to 15 s (approximate)",
        ..ROW
    },
    BenchmarkSpec {
        name: "dlrm",
        shape: &[1, 39],
        dtype: DType::F32,
        total_sample_count: 204800,
        performance_sample_count: 204800,
        note: "retired: Criteo Terabyte dense + sparse features",
        ..ROW
    },
    BenchmarkSpec {
        name: "ssd-mobilenet",
        shape: &[3, 300, 300],
        dtype: DType::U8,
        total_sample_count: 5000,
        performance_sample_count: 256,
        note: "retired: the preprocessed COCO image",
        ..ROW
    },
    BenchmarkSpec {
        name: "digits",
        shape: &[64],
        dtype: DType::U8,
        total_sample_count: 360,
        performance_sample_count: 360,
        note: "not MLPerf: scikit-learn's 8x8 digits (tests/data/digits), for end-to-end accuracy",
        ..ROW
    },
    BenchmarkSpec {
        name: "null",
        shape: &[1],
        dtype: DType::I32,
        total_sample_count: 1024,
        performance_sample_count: 1024,
        note: "no model: 4-byte samples for measuring the harness",
        ..ROW
    },
];

/// The suffix of the interactive variant.
const INTERACTIVE: &str = "-interactive";

/// A benchmark as named: its row of the table, and the accuracy target
/// and variant the name chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Benchmark {
    spec: &'static BenchmarkSpec,
    accuracy_target: Option<&'static str>,
    interactive: bool,
}

/// Why a name is not a benchmark.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BenchmarkError {
    /// No benchmark has this name in any spelling.
    #[error(
        "unknown benchmark {name:?} (known: {}; a name may end in its accuracy target, \
         e.g. bert-99.9, or -interactive for {})",
        known_names(),
        interactive_names()
    )]
    Unknown {
        /// The name as given.
        name: String,
    },
    /// The benchmark exists but has no such accuracy target.
    #[error("benchmark {benchmark} has no accuracy target {target} ({})", targets_text(.targets))]
    NoSuchTarget {
        /// The canonical name.
        benchmark: &'static str,
        /// The suffix as given.
        target: String,
        /// The targets it has.
        targets: &'static [&'static str],
    },
    /// The benchmark has no interactive variant.
    #[error("benchmark {benchmark} has no interactive variant")]
    NotInteractive {
        /// The canonical name.
        benchmark: &'static str,
    },
}

/// A codec the rules do not allow for a benchmark in one direction.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("the rules allow no {codec} {} for {benchmark} (allowed: {})", .direction.name(), codec_names(.allowed))]
pub struct CodecNotAllowed {
    /// The benchmark as named.
    pub benchmark: String,
    /// The direction.
    pub direction: Direction,
    /// The refused codec's name.
    pub codec: &'static str,
    /// What is allowed instead.
    pub allowed: &'static [Codec],
}

fn known_names() -> String {
    TABLE.iter().map(|b| b.name).collect::<Vec<_>>().join(", ")
}

fn interactive_names() -> String {
    TABLE
        .iter()
        .filter(|b| b.interactive)
        .map(|b| b.name)
        .collect::<Vec<_>>()
        .join(", ")
}

fn targets_text(targets: &[&str]) -> String {
    if targets.is_empty() {
        "it has a single target: leave the suffix off".into()
    } else {
        format!("its targets: {}", targets.join(", "))
    }
}

/// `none, lz4`.
pub fn codec_names(codecs: &[Codec]) -> String {
    codecs
        .iter()
        .map(|c| c.name())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Benchmark {
    /// Parses any name of a benchmark (see the module docs for the
    /// families).
    pub fn parse(name: &str) -> Result<Benchmark, BenchmarkError> {
        let unknown = || BenchmarkError::Unknown { name: name.into() };
        // Longest match first, so `llama2-70b-interactive-99` is not read
        // as a benchmark called `llama2-70b-interactive`.
        let (spec, rest) = TABLE
            .iter()
            .flat_map(|spec| {
                [Some(spec.name), spec.checker_name]
                    .into_iter()
                    .flatten()
                    .filter_map(move |n| name.strip_prefix(n).map(|rest| (spec, rest)))
            })
            .filter(|(_, rest)| rest.is_empty() || rest.starts_with('-'))
            .min_by_key(|(_, rest)| rest.len())
            .ok_or_else(unknown)?;
        let (interactive, rest) = match rest.strip_prefix(INTERACTIVE) {
            Some(rest) => (true, rest),
            None => (false, rest),
        };
        if interactive && !spec.interactive {
            return Err(BenchmarkError::NotInteractive {
                benchmark: spec.name,
            });
        }
        let accuracy_target = match rest.strip_prefix('-') {
            None if rest.is_empty() => None,
            None => return Err(unknown()),
            Some(target) => Some(
                spec.accuracy_targets
                    .iter()
                    .copied()
                    .find(|t| *t == target)
                    .ok_or_else(|| {
                        // A suffix that is not a number is a misspelt name.
                        if target.parse::<f64>().is_err() {
                            return unknown();
                        }
                        BenchmarkError::NoSuchTarget {
                            benchmark: spec.name,
                            target: target.into(),
                            targets: spec.accuracy_targets,
                        }
                    })?,
            ),
        };
        Ok(Benchmark {
            spec,
            accuracy_target,
            interactive,
        })
    }

    /// Its row of the table.
    pub fn spec(&self) -> &'static BenchmarkSpec {
        self.spec
    }

    /// The canonical name (aliases resolved, no target or variant).
    pub fn name(&self) -> &'static str {
        self.spec.name
    }

    /// The accuracy target the name chose, if any.
    pub fn accuracy_target(&self) -> Option<&'static str> {
        self.accuracy_target
    }

    /// Whether this is the interactive variant.
    pub fn is_interactive(&self) -> bool {
        self.interactive
    }

    /// The model name whose `model.scenario.key` lines of mlperf.conf and
    /// user.conf apply: the canonical name, with `-interactive` for the
    /// interactive variant.
    pub fn config_model(&self) -> String {
        if self.interactive {
            format!("{}{INTERACTIVE}", self.spec.name)
        } else {
            self.spec.name.into()
        }
    }

    /// Whether the LoadGen measures token latencies for it (the LLM
    /// benchmarks and Whisper): the SUT sends each sample's first token
    /// ahead of its completion, and the completion's token count.
    pub fn uses_token_latencies(&self) -> bool {
        self.spec.token_latencies
    }

    /// Prompt and answer lengths of a benchmark with token latencies.
    pub fn token_profile(&self) -> Option<&'static TokenProfile> {
        self.spec.tokens.as_ref()
    }

    /// Prompt lengths, for benchmarks whose inputs are unpadded token-id
    /// arrays (one element per prompt token).
    pub fn prompt_tokens(&self) -> Option<TokenCounts> {
        self.token_profile()
            .filter(|p| p.input_token_ids)
            .map(|p| p.input)
    }

    /// How its input sizes vary, for volumes of varying size (3D-UNet).
    pub fn volumes(&self) -> Option<&'static VolumeProfile> {
        self.spec.volumes.as_ref()
    }

    /// Bytes of its largest input sample (the shape of the table is the
    /// largest: padded prompts, the largest volume).
    pub fn largest_sample_bytes(&self) -> u64 {
        self.spec.shape.iter().product::<usize>() as u64 * self.spec.dtype.size() as u64
    }

    /// Whether the two names share one row: the same samples and codecs.
    pub fn same_benchmark(&self, other: &Benchmark) -> bool {
        std::ptr::eq(self.spec, other.spec)
    }

    /// The codecs the rules allow in `direction`.
    pub fn codecs(&self, direction: Direction) -> &'static [Codec] {
        match direction {
            Direction::Input => self.spec.input_codecs,
            Direction::Output => self.spec.output_codecs,
        }
    }

    /// `Ok` if the rules allow `codec` in `direction`, else an error that
    /// names the benchmark, the direction and what is allowed.
    pub fn check_codec(&self, direction: Direction, codec: Codec) -> Result<(), CodecNotAllowed> {
        let allowed = self.codecs(direction);
        if allowed.contains(&codec) {
            Ok(())
        } else {
            Err(CodecNotAllowed {
                benchmark: self.to_string(),
                direction,
                codec: codec.name(),
                allowed,
            })
        }
    }
}

impl fmt::Display for Benchmark {
    /// The canonical spelling of the name as given: `bert-99.9`,
    /// `llama2-70b-interactive`, `resnet50` (for `resnet`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.spec.name)?;
        if self.interactive {
            f.write_str(INTERACTIVE)?;
        }
        if let Some(target) = self.accuracy_target {
            write!(f, "-{target}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Benchmark {
    type Err = BenchmarkError;
    fn from_str(s: &str) -> Result<Self, BenchmarkError> {
        Benchmark::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mlperf.conf `loadgen-node` embeds (the official 6.0.17 values).
    const MLPERF_CONF: &str =
        include_str!("../../loadgen-node/src/engine/settings/mlperf-conf/v6.1.conf");

    fn parse(name: &str) -> Benchmark {
        Benchmark::parse(name).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// `(model, scenario, key, value)` of every line of mlperf.conf that
    /// names a model (not `*`).
    fn conf_lines() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
        MLPERF_CONF
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| {
                let (key, value) = l.split_once('=').expect("key = value");
                // Model names hold dots of their own (none today), so split
                // the scenario and key off the right.
                let mut parts = key.trim().rsplitn(3, '.');
                let (k, scenario, model) = (
                    parts.next().unwrap(),
                    parts.next().unwrap(),
                    parts.next().unwrap(),
                );
                (model, scenario, k, value.trim())
            })
            .filter(|(model, ..)| *model != "*")
            .collect()
    }

    #[test]
    fn canonical_names_parse_to_their_own_row() {
        for spec in TABLE {
            let b = parse(spec.name);
            assert_eq!((b.name(), b.to_string()), (spec.name, spec.name.into()));
            assert_eq!((b.accuracy_target(), b.is_interactive()), (None, false));
            assert_eq!(b.config_model(), spec.name);
        }
        let resnet = parse("resnet50").spec();
        assert_eq!(
            resnet.shape.iter().product::<usize>() * resnet.dtype.size(),
            150528
        );
    }

    #[test]
    fn every_model_of_mlperf_conf_is_a_benchmark() {
        let mut models: Vec<&str> = conf_lines().into_iter().map(|(m, ..)| m).collect();
        models.sort_unstable();
        models.dedup();
        assert!(models.len() >= 29, "{models:?}");
        for model in models {
            let b = parse(model);
            // Its settings are looked up under the very same name.
            assert_eq!(b.config_model(), model);
        }
    }

    #[test]
    fn token_latencies_and_sample_counts_follow_mlperf_conf() {
        let lines = conf_lines();
        for (model, _, key, value) in &lines {
            let b = parse(model);
            match *key {
                "use_token_latencies" => {
                    assert_eq!(b.uses_token_latencies(), *value == "1", "{model}");
                }
                // 0 means the whole data set (3D-UNet).
                "performance_sample_count_override" if *value != "0" => {
                    assert_eq!(
                        b.spec().performance_sample_count.to_string(),
                        *value,
                        "{model}"
                    );
                }
                _ => {}
            }
        }
        let mut token_models: Vec<String> = TABLE
            .iter()
            .filter(|s| s.token_latencies)
            .map(|s| s.name.into())
            .collect();
        token_models.sort();
        let mut in_conf: Vec<String> = lines
            .iter()
            .filter(|(m, _, k, v)| {
                *k == "use_token_latencies" && *v == "1" && !m.ends_with(INTERACTIVE)
            })
            .map(|(m, ..)| m.to_string())
            .collect();
        in_conf.sort();
        assert_eq!(token_models, in_conf);
        // Offline runs every sample of these data sets.
        for (model, scenario, key, value) in &lines {
            if *scenario == "Offline" && *key == "min_query_count" {
                let b = parse(model);
                let total = b.spec().total_sample_count;
                assert!(
                    value.parse::<usize>().unwrap() >= total.min(24576),
                    "{model}: {value} < {total}"
                );
            }
        }
    }

    #[test]
    fn accuracy_target_family() {
        for (name, canonical, target) in [
            ("bert-99", "bert", "99"),
            ("bert-99.9", "bert", "99.9"),
            ("3d-unet-99", "3d-unet", "99"),
            ("3d-unet-99.9", "3d-unet", "99.9"),
            ("dlrm-v2-99.9", "dlrm-v2", "99.9"),
            ("gptj-99", "gptj", "99"),
            ("llama2-70b-99.9", "llama2-70b", "99.9"),
            ("yolo-95", "yolo", "95"),
            ("yolo-99", "yolo", "99"),
        ] {
            let b = parse(name);
            assert_eq!(b.name(), canonical, "{name}");
            assert_eq!(b.accuracy_target(), Some(target), "{name}");
            assert_eq!(b.to_string(), name);
            // The target does not change which settings apply.
            assert_eq!(b.config_model(), canonical);
            assert!(b.same_benchmark(&parse(canonical)));
        }
        assert_eq!(
            Benchmark::parse("bert-98").unwrap_err().to_string(),
            "benchmark bert has no accuracy target 98 (its targets: 99, 99.9)"
        );
        assert_eq!(
            Benchmark::parse("resnet50-99").unwrap_err().to_string(),
            "benchmark resnet50 has no accuracy target 99 (it has a single target: leave the suffix off)"
        );
        assert!(matches!(
            Benchmark::parse("llama3_1-405b-99"),
            Err(BenchmarkError::NoSuchTarget { .. })
        ));
    }

    #[test]
    fn interactive_family() {
        let b = parse("llama2-70b-interactive");
        assert_eq!(b.name(), "llama2-70b");
        assert!(b.is_interactive());
        assert_eq!(b.config_model(), "llama2-70b-interactive");
        assert_eq!(b.to_string(), "llama2-70b-interactive");
        let b = parse("llama2-70b-interactive-99.9");
        assert_eq!(
            (b.is_interactive(), b.accuracy_target()),
            (true, Some("99.9"))
        );
        assert_eq!(b.config_model(), "llama2-70b-interactive");
        assert!(b.same_benchmark(&parse("llama2-70b")));
        for model in [
            "llama3_1-405b",
            "llama3_1-8b",
            "deepseek-r1",
            "gpt-oss-120b",
        ] {
            let name = format!("{model}-interactive");
            let b = parse(&name);
            assert_eq!((b.name(), b.is_interactive()), (model, true));
            assert_eq!(b.config_model(), name);
            assert!(b.uses_token_latencies(), "{name}");
        }
        assert_eq!(
            Benchmark::parse("bert-interactive").unwrap_err(),
            BenchmarkError::NotInteractive { benchmark: "bert" }
        );
        assert_eq!(
            Benchmark::parse("llama3_1-8b-edge-interactive").unwrap_err(),
            BenchmarkError::NotInteractive {
                benchmark: "llama3_1-8b-edge"
            }
        );
    }

    #[test]
    fn checker_spelling_family() {
        let b = parse("resnet");
        assert_eq!((b.name(), b.to_string()), ("resnet50", "resnet50".into()));
        assert!(b.same_benchmark(&parse("resnet50")));
        for (checker, config) in [
            ("llama3.1-8b", "llama3_1-8b"),
            ("llama3.1-405b", "llama3_1-405b"),
            ("llama3.1-8b-edge", "llama3_1-8b-edge"),
            ("llama3.1-8b-interactive", "llama3_1-8b-interactive"),
            ("llama3.1-405b-interactive", "llama3_1-405b-interactive"),
        ] {
            let b = parse(checker);
            // The settings stay under mlperf.conf's spelling.
            assert_eq!(b.config_model(), config, "{checker}");
            assert_eq!(b.to_string(), config, "{checker}");
            assert_eq!(b, parse(config), "{checker}");
        }
        // The edge set is its own benchmark, not the 8B with a suffix.
        assert!(!parse("llama3.1-8b-edge").same_benchmark(&parse("llama3.1-8b")));
    }

    #[test]
    fn unknown_names_list_the_known_ones() {
        for name in [
            "resnet5",
            "resnet500",
            "bert-large",
            "bert-",
            "",
            "llama2",
            "llama3.1",
            "llama3_1-8b-edgy",
        ] {
            let e = Benchmark::parse(name).unwrap_err();
            assert!(matches!(e, BenchmarkError::Unknown { .. }), "{name}: {e}");
            let text = e.to_string();
            assert!(
                text.contains("known: resnet50, retinanet, bert, 3d-unet,"),
                "{text}"
            );
            assert!(
                text.contains("-interactive for llama2-70b, llama3_1-405b, llama3_1-8b, deepseek-r1, gpt-oss-120b)"),
                "{text}"
            );
        }
    }

    #[test]
    fn codecs_follow_the_rules_table_per_direction() {
        let lz4_in = ["resnet50", "retinanet", "bert", "3d-unet", "dlrm-v2"];
        let lz4_out = ["3d-unet"];
        for spec in TABLE {
            let b = parse(spec.name);
            for (direction, list) in [
                (Direction::Input, &lz4_in[..]),
                (Direction::Output, &lz4_out),
            ] {
                assert!(b.check_codec(direction, Codec::None).is_ok());
                let lz4 = b.check_codec(direction, Codec::Lz4);
                assert_eq!(
                    lz4.is_ok(),
                    list.contains(&spec.name),
                    "{} {direction:?}",
                    spec.name
                );
            }
        }
        // An alias gets exactly what its benchmark gets.
        assert_eq!(
            parse("3d-unet-99").codecs(Direction::Output),
            [Codec::None, Codec::Lz4]
        );
        assert_eq!(
            parse("resnet")
                .check_codec(Direction::Output, Codec::Lz4)
                .unwrap_err()
                .to_string(),
            "the rules allow no lz4 outputs for resnet50 (allowed: none)"
        );
        assert_eq!(
            parse("llama3.1-405b-interactive")
                .check_codec(Direction::Input, Codec::Lz4)
                .unwrap_err()
                .to_string(),
            "the rules allow no lz4 inputs for llama3_1-405b-interactive (allowed: none)"
        );
    }

    #[test]
    fn token_models_stream_token_ids_without_compression() {
        let token_ids = [
            "llama2-70b",
            "mixtral-8x7b",
            "llama3_1-405b",
            "llama3_1-8b",
            "llama3_1-8b-edge",
            "deepseek-r1",
            "gpt-oss-120b",
        ];
        for spec in TABLE {
            let b = parse(spec.name);
            assert_eq!(spec.token_latencies, spec.tokens.is_some(), "{}", spec.name);
            assert_eq!(
                b.prompt_tokens().is_some(),
                token_ids.contains(&spec.name),
                "{}",
                spec.name
            );
            let Some(profile) = b.token_profile() else {
                continue;
            };
            assert!(profile.input.is_consistent(), "{}", spec.name);
            assert!(profile.output.is_consistent(), "{}", spec.name);
            // n_tokens of 1 has no time per output token.
            assert!(profile.output.min >= 2, "{}", spec.name);
            assert_eq!(
                (b.codecs(Direction::Input), b.codecs(Direction::Output)),
                (NONE, NONE)
            );
            if profile.input_token_ids {
                assert!(
                    matches!(spec.dtype, DType::I32 | DType::I64),
                    "{}",
                    spec.name
                );
                // The padded shape holds the longest prompt.
                assert_eq!(spec.shape, [profile.input.max as usize], "{}", spec.name);
            }
        }
        assert!(parse("whisper").uses_token_latencies());
        assert_eq!(parse("whisper").prompt_tokens(), None);
        assert!(!parse("gptj").uses_token_latencies());
        assert!(!parse("qwen3-vl-235b-a22b").uses_token_latencies());
    }

    #[test]
    fn token_counts_keep_their_bounds_and_mean() {
        let profile = parse("llama2-70b").token_profile().unwrap().output;
        let n = 100_000;
        let draws: Vec<u32> = (0..n)
            .map(|i| profile.at((i as f64 + 0.5) / n as f64))
            .collect();
        assert!(draws.iter().all(|d| (2..=1024).contains(d)));
        let mean = draws.iter().map(|&d| f64::from(d)).sum::<f64>() / n as f64;
        assert!((mean - 294.0).abs() < 3.0, "{mean}");
        assert_eq!((profile.at(0.0), profile.at(1.0)), (2, 1024));
        // A mean halfway is uniform; a fixed count is fixed.
        let uniform = counts(150, 100, 200);
        assert_eq!(uniform.at(0.25), 125);
        assert_eq!(TokenCounts::fixed(7).draw(u64::MAX), 7);
        // Means outside the range pin to an end.
        assert_eq!(counts(1, 10, 20).at(0.9), 10);
        assert_eq!(counts(50, 10, 20).at(0.1), 20);
        assert_eq!(counts(5, 10, 20).draw(0), 10);
    }

    #[test]
    fn table_is_consistent() {
        for (i, b) in TABLE.iter().enumerate() {
            assert!(!b.name.is_empty() && !b.note.is_empty());
            assert!(
                b.performance_sample_count <= b.total_sample_count,
                "{}",
                b.name
            );
            assert!(b.shape.iter().all(|&d| d > 0), "{}", b.name);
            assert!(b.input_codecs.contains(&Codec::None), "{}", b.name);
            assert!(b.output_codecs.contains(&Codec::None), "{}", b.name);
            assert!(TABLE[..i].iter().all(|o| o.name != b.name), "{}", b.name);
        }
    }

    /// 3D-UNet's synthetic volumes vary in size and the 43 of the data set
    /// average the rules' 32,944,795 elements, for any seed.
    #[test]
    fn kits19_volumes_average_the_rules_figure() {
        let unet = parse("3d-unet-99");
        let volumes = unet.volumes().expect("3D-UNet has volumes");
        for seed in [0, 1, 42] {
            let sizes: Vec<usize> = (0..43)
                .map(|i| volumes.shape_of(seed, i).iter().product())
                .collect();
            let mean = sizes.iter().sum::<usize>() as f64 / 43.0;
            assert!(
                (mean / 32_944_795.0 - 1.0).abs() < 0.03,
                "seed {seed}: mean {mean} elements"
            );
            let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            assert!(
                *max > 2 * *min,
                "seed {seed}: sizes do not vary: {min}..{max}"
            );
            assert!(*max as u64 * 4 <= unet.largest_sample_bytes());
        }
        assert_eq!(volumes.shape_of(3, 7), volumes.shape_of(3, 7));
        assert_eq!(unet.largest_sample_bytes(), 896 * 256 * 256 * 4);
    }
}
