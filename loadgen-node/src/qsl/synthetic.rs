//! Deterministic synthetic samples: any shape and dtype, no dataset needed.
//!
//! The data stands in for preprocessed inputs when only the harness is
//! measured. It is built so that the lz4 path does real work: a value holds
//! for a run of 8 elements and, half the time, for the next run too, like the
//! smooth regions of an image.

use netdiv_proto::benchmark::TokenCounts;

use super::DType;

/// Elements that share one value.
const RUN: usize = 8;

/// One step of splitmix64 (Steele, Lea and Flood): fast, and every seed
/// gives a full-period stream.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One element drawn from `r`, in a sane range for the dtype: its
/// little-endian bytes are the low `dtype.size()` bytes of the result.
fn element(dtype: DType, r: u64) -> u64 {
    match dtype {
        DType::U8 | DType::I8 => r & 0xff,
        // Non-negative and below 32000, like token ids of a vocabulary.
        DType::I32 | DType::I64 => (r >> 32) % 32000,
        // Sign, a biased exponent of 0..=14 and any mantissa: a finite half
        // of magnitude below 1.
        DType::F16 => ((r >> 63) << 15) | (((r >> 16) % 15) << 10) | (r & 0x3ff),
        // 24 random bits are exact in an f32: uniform on [-1, 1).
        DType::F32 => {
            let unit = (r >> 40) as f32 / (1u32 << 24) as f32;
            u64::from((unit * 2.0 - 1.0).to_bits())
        }
    }
}

/// The bytes of synthetic sample `index`: deterministic in (shape, dtype,
/// seed, index), different for different indices, and compressible by lz4
/// (values constant over runs of 8 elements) so codec paths are exercised.
///
/// The size is the product of `shape` times the dtype size; callers keep it
/// sane ([`super::SampleSource::read`] checks it before calling).
pub fn synthetic_sample(shape: &[usize], dtype: DType, seed: u64, index: usize) -> Vec<u8> {
    let count = shape.iter().product::<usize>();
    // Mix seed and index apart so that nearby indices and seeds give
    // unrelated streams; the dtype joins so U8 and I8 data differ too.
    let mut seed_state = seed;
    let mut state = splitmix64(&mut seed_state)
        ^ (index as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93)
        ^ ((dtype as u64) << 56);
    // A constant element size lets the copies below compile to plain stores
    // (with a runtime size they are memcpy calls, 50 times slower).
    match dtype {
        DType::U8 | DType::I8 => fill::<1>(count, dtype, &mut state),
        DType::F16 => fill::<2>(count, dtype, &mut state),
        DType::I32 | DType::F32 => fill::<4>(count, dtype, &mut state),
        DType::I64 => fill::<8>(count, dtype, &mut state),
    }
}

/// The length, in tokens, of synthetic prompt `index`: drawn from
/// `lengths` (clamped to its `[min, max]`), deterministic in (seed, index)
/// and unrelated to the prompt's token values.
pub(super) fn prompt_length(lengths: &TokenCounts, seed: u64, index: usize) -> usize {
    // Another odd constant than the data's, so lengths and values are
    // drawn from unrelated streams.
    let mut state = seed ^ (index as u64).wrapping_mul(0x9FB2_1C65_1E98_DF25) ^ 0x4C45_4E47;
    let bits = splitmix64(&mut state);
    lengths.draw(splitmix64(&mut state) ^ bits.rotate_left(17)) as usize
}

/// The bytes of synthetic prompt `index`: an unpadded array of token ids
/// (`dtype`, int32 or int64 for real models) of [`prompt_length`] tokens,
/// each below 32000 like the ids of a vocabulary.
pub fn synthetic_prompt(lengths: &TokenCounts, dtype: DType, seed: u64, index: usize) -> Vec<u8> {
    synthetic_sample(&[prompt_length(lengths, seed, index)], dtype, seed, index)
}

