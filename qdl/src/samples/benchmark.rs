//! Per-benchmark defaults for the LoadGen node's QSL: each dataset's sample
//! as one preprocessed input tensor, and the sample counts of the MLPerf
//! Inference reference QSLs.

use netdiv_proto::codec::Codec;

use super::DType;

/// What the QSL of one benchmark holds by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BenchmarkDefaults {
    /// The canonical name (aliases resolve to it).
    pub name: &'static str,
    pub shape: &'static [usize],
    pub dtype: DType,
    pub total_sample_count: usize,
    pub performance_sample_count: usize,
    pub note: &'static str,
}

/// Every benchmark the harness knows, by canonical name.
pub const BENCHMARKS: &[BenchmarkDefaults] = &[
    BenchmarkDefaults {
        name: "resnet50",
        shape: &[3, 224, 224],
        dtype: DType::U8,
        total_sample_count: 50000,
        performance_sample_count: 1024,
        note: "the int8 preprocessed ImageNet image (150528 bytes)",
    },
    BenchmarkDefaults {
        name: "retinanet",
        shape: &[3, 800, 800],
        dtype: DType::U8,
        total_sample_count: 24781,
        performance_sample_count: 64,
        note: "the preprocessed OpenImages image",
    },
    BenchmarkDefaults {
        name: "bert",
        shape: &[3, 384],
        dtype: DType::I32,
        total_sample_count: 10833,
        performance_sample_count: 10833,
        note: "input ids, input mask and segment ids of a SQuAD sequence",
    },
    BenchmarkDefaults {
        name: "3d-unet",
        shape: &[1, 128, 128, 128],
        dtype: DType::F32,
        total_sample_count: 43,
        performance_sample_count: 43,
        note: "one KiTS19 volume, shown at the 128^3 patch size",
    },
    BenchmarkDefaults {
        name: "dlrm-v2",
        shape: &[1, 39],
        dtype: DType::F32,
        total_sample_count: 204800,
        performance_sample_count: 204800,
        note: "dense + sparse features per sample; real queries carry many samples",
    },
    BenchmarkDefaults {
        name: "gptj",
        shape: &[1919],
        dtype: DType::I32,
        total_sample_count: 13368,
        performance_sample_count: 13368,
        note: "CNN/DailyMail prompt token ids, padded",
    },
    BenchmarkDefaults {
        name: "llama2-70b",
        shape: &[1024],
        dtype: DType::I32,
        total_sample_count: 24576,
        performance_sample_count: 24576,
        note: "OpenOrca prompt token ids, padded",
    },
    BenchmarkDefaults {
        name: "mixtral-8x7b",
        shape: &[2048],
        dtype: DType::I32,
        total_sample_count: 15000,
        performance_sample_count: 15000,
        note: "prompt token ids, padded",
    },
    BenchmarkDefaults {
        name: "stable-diffusion-xl",
        shape: &[77],
        dtype: DType::I32,
        total_sample_count: 5000,
        performance_sample_count: 5000,
        note: "COCO caption prompt token ids",
    },
    BenchmarkDefaults {
        name: "digits",
        shape: &[64],
        dtype: DType::U8,
        total_sample_count: 360,
        performance_sample_count: 360,
        note: "not MLPerf: scikit-learn's 8x8 digits (tests/data/digits), for end-to-end accuracy",
    },
    BenchmarkDefaults {
        name: "null",
        shape: &[1],
        dtype: DType::I32,
        total_sample_count: 1024,
        performance_sample_count: 1024,
        note: "no model: 4-byte samples for measuring the harness",
    },
];

