//! The `gguf_from_bytes` fuzz target's body over seeded mutations (bit flips, byte writes,
//! truncations, insertions, huge length fields) of valid GGUF files from the test writer.
//! Run with `cd fuzz && cargo test --test gguf_from_bytes`; `RLX_SEED` replays a run;
//! `RLX_FUZZ_SEED_DIR=corpus/gguf_from_bytes` also writes the seeds for
//! `cargo fuzz run gguf_from_bytes`.
#[path = "../../crates/rlx-io/tests/gguf_writer/mod.rs"]
mod gguf_writer;

use gguf_writer::{sample, Writer};
use rlx_fuzz::gguf::{gguf_from_bytes, GgufOutcome};
use rlx_io::gguf::{Array, Value};
mod mutate;
use mutate::mutate;
use rlx_testutil::Rng;

fn seeds() -> Vec<Vec<u8>> {
    let custom_alignment = {
        let mut w = Writer::new(3)
            .kv("general.alignment", Value::U32(8))
            .kv(
                "deep",
                Value::Array(Array::Array(vec![Array::Array(vec![Array::U8(vec![1])])])),
            )
            .tensor("a", &[2, 2], 30, vec![7; 8])
            .tensor("b", &[3], 26, vec![9; 12]);
        w.alignment = 8;
        w.bytes()
    };
    let unknown_type = Writer::new(2).tensor("x", &[4], 99, vec![]).bytes();
    vec![sample(2), sample(3), custom_alignment, unknown_type]
}

#[test]
fn seeds_parse() {
    let dir = std::env::var_os("RLX_FUZZ_SEED_DIR");
    for (i, s) in seeds().iter().enumerate() {
        assert!(
            matches!(gguf_from_bytes(s), GgufOutcome::Parsed { .. }),
            "seed {i}"
        );
        if let Some(d) = &dir {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(std::path::Path::new(d).join(format!("seed{i}.gguf")), s).unwrap();
        }
    }
}

#[test]
fn mutations_are_errors_or_readable_files() {
    let mut rng = Rng::new("gguf_mutations_are_errors_or_readable_files");
    let seeds = seeds();
    let (mut parsed, mut refused, mut read) = (0, 0, 0);
    for i in 0..5000 {
        let mut b = seeds[i % seeds.len()].clone();
        mutate(&mut rng, &mut b);
        match gguf_from_bytes(&b) {
            GgufOutcome::Refused => refused += 1,
            GgufOutcome::Parsed { tensors_read } => {
                parsed += 1;
                read += tensors_read;
            }
        }
    }
    println!("{parsed} parsed ({read} tensors read), {refused} refused");
    assert!(parsed > 0 && refused > 0 && read > 0);
}