/// `count` elements of `SIZE` bytes, a new value per run of [`RUN`]
/// elements only when the run's low random bit says so.
fn fill<const SIZE: usize>(count: usize, dtype: DType, state: &mut u64) -> Vec<u8> {
    let mut out = vec![0u8; count * SIZE];
    let mut value = element(dtype, splitmix64(state));
    let mut pattern = [[0u8; SIZE]; RUN];
    let mut next_pattern = |pattern: &mut [[u8; SIZE]; RUN]| {
        let r = splitmix64(state);
        // Keep or replace the value without a branch: a coin flip per run
        // mispredicts half the time, which dominated the cost.
        let replace = 0u64.wrapping_sub(r & 1);
        value = (element(dtype, r) & replace) | (value & !replace);
        let bytes = value.to_le_bytes();
        for slot in pattern.iter_mut() {
            slot.copy_from_slice(&bytes[..SIZE]);
        }
    };
    let mut runs = out.chunks_exact_mut(RUN * SIZE);
    for chunk in &mut runs {
        next_pattern(&mut pattern);
        chunk.copy_from_slice(pattern.as_flattened());
    }
    let tail = runs.into_remainder();
    if !tail.is_empty() {
        next_pattern(&mut pattern);
        tail.copy_from_slice(&pattern.as_flattened()[..tail.len()]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use netdiv_proto::codec::{encode, Codec};

    const IMAGE: &[usize] = &[3, 224, 224];

    #[test]
    fn deterministic_and_sized() {
        for &dtype in DType::ALL {
            let a = synthetic_sample(&[5, 7], dtype, 42, 3);
            assert_eq!(a.len(), 35 * dtype.size());
            assert_eq!(a, synthetic_sample(&[5, 7], dtype, 42, 3));
        }
        assert!(synthetic_sample(&[0, 4], DType::F32, 1, 1).is_empty());
        assert_eq!(synthetic_sample(&[], DType::I32, 1, 1).len(), 4);
    }

    #[test]
    fn distinct_across_indices_and_seeds() {
        let samples: Vec<Vec<u8>> = (0..64)
            .map(|i| synthetic_sample(IMAGE, DType::U8, 7, i))
            .collect();
        for i in 0..samples.len() {
            for j in i + 1..samples.len() {
                assert_ne!(samples[i], samples[j], "samples {i} and {j}");
            }
        }
        assert_ne!(samples[0], synthetic_sample(IMAGE, DType::U8, 8, 0));
        // Even the 4-byte samples of the null benchmark differ.
        let tiny: std::collections::HashSet<Vec<u8>> = (0..1024)
            .map(|i| synthetic_sample(&[1], DType::I32, 0, i))
            .collect();
        assert!(tiny.len() > 1000, "{} distinct of 1024", tiny.len());
    }

    #[test]
    fn values_are_in_range() {
        let f32s = synthetic_sample(&[4096], DType::F32, 1, 2);
        for chunk in f32s.chunks_exact(4) {
            let v = f32::from_le_bytes(chunk.try_into().unwrap());
            assert!((-1.0..1.0).contains(&v), "{v}");
        }
        let f16s = synthetic_sample(&[4096], DType::F16, 1, 2);
        for chunk in f16s.chunks_exact(2) {
            let bits = u16::from_le_bytes(chunk.try_into().unwrap());
            // Exponent below 15 (the bias): finite and below 1 in magnitude.
            assert!((bits >> 10) & 0x1f < 15, "{bits:#06x}");
        }
        let ids = synthetic_sample(&[4096], DType::I64, 1, 2);
        for chunk in ids.chunks_exact(8) {
            let v = i64::from_le_bytes(chunk.try_into().unwrap());
            assert!((0..32000).contains(&v), "{v}");
        }
    }

    #[test]
    fn runs_of_eight_elements() {
        let data = synthetic_sample(&[1024], DType::I32, 3, 9);
        for run in data.chunks(8 * 4) {
            assert!(run.chunks_exact(4).all(|e| e == &run[..4]));
        }
    }

    #[test]
    fn prompts_are_unpadded_token_ids_of_drawn_lengths() {
        let lengths = TokenCounts {
            mean: 294,
            min: 8,
            max: 1024,
        };
        let prompts: Vec<Vec<u8>> = (0..2000)
            .map(|i| synthetic_prompt(&lengths, DType::I32, 3, i))
            .collect();
        let tokens: Vec<usize> = prompts.iter().map(|p| p.len() / 4).collect();
        assert!(tokens.iter().all(|n| (8..=1024).contains(n)), "{tokens:?}");
        for (i, p) in prompts.iter().enumerate() {
            assert_eq!(p.len() % 4, 0);
            assert_eq!(tokens[i], prompt_length(&lengths, 3, i));
            for id in p.chunks_exact(4) {
                assert!((0..32000).contains(&i32::from_le_bytes(id.try_into().unwrap())));
            }
        }
        // Lengths vary around the profile's mean.
        let mean = tokens.iter().sum::<usize>() as f64 / tokens.len() as f64;
        assert!((mean - 294.0).abs() < 25.0, "{mean}");
        let distinct: std::collections::HashSet<&usize> = tokens.iter().collect();
        assert!(distinct.len() > 300, "{} distinct lengths", distinct.len());
        // Deterministic in seed and index; another seed draws other lengths.
        assert_eq!(prompts[7], synthetic_prompt(&lengths, DType::I32, 3, 7));
        let other: Vec<usize> = (0..50).map(|i| prompt_length(&lengths, 4, i)).collect();
        assert_ne!(other, tokens[..50]);
        // int64 ids: the same lengths, twice the bytes.
        assert_eq!(
            synthetic_prompt(&lengths, DType::I64, 3, 7).len(),
            prompts[7].len() * 2
        );
    }

    #[test]
    fn lz4_compresses_an_image_at_least_2x() {
        let raw = synthetic_sample(IMAGE, DType::U8, 0, 17);
        assert_eq!(raw.len(), 150528);
        let packed = encode(Codec::Lz4, &raw);
        assert!(
            packed.len() * 2 <= raw.len(),
            "{} bytes packed to {}",
            raw.len(),
            packed.len()
        );
    }
}
