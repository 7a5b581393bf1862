//! Bit-exact reproductions of the C++ standard-library random facilities the
//! official LoadGen draws from (`std::mt19937` with libstdc++'s
//! distributions), so that the same seeds select the same samples and the
//! same Server schedule as the official binary built with GCC.

use rand_mt::Mt;

/// How `std::uniform_int_distribution` maps 32-bit draws onto a range.
///
/// libstdc++ changed algorithm in GCC 11; logs made with older toolchains
/// (for example v4.1-era submissions) used the division method.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UniformIntVariant {
    /// Lemire's multiply-and-shift method (libstdc++ of GCC >= 11).
    #[default]
    Lemire,
    /// The older divide-and-reject method.
    Division,
}

impl std::str::FromStr for UniformIntVariant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "lemire" => Ok(Self::Lemire),
            "division" => Ok(Self::Division),
            other => Err(format!(
                "unknown uniform-int variant {other:?} (expected lemire or division)"
            )),
        }
    }
}

/// A 32-bit Mersenne Twister seeded like `std::mt19937(seed)`, with the
/// libstdc++ distributions LoadGen uses.
#[derive(Debug)]
pub struct StdRng {
    mt: Mt,
    variant: UniformIntVariant,
}

const GEN_RANGE: u64 = u32::MAX as u64;

impl StdRng {
    /// `std::mt19937` keeps only the low 32 bits of a 64-bit seed.
    pub fn new(seed: u64, variant: UniformIntVariant) -> Self {
        Self {
            mt: Mt::new(seed as u32),
            variant,
        }
    }

    /// The next raw 32-bit output.
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        self.mt.next_u32()
    }

    /// `uniform_int_distribution(lo, hi)` for an inclusive range.
    pub fn uniform_int(&mut self, lo: u64, hi: u64) -> u64 {
        debug_assert!(lo <= hi);
        lo + self.uniform_below_inclusive(hi - lo)
    }

    /// A value in `[0, urange]`, following libstdc++'s three cases
    /// (downscale, exact, upscale).
    fn uniform_below_inclusive(&mut self, urange: u64) -> u64 {
        if urange < GEN_RANGE {
            let range = (urange + 1) as u32;
            match self.variant {
                UniformIntVariant::Lemire => self.lemire(range) as u64,
                UniformIntVariant::Division => self.division(range) as u64,
            }
        } else if urange == GEN_RANGE {
            self.next_u32() as u64
        } else {
            // Upscaling: combine a recursive high part with one raw draw.
            let step = GEN_RANGE + 1;
            loop {
                let high = step.wrapping_mul(self.uniform_below_inclusive(urange / step));
                let value = high.wrapping_add(self.next_u32() as u64);
                if value <= urange && value >= high {
                    return value;
                }
            }
        }
    }

    fn lemire(&mut self, range: u32) -> u32 {
        let mut product = self.next_u32() as u64 * range as u64;
        let mut low = product as u32;
        if low < range {
            let threshold = range.wrapping_neg() % range;
            while low < threshold {
                product = self.next_u32() as u64 * range as u64;
                low = product as u32;
            }
        }
        (product >> 32) as u32
    }

    fn division(&mut self, range: u32) -> u32 {
        let scaling = u32::MAX / range;
        let past = range * scaling;
        loop {
            let r = self.next_u32();
            if r < past {
                return r / scaling;
            }
        }
    }

    /// `std::generate_canonical<double, 53>`: two draws, low word first.
    pub fn canonical(&mut self) -> f64 {
        let low = self.next_u32() as f64;
        let high = self.next_u32() as f64;
        let r = (low + high * 4294967296.0) / 18446744073709551616.0;
        if r >= 1.0 {
            1.0f64.next_down_compat()
        } else {
            r
        }
    }

    /// `uniform_real_distribution<double>(0, 1)`.
    pub fn uniform_unit(&mut self) -> f64 {
        self.canonical()
    }

    /// `exponential_distribution<double>(lambda)`.
    pub fn exponential(&mut self, lambda: f64) -> f64 {
        -(1.0 - self.canonical()).ln() / lambda
    }

    /// `std::shuffle` as libstdc++ implements it: pairs of swaps from one
    /// draw while the squared length fits in 32 bits, one draw per swap
    /// otherwise.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        let n = v.len() as u64;
        if n == 0 {
            return;
        }
        if GEN_RANGE / n >= n {
            let mut i = 1usize;
            if n.is_multiple_of(2) {
                let j = self.uniform_int(0, 1) as usize;
                v.swap(i, j);
                i += 1;
            }
            while i < v.len() {
                let swap_range = i as u64 + 1;
                let x = self.uniform_int(0, swap_range * (swap_range + 1) - 1);
                v.swap(i, (x / (swap_range + 1)) as usize);
                v.swap(i + 1, (x % (swap_range + 1)) as usize);
                i += 2;
            }
        } else {
            for i in 1..v.len() {
                let j = self.uniform_int(0, i as u64) as usize;
                v.swap(i, j);
            }
        }
    }
}

/// `f64::next_down` is not stable on every toolchain we support.
trait NextDown {
    fn next_down_compat(self) -> Self;
}

impl NextDown for f64 {
    fn next_down_compat(self) -> f64 {
        f64::from_bits(self.to_bits() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QSL_SEED: u64 = 2085463073848966840;

    #[test]
    fn mt19937_truncates_the_seed_to_32_bits() {
        let mut rng = StdRng::new(QSL_SEED, UniformIntVariant::Lemire);
        let first: Vec<u32> = (0..5).map(|_| rng.next_u32()).collect();
        assert_eq!(
            first,
            [144363858, 3947231266, 1102009372, 2040961771, 2791321498]
        );
    }

    #[test]
    fn lemire_and_division_differ_but_stay_in_range() {
        let mut a = StdRng::new(1, UniformIntVariant::Lemire);
        let mut b = StdRng::new(1, UniformIntVariant::Division);
        // Small ranges map to nearly the same top bits; a wide one shows it.
        let hi = 999_999_999;
        let xa: Vec<u64> = (0..64).map(|_| a.uniform_int(3, hi)).collect();
        let xb: Vec<u64> = (0..64).map(|_| b.uniform_int(3, hi)).collect();
        assert!(xa.iter().chain(&xb).all(|x| (3..=hi).contains(x)));
        assert_ne!(xa, xb);
    }

    #[test]
    fn upscaling_covers_ranges_wider_than_32_bits() {
        let mut rng = StdRng::new(7, UniformIntVariant::Lemire);
        let hi = (1u64 << 40) + 12345;
        let draws: Vec<u64> = (0..256).map(|_| rng.uniform_int(0, hi)).collect();
        assert!(draws.iter().all(|&x| x <= hi));
        assert!(draws.iter().any(|&x| x > u32::MAX as u64));
    }

    #[test]
    fn canonical_is_in_unit_interval() {
        let mut rng = StdRng::new(5489, UniformIntVariant::Lemire);
        for _ in 0..1000 {
            let x = rng.canonical();
            assert!((0.0..1.0).contains(&x));
        }
    }

    #[test]
    fn shuffle_is_a_permutation_for_both_branches() {
        for n in [0usize, 1, 2, 3, 10, 65535, 65536, 70001] {
            let mut v: Vec<usize> = (0..n).collect();
            StdRng::new(42, UniformIntVariant::Lemire).shuffle(&mut v);
            let mut sorted = v.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "n = {n}");
        }
    }
}
