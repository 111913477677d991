//! The one SplitMix64 generator of rlx: tiny, seedable and bit-identical on every platform,
//! so inits, dataset splits, batch orders and test data are reproducible from a seed alone.
//!
//! Every draw is defined in terms of [`SplitMix64::next_u64`]; changing any of them changes
//! trained weights and split membership that tests pin, so treat the bit patterns as frozen.

/// SplitMix64 (Steele, Lea and Flood): a 64-bit state advanced by the golden-ratio
/// increment and scrambled by two multiply-xorshift rounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

/// The golden-ratio increment; also handy for mixing a salt into a seed.
pub const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

impl SplitMix64 {
    pub const fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) from the top 53 bits (every value is an exact f64).
    pub fn unit_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [0, 1) from the top 24 bits (every value is an exact f32).
    pub fn unit_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit_f64()
    }

    /// Standard normal by Box–Muller from two uniforms (the cosine branch only).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.unit_f64().max(1e-300);
        let u2 = self.unit_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Integer in `0..n` (0 when n is 0). Plain modulo: the bias is below 2^-40 for any
    /// n under 2^24, negligible for dataset and test sizes.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// Fisher–Yates, from the back.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_sequence() {
        // SplitMix64 from seed 0: the first outputs of the reference implementation.
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(r.next_u64(), 0x06c4_5d18_8009_454f);
    }

    #[test]
    fn draws_stay_in_range() {
        let mut r = SplitMix64::new(42);
        for _ in 0..1000 {
            assert!((0.0..1.0).contains(&r.unit_f64()));
            assert!((0.0..1.0).contains(&r.unit_f32()));
            assert!(r.below(7) < 7);
            assert!(r.normal().is_finite());
        }
        assert_eq!(r.below(0), 0);
        let mut v: Vec<usize> = (0..50).collect();
        r.shuffle(&mut v);
        let mut s = v.clone();
        s.sort();
        assert_eq!(s, (0..50).collect::<Vec<_>>());
        assert_ne!(v, s, "50 elements shuffled into the identity: 1 in 50!");
    }
}
