//! The Datacenter bandwidth requirements of the Network-division rules:
//! per benchmark, the input (ingress) and output (egress) size per sample
//! whose product with the achieved throughput is the least bandwidth the
//! network must carry. Outputs of most benchmarks are negligible: their
//! egress need only be above zero.

use crate::Benchmark;

/// The rules' row for a benchmark: elements per sample, times the element
/// size of the data as run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BandwidthRule {
    /// Input elements per sample (`C*H*W`, `avg(C*D*H*W)`, ...).
    pub ingress_elements: u64,
    /// Output elements per sample; `None` where the rules call outputs
    /// negligible (egress must only be above zero).
    pub egress_elements: Option<u64>,
}

/// DLRMv2's input: 270 pairs of 13 numerical and 26 categorical inputs,
/// counted in elements of the data type as run.
const DLRM_V2_ELEMENTS: u64 = 270 * (13 + 26);

/// The rule for `benchmark`, if the rules' table has one.
pub fn rule(benchmark: &Benchmark) -> Option<BandwidthRule> {
    let (ingress, egress) = match benchmark.name() {
        "resnet50" => (150_528, None),
        "retinanet" => (1_920_000, None),
        "3d-unet" => (32_944_795, Some(32_944_795)),
        "bert" => (1_152, None),
        "gptj" => (2_048, None),
        "llama2-70b" => (1_024, None),
        "mixtral-8x7b" => (2_048, None),
        "dlrm-v2" => (DLRM_V2_ELEMENTS, None),
        "stable-diffusion-xl" => (77, Some(3_145_728)),
        _ => return None,
    };
    Some(BandwidthRule {
        ingress_elements: ingress,
        egress_elements: egress,
    })
}

/// The least bandwidths, in bytes per second, for `throughput` samples per
/// second of `dtype_size`-byte elements: (ingress, egress; 0 where egress
/// must only be above zero).
pub fn required(rule: &BandwidthRule, throughput: f64, dtype_size: usize) -> (f64, f64) {
    let bytes = |elements: u64| throughput * elements as f64 * dtype_size as f64;
    (
        bytes(rule.ingress_elements),
        rule.egress_elements.map_or(0.0, bytes),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_rows() {
        let unet = Benchmark::parse("3d-unet-99.9").unwrap();
        let r = rule(&unet).unwrap();
        let (ingress, egress) = required(&r, 2.0, 4);
        assert_eq!(ingress, 2.0 * 32_944_795.0 * 4.0);
        assert_eq!(egress, ingress);
        let resnet = Benchmark::parse("resnet").unwrap();
        let (ingress, egress) = required(&rule(&resnet).unwrap(), 1000.0, 1);
        assert_eq!((ingress, egress), (150_528_000.0, 0.0));
        assert!(rule(&Benchmark::parse("null").unwrap()).is_none());
    }
}
