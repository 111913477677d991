//! Arbitrary bytes into the dataset readers: the IDX decoder (plain, and gzip when the
//! bytes start with its magic) and the digits CSV parser must return, never panic, and
//! never allocate what the input does not hold. An array that decodes must encode to bytes
//! that decode to the same array.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rlx_io::datasets::{parse_digits_csv, parse_idx};

fuzz_target!(|data: &[u8]| {
    if let Ok(a) = parse_idx(data, "fuzz.idx") {
        let bytes = a.to_bytes().expect("a decoded array encodes");
        let b = parse_idx(&bytes, "again.idx").expect("re-encoded array decodes");
        assert_eq!(a, b);
        let _ = a.to_f64_vec();
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_digits_csv(text, "fuzz.csv");
    }
});
