//! The fuzzer's randomness and mutations. A run is reproducible from its
//! seed: the random source is a plain xorshift, and nothing here reads
//! the clock.
//!
//! The mutations are the classic ones of AFL and libFuzzer: bit and byte
//! flips, inserting, deleting and duplicating ranges, interesting integers
//! (0, 1, -1, the edges of each width) in both byte orders, small
//! arithmetic on what may be a length prefix, splicing with another input,
//! truncation, random bytes and dictionary tokens.

/// xorshift64*, seeded through splitmix64 so that nearby seeds give
/// unrelated streams.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// The stream of `seed`.
    pub fn new(seed: u64) -> Rng {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        // xorshift must not start at 0.
        Rng((z ^ (z >> 31)) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// True once in `n` times.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    /// A length in `1..=max`, small ones far more often (half are under
    /// 8), as most useful edits are small.
    pub fn small_len(&mut self, max: usize) -> usize {
        let cap = match self.below(8) {
            0..=3 => 8,
            4..=6 => 64,
            _ => 4096,
        };
        1 + self.below(cap.min(max.max(1)))
    }
}

/// Integers at the edges: fields, lengths and sizes go wrong there.
const INTERESTING: &[u64] = &[
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    16,
    0x7f,
    0x80,
    0xff,
    0x100,
    0x7fff,
    0x8000,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    0x7fff_ffff_ffff_ffff,
    0x8000_0000_0000_0000,
    u64::MAX,
    u64::MAX - 1,
    64 << 20,
    256 << 20,
];

/// Numbers, as text, for the text formats.
const INTERESTING_TEXT: &[&str] = &[
    "0",
    "1",
    "-1",
    "255",
    "65536",
    "2147483647",
    "-2147483648",
    "4294967296",
    "9223372036854775807",
    "18446744073709551615",
    "18446744073709551616",
    "1e308",
    "-0.0",
    "nan",
    "inf",
];

/// The mutations, as one step each.
#[derive(Clone, Copy, Debug)]
enum Op {
    FlipBit,
    SetByte,
    InsertRandom,
    DeleteRange,
    DuplicateRange,
    Interesting,
    Arithmetic,
    LengthPrefix,
    Splice,
    InsertOther,
    Truncate,
    RandomBlock,
    DictInsert,
    DictOverwrite,
    NumberText,
}

const OPS: &[Op] = &[
    Op::FlipBit,
    Op::SetByte,
    Op::InsertRandom,
    Op::DeleteRange,
    Op::DuplicateRange,
    Op::Interesting,
    Op::Arithmetic,
    Op::LengthPrefix,
    Op::Splice,
    Op::InsertOther,
    Op::Truncate,
    Op::RandomBlock,
    Op::DictInsert,
    Op::DictInsert,
    Op::DictOverwrite,
    Op::NumberText,
];

/// Mutates inputs of one target.
#[derive(Debug)]
pub struct Mutator {
    /// The random source; the run's seed decides every mutation.
    pub rng: Rng,
    dictionary: Vec<Vec<u8>>,
    max_len: usize,
}

impl Mutator {
    /// A mutator that never makes inputs over `max_len` bytes.
    pub fn new(seed: u64, dictionary: Vec<Vec<u8>>, max_len: usize) -> Mutator {
        Mutator {
            rng: Rng::new(seed),
            dictionary,
            max_len,
        }
    }

    /// Applies 1, 2, 4 or 8 mutations to `input`; `other` is another input
    /// of the corpus, for splicing.
    pub fn mutate(&mut self, input: &mut Vec<u8>, other: &[u8]) {
        let steps = 1 << self.rng.below(4);
        for _ in 0..steps {
            let op = OPS[self.rng.below(OPS.len())];
            self.apply(op, input, other);
            input.truncate(self.max_len);
        }
    }

    fn apply(&mut self, op: Op, input: &mut Vec<u8>, other: &[u8]) {
        let len = input.len();
        let rng = &mut self.rng;
        match op {
            Op::FlipBit if len > 0 => {
                let at = rng.below(len);
                input[at] ^= 1 << rng.below(8);
            }
            Op::SetByte if len > 0 => {
                let at = rng.below(len);
                input[at] = rng.next_u64() as u8;
            }
            Op::InsertRandom => {
                let at = rng.below(len + 1);
                let n = rng.small_len(self.max_len.saturating_sub(len));
                let bytes: Vec<u8> = if rng.one_in(2) {
                    // A run of one byte: lengths, padding, zeros.
                    vec![rng.next_u64() as u8; n]
                } else {
                    (0..n).map(|_| rng.next_u64() as u8).collect()
                };
                input.splice(at..at, bytes);
            }
            Op::DeleteRange if len > 0 => {
                let n = rng.small_len(len);
                let at = rng.below(len - n + 1);
                input.drain(at..at + n);
            }
            Op::DuplicateRange if len > 0 => {
                let n = rng.small_len(len);
                let from = rng.below(len - n + 1);
                let at = rng.below(len + 1);
                let copy = input[from..from + n].to_vec();
                input.splice(at..at, copy);
            }
            Op::Interesting if len > 0 => {
                let value = INTERESTING[rng.below(INTERESTING.len())];
                // Sometimes as a negative number of its width.
                let value = if rng.one_in(4) {
                    value.wrapping_neg()
                } else {
                    value
                };
                let width = [1, 2, 4, 8][rng.below(4)].min(len);
                let at = rng.below(len - width + 1);
                write_int(&mut input[at..at + width], value, rng.one_in(2));
            }
            Op::Arithmetic if len > 0 => {
                let width = [1, 2, 4][rng.below(3)].min(len);
                let at = rng.below(len - width + 1);
                let big_endian = rng.one_in(2);
                let old = read_int(&input[at..at + width], big_endian);
                let delta = 1 + rng.below(35) as u64;
                let new = if rng.one_in(2) {
                    old.wrapping_add(delta)
                } else {
                    old.wrapping_sub(delta)
                };
                write_int(&mut input[at..at + width], new, big_endian);
            }
            Op::LengthPrefix if len > 0 => {
                // Make a spot announce (about) the bytes after it: a frame's
                // 4-byte big-endian prefix, or a protobuf varint length.
                let at = rng.below(len);
                let rest = (len - at) as u64;
                let announced = match rng.below(4) {
                    0 => rest,
                    1 => rest.saturating_sub(4),
                    2 => rest + rng.below(16) as u64,
                    _ => rest.saturating_sub(rng.below(16) as u64),
                };
                if rng.one_in(2) && len - at >= 4 {
                    input[at..at + 4].copy_from_slice(&(announced as u32).to_be_bytes());
                } else {
                    let varint = encode_varint(announced);
                    let end = (at + varint.len()).min(len);
                    input.splice(at..end, varint);
                }
            }
            Op::Splice if !other.is_empty() => {
                let keep = rng.below(len + 1);
                let from = rng.below(other.len());
                input.truncate(keep);
                input.extend_from_slice(&other[from..]);
            }
            Op::InsertOther if !other.is_empty() => {
                let n = rng.small_len(other.len());
                let from = rng.below(other.len() - n + 1);
                let at = rng.below(len + 1);
                input.splice(at..at, other[from..from + n].iter().copied());
            }
            Op::Truncate if len > 0 => {
                let keep = rng.below(len);
                input.truncate(keep);
            }
            Op::RandomBlock if len > 0 => {
                let n = rng.small_len(len);
                let at = rng.below(len - n + 1);
                for b in &mut input[at..at + n] {
                    *b = rng.next_u64() as u8;
                }
            }
            Op::DictInsert if !self.dictionary.is_empty() => {
                let token = &self.dictionary[rng.below(self.dictionary.len())];
                let at = rng.below(len + 1);
                input.splice(at..at, token.iter().copied());
            }
            Op::DictOverwrite if !self.dictionary.is_empty() && len > 0 => {
                let token = &self.dictionary[rng.below(self.dictionary.len())];
                let at = rng.below(len);
                let end = (at + token.len()).min(len);
                input.splice(at..end, token.iter().copied());
            }
            Op::NumberText => {
                // Replace a run of digits (or insert at a random spot).
                let text = INTERESTING_TEXT[rng.below(INTERESTING_TEXT.len())].as_bytes();
                let start = rng.below(len + 1);
                match input[start..].iter().position(u8::is_ascii_digit) {
                    Some(offset) => {
                        let from = start + offset;
                        let run = input[from..]
                            .iter()
                            .take_while(|b| b.is_ascii_digit())
                            .count();
                        input.splice(from..from + run, text.iter().copied());
                    }
                    None => {
                        input.splice(start..start, text.iter().copied());
                    }
                }
            }
            // A mutation that needs bytes, on an empty input: add some.
            _ => input.push(rng.next_u64() as u8),
        }
    }
}

fn read_int(bytes: &[u8], big_endian: bool) -> u64 {
    let fold = |acc: u64, &b: &u8| acc << 8 | b as u64;
    if big_endian {
        bytes.iter().fold(0, fold)
    } else {
        bytes.iter().rev().fold(0, fold)
    }
}

fn write_int(bytes: &mut [u8], value: u64, big_endian: bool) {
    let n = bytes.len();
    for (i, b) in bytes.iter_mut().enumerate() {
        let shift = if big_endian { n - 1 - i } else { i };
        *b = (value >> (8 * shift)) as u8;
    }
}

fn encode_varint(mut value: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(10);
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_mutations() {
        let run = |seed| {
            let mut m = Mutator::new(seed, vec![b"tok".to_vec()], 64);
            let mut input = b"hello world 123".to_vec();
            for _ in 0..100 {
                m.mutate(&mut input, b"other input");
            }
            input
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn inputs_stay_within_the_limit() {
        let mut m = Mutator::new(1, vec![vec![b'x'; 100]], 32);
        let mut input = Vec::new();
        for _ in 0..10_000 {
            m.mutate(&mut input, &[1; 50]);
            assert!(input.len() <= 32);
        }
    }

    #[test]
    fn integers_round_trip_in_both_orders() {
        let mut b = [0u8; 4];
        write_int(&mut b, 0x0102_0304, true);
        assert_eq!(b, [1, 2, 3, 4]);
        assert_eq!(read_int(&b, true), 0x0102_0304);
        write_int(&mut b, 0x0102_0304, false);
        assert_eq!(b, [4, 3, 2, 1]);
        assert_eq!(read_int(&b, false), 0x0102_0304);
        assert_eq!(encode_varint(300), vec![0xac, 0x02]);
    }
}
