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
    /// Shape of one sample's input tensor.
    pub shape: &'static [usize],
    /// Element type of that tensor.
    pub dtype: DType,
    /// Samples in the reference data set.
    pub total_sample_count: usize,
    /// Samples the reference QSL holds in memory at once.
    pub performance_sample_count: usize,
    /// Codecs the compression table allows for samples.
    pub input_codecs: &'static [Codec],
    /// Codecs the compression table allows for responses.
    pub output_codecs: &'static [Codec],
    /// What a sample is, for `--help` and docs.
    pub note: &'static str,
}

/// No compression: what the rules allow where their table names no scheme.
const NONE: &[Codec] = &[Codec::None];
/// No compression, or the approved lossless codec.
const LOSSLESS: &[Codec] = &[Codec::None, Codec::Lz4];
/// The two accuracy targets of benchmarks run at 99 % and 99.9 % of the
/// reference.
const TWO_TARGETS: &[&str] = &["99", "99.9"];

/// Every benchmark the harness knows. The codecs follow the compression
/// table of the Network-division rules: lossless compression of inputs for
/// ResNet-50, RetinaNet, BERT, 3D-UNet and DLRMv2 (JPEG, where allowed, is
/// the data set's own encoding, not a netdiv codec); of outputs only for
/// 3D-UNet ("this rule applies both for the QSL pre-processing and for
/// post-processing function allowed in QDL"); none for GPT-J, the LLMs and
/// SDXL. Benchmarks the table does not name get no compression: a scheme
/// needs the Working Group's approval.
pub const TABLE: &[BenchmarkSpec] = &[
    BenchmarkSpec {
        name: "resnet50",
        checker_name: Some("resnet"),
        accuracy_targets: &[],
        interactive: false,
        shape: &[3, 224, 224],
        dtype: DType::U8,
        total_sample_count: 50000,
        performance_sample_count: 1024,
        input_codecs: LOSSLESS,
        output_codecs: NONE,
        note: "the int8 preprocessed ImageNet image (150528 bytes)",
    },
    BenchmarkSpec {
        name: "retinanet",
        checker_name: None,
        accuracy_targets: &[],
        interactive: false,
        shape: &[3, 800, 800],
        dtype: DType::U8,
        total_sample_count: 24781,
        performance_sample_count: 64,
        input_codecs: LOSSLESS,
        output_codecs: NONE,
        note: "the preprocessed OpenImages image",
    },
    BenchmarkSpec {
        name: "bert",
        checker_name: None,
        accuracy_targets: TWO_TARGETS,
        interactive: false,
        shape: &[3, 384],
        dtype: DType::I32,
        total_sample_count: 10833,
        performance_sample_count: 10833,
        input_codecs: LOSSLESS,
        output_codecs: NONE,
        note: "input ids, input mask and segment ids of a SQuAD sequence",
    },
    BenchmarkSpec {
        name: "3d-unet",
        checker_name: None,
        accuracy_targets: TWO_TARGETS,
        interactive: false,
        shape: &[1, 128, 128, 128],
        dtype: DType::F32,
        total_sample_count: 43,
        performance_sample_count: 43,
        input_codecs: LOSSLESS,
        output_codecs: LOSSLESS,
        note: "one KiTS19 volume, shown at the 128^3 patch size",
    },
    BenchmarkSpec {
        name: "dlrm-v2",
        checker_name: None,
        accuracy_targets: TWO_TARGETS,
        interactive: false,
        shape: &[1, 39],
        dtype: DType::F32,
        total_sample_count: 204800,
        performance_sample_count: 204800,
        input_codecs: LOSSLESS,
        output_codecs: NONE,
        note: "dense + sparse features per sample; real queries carry many samples",
    },
    BenchmarkSpec {
        name: "gptj",
        checker_name: None,
        accuracy_targets: TWO_TARGETS,
        interactive: false,
        shape: &[1919],
        dtype: DType::I32,
        total_sample_count: 13368,
        performance_sample_count: 13368,
        input_codecs: NONE,
        output_codecs: NONE,
        note: "CNN/DailyMail prompt token ids, padded",
    },
    BenchmarkSpec {
        name: "llama2-70b",
        checker_name: None,
        accuracy_targets: TWO_TARGETS,
        interactive: true,
        shape: &[1024],
        dtype: DType::I32,
        total_sample_count: 24576,
        performance_sample_count: 24576,
        input_codecs: NONE,
        output_codecs: NONE,
        note: "OpenOrca prompt token ids, padded",
    },
    BenchmarkSpec {
        name: "mixtral-8x7b",
        checker_name: None,
        accuracy_targets: &[],
        interactive: false,
        shape: &[2048],
        dtype: DType::I32,
        total_sample_count: 15000,
        performance_sample_count: 15000,
        input_codecs: NONE,
        output_codecs: NONE,
        note: "prompt token ids, padded",
    },
    BenchmarkSpec {
        name: "stable-diffusion-xl",
        checker_name: None,
        accuracy_targets: &[],
        interactive: false,
        shape: &[77],
        dtype: DType::I32,
        total_sample_count: 5000,
        performance_sample_count: 5000,
        input_codecs: NONE,
        output_codecs: NONE,
        note: "COCO caption prompt token ids",
    },
    BenchmarkSpec {
        name: "digits",
        checker_name: None,
        accuracy_targets: &[],
        interactive: false,
        shape: &[64],
        dtype: DType::U8,
        total_sample_count: 360,
        performance_sample_count: 360,
        input_codecs: NONE,
        output_codecs: NONE,
        note: "not MLPerf: scikit-learn's 8x8 digits (tests/data/digits), for end-to-end accuracy",
    },
    BenchmarkSpec {
        name: "null",
        checker_name: None,
        accuracy_targets: &[],
        interactive: false,
        shape: &[1],
        dtype: DType::I32,
        total_sample_count: 1024,
        performance_sample_count: 1024,
        input_codecs: NONE,
        output_codecs: NONE,
        note: "no model: 4-byte samples for measuring the harness",
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
         e.g. bert-99.9, or -interactive for llama2-70b)",
        known_names()
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

    fn parse(name: &str) -> Benchmark {
        Benchmark::parse(name).unwrap_or_else(|e| panic!("{name}: {e}"))
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
    fn accuracy_target_family() {
        for (name, canonical, target) in [
            ("bert-99", "bert", "99"),
            ("bert-99.9", "bert", "99.9"),
            ("3d-unet-99", "3d-unet", "99"),
            ("3d-unet-99.9", "3d-unet", "99.9"),
            ("dlrm-v2-99.9", "dlrm-v2", "99.9"),
            ("gptj-99", "gptj", "99"),
            ("llama2-70b-99.9", "llama2-70b", "99.9"),
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
        assert_eq!(
            Benchmark::parse("bert-interactive").unwrap_err(),
            BenchmarkError::NotInteractive { benchmark: "bert" }
        );
    }

    #[test]
    fn checker_spelling_family() {
        let b = parse("resnet");
        assert_eq!((b.name(), b.to_string()), ("resnet50", "resnet50".into()));
        assert!(b.same_benchmark(&parse("resnet50")));
    }

    #[test]
    fn unknown_names_list_the_known_ones() {
        for name in ["resnet5", "resnet500", "bert-large", "bert-", "", "llama2"] {
            let e = Benchmark::parse(name).unwrap_err();
            assert!(matches!(e, BenchmarkError::Unknown { .. }), "{name}: {e}");
            let text = e.to_string();
            assert!(
                text.contains("known: resnet50, retinanet, bert, 3d-unet,"),
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
    }

    #[test]
    fn table_is_consistent() {
        for (i, b) in TABLE.iter().enumerate() {
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
}
