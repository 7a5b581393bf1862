//! The Datacenter suite of each round, as the submission checker of
//! mlcommons/inference (b66003e1) lists it: every benchmark by the
//! checker's name, its required and optional scenarios, and the compliance
//! tests the checker expects for it. Data only; `super` reads it.

use super::SuiteEntry;

/// Round v5.0.
pub(super) const V5_0: &[SuiteEntry] = &[
    SuiteEntry {
        model: "resnet",
        required: &["Server", "Offline"],
        optional: &[],
        compliance: &["TEST01", "TEST04"],
    },
    SuiteEntry {
        model: "retinanet",
        required: &["Server", "Offline"],
        optional: &[],
        compliance: &["TEST01"],
    },
    SuiteEntry {
        model: "dlrm-v2-99",
        required: &["Server", "Offline"],
        optional: &[],
        compliance: &["TEST01"],
    },
    SuiteEntry {
        model: "dlrm-v2-99.9",
        required: &["Server", "Offline"],
        optional: &[],
        compliance: &["TEST01"],
    },
    SuiteEntry {
        model: "3d-unet-99",
        required: &["Offline"],
        optional: &[],
        compliance: &["TEST01"],
    },
    SuiteEntry {
        model: "3d-unet-99.9",
        required: &["Offline"],
        optional: &[],
        compliance: &["TEST01"],
    },
    SuiteEntry {
        model: "gptj-99",
        required: &["Server", "Offline"],
        optional: &[],
        compliance: &["TEST06"],
    },
    SuiteEntry {
        model: "gptj-99.9",
        required: &["Server", "Offline"],
        optional: &[],
        compliance: &["TEST06"],
    },
    SuiteEntry {
        model: "llama2-70b-99",
        required: &["Server", "Offline"],
        optional: &[],
        compliance: &["TEST06"],
    },
    SuiteEntry {
        model: "llama2-70b-99.9",
        required: &["Server", "Offline"],
        optional: &[],
        compliance: &["TEST06"],
    },
    SuiteEntry {
        model: "llama2-70b-interactive-99",
        required: &["Server", "Offline"],
        optional: &[],
        compliance: &["TEST06"],
    },
    SuiteEntry {
        model: "llama2-70b-interactive-99.9",
        required: &["Server", "Offline"],
        optional: &[],
        compliance: &["TEST06"],
    },
    SuiteEntry {
        model: "stable-diffusion-xl",
        required: &["Server", "Offline"],
        optional: &[],
        compliance: &["TEST01", "TEST04"],
    },
    SuiteEntry {
        model: "mixtral-8x7b",
        required: &["Server", "Offline"],
        optional: &[],
        compliance: &["TEST06"],
    },
    SuiteEntry {
        model: "llama3.1-405b",
        required: &["Server", "Offline"],
        optional: &[],
        compliance: &[],
    },
    SuiteEntry {
        model: "rgat",
        required: &["Offline"],
        optional: &[],
        compliance: &["TEST01"],
    },
];

/// Round v5.1.
pub(super) const V5_1: &[SuiteEntry] = &[
    SuiteEntry {
        model: "retinanet",
        required: &["Server", "Offline"],
        optional: &[],
        compliance: &["TEST01"],
    },
    SuiteEntry {
        model: "dlrm-v2-99",
        required: &["Server", "Offline"],
        optional: &[],
        compliance: &["TEST01"],
    },
    SuiteEntry {
        model: "dlrm-v2-99.9",
        required: &["Server", "Offline"],
        optional: &[],
        compliance: &["TEST01"],
    },
    SuiteEntry {
        model: "3d-unet-99",
        required: &["Offline"],
        optional: &[],
        compliance: &["TEST01"],
    },
    SuiteEntry {
        model: "3d-unet-99.9",
        required: &["Offline"],
        optional: &[],
        compliance: &["TEST01"],
    },
    SuiteEntry {
        model: "llama3.1-8b",
        required: &["Offline"],
        optional: &["Interactive", "Server"],
        compliance: &["TEST06"],
    },
    SuiteEntry {
        model: "llama2-70b-99",
        required: &["Offline"],
        optional: &["Interactive", "Server"],
        compliance: &["TEST06"],
    },
    SuiteEntry {
        model: "llama2-70b-99.9",
        required: &["Offline"],
        optional: &["Interactive", "Server"],
        compliance: &["TEST06"],
    },
    SuiteEntry {
        model: "stable-diffusion-xl",
        required: &["Server", "Offline"],
        optional: &[],
        compliance: &["TEST01", "TEST04"],
    },
    SuiteEntry {
        model: "mixtral-8x7b",
        required: &["Server", "Offline"],
        optional: &[],
        compliance: &["TEST06"],
    },
    SuiteEntry {
        model: "llama3.1-405b",
        required: &["Offline"],
        optional: &["Interactive", "Server"],
        compliance: &["TEST06"],
    },
    SuiteEntry {
        model: "rgat",
        required: &["Offline"],
        optional: &[],
        compliance: &["TEST01"],
    },
    SuiteEntry {
        model: "deepseek-r1",
        required: &["Server", "Offline"],
        optional: &[],
        compliance: &["TEST06"],
    },
    SuiteEntry {
        model: "whisper",
        required: &["Offline"],
        optional: &[],
        compliance: &["TEST01"],
    },
];

