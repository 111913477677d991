//! The body of the `gguf_from_bytes` fuzz target, as a plain function so
//! `tests/gguf_from_bytes.rs` runs it over seeded mutations of valid files.
//!
//! Any input must parse or fail with an error, never panic or allocate beyond a small
//! multiple of its size; a file that parses must hand out every tensor's bytes (or the
//! unknown-type error) and every metadata value without a panic, and what it hands out
//! must agree with the table: each slice as long as its tensor's size, inside the file,
//! each name found by lookup.
use rlx_io::gguf::{Gguf, GgufError};

/// What became of one input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GgufOutcome {
    Refused,
    /// It parsed; the number of tensors whose data could be read.
    Parsed {
        tensors_read: usize,
    },
}

pub fn gguf_from_bytes(data: &[u8]) -> GgufOutcome {
    let g = match Gguf::from_bytes(data) {
        Ok(g) => g,
        Err(e) => {
            // Formatting walks the error's fields (offsets, names): it must not panic either.
            let _ = e.to_string();
            return GgufOutcome::Refused;
        }
    };
    let m = g.metadata();
    for (k, v) in m.entries() {
        // Keys are unique, so lookup finds this very entry.
        assert!(m.get(k).is_some_and(|found| std::ptr::eq(found, v)));
        let _ = v.summary(8);
        let _ = m.get_str(k);
        let _ = m.get_usize(k);
        let _ = m.get_str_array(k);
    }
    let mut tensors_read = 0;
    for t in g.tensors() {
        assert_eq!(g.tensor(t.name()).map(|x| x.name()).ok(), Some(t.name()));
        let _ = t.shape();
        match g.tensor_data(t) {
            Ok(d) => {
                let r = t.file_range().expect("a readable tensor has a range");
                assert_eq!(d.len() as u64, r.end - r.start);
                assert!(r.end <= data.len() as u64);
                // Touch the bytes, so a bad slice would fault under the sanitizer.
                std::hint::black_box(d.iter().fold(0u8, |a, &b| a ^ b));
                // The shared view (what a CPU executor keeps) is the same range.
                let shared = g
                    .tensor_data_shared(t)
                    .expect("a readable tensor is shareable");
                assert_eq!(&shared[..], d);
                tensors_read += 1;
            }
            Err(GgufError::UnknownType { .. }) => {}
            Err(e) => panic!("a tensor of a parsed file could not be read: {e}"),
        }
    }
    GgufOutcome::Parsed { tensors_read }
}
