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

/// Independent multiply chains in [`lane_hash`]: a 256-byte block feeds
/// each a word. Enough chains that the processor's vector units (four
/// 512-bit registers of eight) or its scalar multipliers never wait on
/// one chain's latency.
const LANES: usize = 32;

/// [`word_hash`]'s step over [`LANES`] chains side by side, then the tail
/// bytes with [`word_hash`]: what the synthetic backend reads every byte
/// of a sample with. A 150 KB sample hashed in four chains was 3.6 % of a
/// busy TLS link's CPU (docs/benchmarks.md, "Bytes per CPU-second"); in
/// 32 chains, compiled for AVX-512 where the processor has it, it is
/// several times cheaper. Every build gives the same value on every
/// processor: the copies differ only in the instructions chosen.
pub(crate) fn lane_hash(bytes: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512() {
            // SAFETY: the processor has the features this copy is compiled for.
            return unsafe { lane_hash_avx512(bytes) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: as above.
            return unsafe { lane_hash_avx2(bytes) };
        }
    }
    lane_hash_portable(bytes)
}

/// The processor has what [`lane_hash_avx512`] is compiled for.
#[cfg(target_arch = "x86_64")]
fn has_avx512() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512dq")
}

/// [`lane_hash`] where 64-bit multiplies have a vector instruction.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn lane_hash_avx512(bytes: &[u8]) -> u64 {
    lane_hash_portable(bytes)
}

/// [`lane_hash`] on 256-bit vectors (no 64-bit vector multiply: the
/// compiler builds it from 32-bit ones, still faster than scalar code).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn lane_hash_avx2(bytes: &[u8]) -> u64 {
    lane_hash_portable(bytes)
}

/// [`lane_hash`] in the instructions every build may use; inlined into
/// the copies above so that each is compiled for its features.
#[inline(always)]
fn lane_hash_portable(bytes: &[u8]) -> u64 {
    const PRIME: u64 = 0x100000001b3;
    let mut lanes = [0u64; LANES];
    for (i, lane) in lanes.iter_mut().enumerate() {
        // Distinct starting points, so that equal words in different
        // chains do not cancel when the chains are folded together.
        *lane = 0xcbf29ce484222325 ^ (i as u64).wrapping_mul(0x9e3779b97f4a7c15);
    }
    let mut blocks = bytes.chunks_exact(LANES * 8);
    for block in blocks.by_ref() {
        for (lane, word) in lanes.iter_mut().zip(block.chunks_exact(8)) {
            let word = u64::from_le_bytes(word.try_into().expect("8 bytes"));
            *lane = (*lane ^ word).wrapping_mul(PRIME);
        }
    }
    let tail = word_hash(blocks.remainder());
    lanes.iter().fold(tail ^ bytes.len() as u64, |h, &lane| {
        (h ^ lane).wrapping_mul(PRIME)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(len: usize) -> Vec<u8> {
        (0..len as u32).map(|i| (i % 253) as u8).collect()
    }

    /// A flipped bit in any chain's word, in the tail, or a byte less,
    /// changes the hash.
    #[test]
    fn every_byte_counts_in_the_lane_hash() {
        let bytes = input(150_531);
        let base = lane_hash(&bytes);
        for at in [0, 8, 9, 100, 255, 256, 75_000, 150_527, 150_530] {
            let mut changed = bytes.clone();
            changed[at] ^= 1;
            assert_ne!(lane_hash(&changed), base, "byte {at}");
        }
        assert_ne!(lane_hash(&bytes[..150_530]), base);
    }

    /// The copy chosen for this processor gives what the portable one
    /// gives, at lengths around a block's.
    #[test]
    fn every_copy_of_the_lane_hash_agrees() {
        for len in [0, 1, 7, 255, 256, 257, 4096 + 13, 150_528] {
            let bytes = input(len);
            let portable = lane_hash_portable(&bytes);
            assert_eq!(lane_hash(&bytes), portable, "{len} bytes");
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: checked just above.
                assert_eq!(unsafe { lane_hash_avx2(&bytes) }, portable, "{len} B");
            }
            #[cfg(target_arch = "x86_64")]
            if has_avx512() {
                // SAFETY: checked just above.
                assert_eq!(unsafe { lane_hash_avx512(&bytes) }, portable, "{len} B");
            }
        }
    }
}