/// Round v6.0.
pub(super) const V6_0: &[SuiteEntry] = &[
    SuiteEntry {
        model: "dlrm-v3",
        required: &["Server", "Offline"],
        optional: &[],
        compliance: &["TEST08"],
    },
    SuiteEntry {
        model: "3d-unet-99",
        required: &["Offline"],
        optional: &[],
        compliance: &["TEST01"],
    },
    SuiteEntry {
        model: "3d-unet-99.9",
        required: &["Offline"],
        optional: &[],
        compliance: &["TEST01"],
    },
    SuiteEntry {
        model: "llama3.1-8b",
        required: &["Offline"],
        optional: &["Interactive", "Server"],
        compliance: &["TEST06"],
    },
    SuiteEntry {
        model: "llama2-70b-99",
        required: &["Offline"],
        optional: &["Interactive", "Server"],
        compliance: &["TEST06"],
    },
    SuiteEntry {
        model: "llama2-70b-99.9",
        required: &["Offline"],
        optional: &["Interactive", "Server"],
        compliance: &["TEST06"],
    },
    SuiteEntry {
        model: "mixtral-8x7b",
        required: &["Server", "Offline"],
        optional: &[],
        compliance: &["TEST06"],
    },
    SuiteEntry {
        model: "llama3.1-405b",
        required: &["Offline"],
        optional: &["Interactive", "Server"],
        compliance: &["TEST06"],
    },
    SuiteEntry {
        model: "rgat",
        required: &["Offline"],
        optional: &[],
        compliance: &["TEST01"],
    },
    SuiteEntry {
        model: "whisper",
        required: &["Offline"],
        optional: &[],
        compliance: &["TEST01"],
    },
    SuiteEntry {
        model: "deepseek-r1",
        required: &["Offline"],
        optional: &["Interactive", "Server"],
        compliance: &["TEST06"],
    },
    SuiteEntry {
        model: "gpt-oss-120b",
        required: &["Offline"],
        optional: &["Interactive", "Server"],
        compliance: &["TEST07", "TEST09"],
    },
    SuiteEntry {
        model: "qwen3-vl-235b-a22b",
        required: &["Server", "Offline"],
        optional: &[],
        compliance: &[],
    },
    SuiteEntry {
        model: "wan-2.2-t2v-a14b",
        required: &["Offline", "SingleStream"],
        optional: &[],
        compliance: &["TEST04"],
    },
];

/// Round v6.1.
pub(super) const V6_1: &[SuiteEntry] = &[
    SuiteEntry {
        model: "dlrm-v3",
        required: &["Server", "Offline"],
        optional: &[],
        compliance: &["TEST08"],
    },
    SuiteEntry {
        model: "3d-unet-99",
        required: &["Offline"],
        optional: &[],
        compliance: &["TEST01"],
    },
    SuiteEntry {
        model: "3d-unet-99.9",
        required: &["Offline"],
        optional: &[],
        compliance: &["TEST01"],
    },
    SuiteEntry {
        model: "llama3.1-8b",
        required: &["Offline"],
        optional: &["Interactive", "Server"],
        compliance: &["TEST06"],
    },
    SuiteEntry {
        model: "llama2-70b-99.9",
        required: &["Offline"],
        optional: &["Interactive", "Server"],
        compliance: &["TEST06"],
    },
    SuiteEntry {
        model: "rgat",
        required: &["Offline"],
        optional: &[],
        compliance: &["TEST01"],
    },
    SuiteEntry {
        model: "whisper",
        required: &["Offline"],
        optional: &[],
        compliance: &["TEST01"],
    },
    SuiteEntry {
        model: "deepseek-r1",
        required: &["Offline"],
        optional: &["Interactive", "Server"],
        compliance: &["TEST06"],
    },
    SuiteEntry {
        model: "gpt-oss-120b",
        required: &["Offline"],
        optional: &["Interactive", "Server"],
        compliance: &["TEST07", "TEST09"],
    },
    SuiteEntry {
        model: "qwen3-vl-235b-a22b",
        required: &["Offline"],
        optional: &["Interactive", "Server"],
        compliance: &[],
    },
    SuiteEntry {
        model: "wan-2.2-t2v-a14b",
        required: &["Offline", "SingleStream"],
        optional: &[],
        compliance: &["TEST04"],
    },
    SuiteEntry {
        model: "e2e-rag-qna",
        required: &["Offline"],
        optional: &[],
        compliance: &["TEST09"],
    },
    SuiteEntry {
        model: "e2e-rag-db",
        required: &["Offline"],
        optional: &[],
        compliance: &[],
    },
];
