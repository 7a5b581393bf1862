//! The cheap input hash the synthetic backends share: it tells inputs
//! apart (the synthetic outputs and the synthetic LLM's answer lengths
//! follow it) at a cost near zero for large samples.

/// An FNV-1a-style hash over 64-bit words (then the tail bytes): cheap
/// enough that a "zero-cost" backend stays near zero cost for 150 KB
/// samples, and good enough to tell inputs apart.
pub(crate) fn word_hash(bytes: &[u8]) -> u64 {
    const PRIME: u64 = 0x100000001b3;
    let mut words = bytes.chunks_exact(8);
    let mut h = words.by_ref().fold(0xcbf29ce484222325u64, |h, w| {
        (h ^ u64::from_le_bytes(w.try_into().expect("8 bytes"))).wrapping_mul(PRIME)
    });
    for &b in words.remainder() {
        h = (h ^ b as u64).wrapping_mul(PRIME);
    }
    (h ^ bytes.len() as u64).wrapping_mul(PRIME)
}
