//! Allocation bounds of the GGUF reader, measured with a counting allocator (its own test
//! binary, one test, so no other thread allocates meanwhile): hostile counts and seeded
//! mutations of a valid file never make the parser allocate much more than the input's size.
mod gguf_writer;

use rlx_io::gguf::Gguf;
use rlx_testutil::Rng;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static LARGEST: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(l.size(), Relaxed) + l.size();
        PEAK.fetch_max(live, Relaxed);
        LARGEST.fetch_max(l.size(), Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Relaxed);
        // SAFETY: `p` came from `alloc` above with this layout.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// (largest single allocation, peak live bytes above the start) while parsing `b`.
fn measure(b: &[u8]) -> (usize, usize) {
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    LARGEST.store(0, Relaxed);
    let g = Gguf::from_bytes(b);
    drop(g);
    (LARGEST.load(Relaxed), PEAK.load(Relaxed) - base)
}

#[test]
fn parsing_allocates_about_the_input_not_what_it_claims() {
    let mut rng = Rng::new("parsing_allocates_about_the_input_not_what_it_claims");
    let good = gguf_writer::sample(3);
    let (mut worst_single, mut worst_peak) = (0.0f64, 0.0f64);
    for i in 0..4000 {
        let mut b = good.clone();
        for _ in 0..1 + rng.below(3) {
            let at = rng.below(b.len());
            if i % 2 == 0 && at + 8 <= b.len() {
                // A count or length field set to something huge.
                b[at..at + 8].copy_from_slice(&(u64::MAX >> rng.below(64)).to_le_bytes());
            } else {
                b[at] ^= 1 << rng.below(8);
            }
        }
        let (single, peak) = measure(&b);
        worst_single = worst_single.max(single as f64 / b.len() as f64);
        worst_peak = worst_peak.max(peak as f64 / b.len() as f64);
        // The input copy is one allocation of its size; hash tables round up to a power of
        // two buckets: 2× the input plus a page is the bound for any single allocation.
        assert!(
            single <= 2 * b.len() + 4096,
            "mutation {i}: {single} bytes for a {}-byte input",
            b.len()
        );
        assert!(
            peak <= 16 * b.len() + 65536,
            "mutation {i}: peak {peak} for {}",
            b.len()
        );
    }
    println!("largest single allocation {worst_single:.2}× the input, peak {worst_peak:.2}×");
}
