//! The byte mutations the fuzz targets' seeded tests apply (bit flips, byte writes,
//! truncations, insertions, huge length fields), shared so every format gets the same ones.
use rlx_testutil::Rng;

/// One to four random edits of `b`.
pub fn mutate(rng: &mut Rng, b: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(b.len() + 1);
        match rng.below(6) {
            0 if at < b.len() => b[at] ^= 1 << rng.below(8),
            1 if at < b.len() => b[at] = rng.next_u64() as u8,
            2 => b.truncate(at),
            3 => b.insert(at, rng.next_u64() as u8),
            4 if at + 8 <= b.len() => {
                let v = rng.next_u64() >> rng.below(64);
                b[at..at + 8].copy_from_slice(&v.to_le_bytes())
            }
            _ => {}
        }
    }
}