/// The accuracy-target names of the rules, mapped to the benchmark whose
/// inputs they share.
const ALIASES: &[(&str, &str)] = &[
    ("bert-99", "bert"),
    ("bert-99.9", "bert"),
    ("dlrm-v2-99", "dlrm-v2"),
    ("dlrm-v2-99.9", "dlrm-v2"),
    ("3d-unet-99", "3d-unet"),
    ("3d-unet-99.9", "3d-unet"),
    ("llama2-70b-99", "llama2-70b"),
    ("llama2-70b-99.9", "llama2-70b"),
    ("gptj-99", "gptj"),
    ("gptj-99.9", "gptj"),
];

/// The defaults of `name` or one of its aliases; the entry carries the
/// canonical name.
pub fn lookup(name: &str) -> Result<&'static BenchmarkDefaults, String> {
    let canonical = ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |&(_, canonical)| canonical);
    BENCHMARKS
        .iter()
        .find(|b| b.name == canonical)
        .ok_or_else(|| {
            let names: Vec<&str> = BENCHMARKS.iter().map(|b| b.name).collect();
            let aliases: Vec<&str> = ALIASES.iter().map(|(a, _)| *a).collect();
            format!(
                "unknown benchmark {name:?} (known: {}; aliases: {})",
                names.join(", "),
                aliases.join(", ")
            )
        })
}

/// The codecs the rules allow for the inputs of `name`. Aliases resolve to
/// their benchmark first, so `3d-unet-99` gets what `3d-unet` gets; unknown
/// names get what the rules give unnamed benchmarks (no compression).
pub fn allowed_codecs(name: &str) -> &'static [Codec] {
    let canonical = lookup(name).map_or(name, |b| b.name);
    netdiv_proto::codec::allowed_codecs(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::samples::tensor_bytes;

    #[test]
    fn lookup_by_name_and_alias() {
        let resnet = lookup("resnet50").unwrap();
        assert_eq!(tensor_bytes(resnet.shape, resnet.dtype), Some(150528));
        assert_eq!(
            (resnet.total_sample_count, resnet.performance_sample_count),
            (50000, 1024)
        );
        assert_eq!(lookup("bert-99.9").unwrap().name, "bert");
        assert_eq!(lookup("bert-99").unwrap(), lookup("bert").unwrap());
        assert_eq!(lookup("3d-unet-99").unwrap().name, "3d-unet");
        assert_eq!(lookup("gptj-99.9").unwrap().name, "gptj");
        let null = lookup("null").unwrap();
        assert_eq!(tensor_bytes(null.shape, null.dtype), Some(4));
    }

    #[test]
    fn unknown_names_list_the_known_ones() {
        let e = lookup("resnet").unwrap_err();
        assert!(
            e.starts_with("unknown benchmark \"resnet\" (known: resnet50, retinanet, bert,"),
            "{e}"
        );
        assert!(e.contains("stable-diffusion-xl, digits, null;"), "{e}");
        assert!(e.contains("aliases: bert-99, bert-99.9,"), "{e}");
    }

    #[test]
    fn table_is_consistent() {
        for (i, b) in BENCHMARKS.iter().enumerate() {
            assert!(
                b.performance_sample_count <= b.total_sample_count,
                "{}",
                b.name
            );
            assert!(
                tensor_bytes(b.shape, b.dtype).is_some_and(|n| n > 0),
                "{}",
                b.name
            );
            assert!(BENCHMARKS[..i].iter().all(|o| o.name != b.name));
        }
        for (alias, canonical) in ALIASES {
            assert_eq!(lookup(alias).unwrap().name, *canonical);
        }
    }

    #[test]
    fn codecs_follow_the_rules_table() {
        let lossless = [Codec::None, Codec::Lz4];
        assert_eq!(allowed_codecs("resnet50"), lossless);
        assert_eq!(allowed_codecs("3d-unet-99.9"), lossless);
        assert_eq!(allowed_codecs("bert-99"), lossless);
        assert_eq!(allowed_codecs("llama2-70b-99"), [Codec::None]);
        assert_eq!(allowed_codecs("stable-diffusion-xl"), [Codec::None]);
        assert_eq!(allowed_codecs("something-else"), [Codec::None]);
    }
}
