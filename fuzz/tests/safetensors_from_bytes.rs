//! The `safetensors_from_bytes` fuzz target's body over seeded mutations (bit flips, byte
//! writes, truncations, insertions, huge length fields) of valid files written here. Run with
//! `cd fuzz && cargo test --test safetensors_from_bytes`; `RLX_SEED` replays a run;
//! `RLX_FUZZ_SEED_DIR=corpus/safetensors_from_bytes` also writes the seeds for
//! `cargo fuzz run safetensors_from_bytes`.
use rlx_fuzz::safetensors::{safetensors_from_bytes, SafetensorsOutcome};
mod mutate;
use mutate::mutate;
use rlx_testutil::Rng;

/// A file of `(name, dtype, shape, element width)` with bytes `0, 1, 2, …`.
fn file(tensors: &[(&str, &str, &[usize], usize)]) -> Vec<u8> {
    let mut header = String::from("{\"__metadata__\":{\"format\":\"pt\"}");
    let mut off = 0;
    for (name, dt, shape, width) in tensors {
        let n: usize = shape.iter().product::<usize>() * width;
        let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        header += &format!(
            ",\"{name}\":{{\"dtype\":\"{dt}\",\"shape\":[{}],\"data_offsets\":[{off},{}]}}",
            dims.join(","),
            off + n
        );
        off += n;
    }
    header.push('}');
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend((0..off).map(|i| i as u8));
    out
}

fn seeds() -> Vec<Vec<u8>> {
    vec![
        file(&[("w", "F32", &[2, 3], 4), ("b", "BF16", &[3], 2)]),
        file(&[
            ("e", "F16", &[4, 2], 2),
            ("i", "I64", &[2], 8),
            ("m", "BOOL", &[3], 1),
        ]),
        file(&[("q", "F8_E4M3", &[8], 1), ("s", "F32", &[], 4)]),
    ]
}

#[test]
fn seeds_parse() {
    let dir = std::env::var_os("RLX_FUZZ_SEED_DIR");
    for (i, s) in seeds().iter().enumerate() {
        assert!(
            matches!(safetensors_from_bytes(s), SafetensorsOutcome::Parsed { .. }),
            "seed {i}"
        );
        if let Some(d) = &dir {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(std::path::Path::new(d).join(format!("seed{i}.st")), s).unwrap();
        }
    }
}

#[test]
fn mutations_are_errors_or_readable_files() {
    let mut rng = Rng::new("safetensors_mutations_are_errors_or_readable_files");
    let seeds = seeds();
    let (mut parsed, mut refused, mut converted) = (0, 0, 0);
    for i in 0..5000 {
        let mut b = seeds[i % seeds.len()].clone();
        mutate(&mut rng, &mut b);
        match safetensors_from_bytes(&b) {
            SafetensorsOutcome::Refused => refused += 1,
            SafetensorsOutcome::Parsed { converted: c } => {
                parsed += 1;
                converted += c;
            }
        }
    }
    println!("{parsed} parsed ({converted} tensors converted), {refused} refused");
    assert!(parsed > 0 && refused > 0 && converted > 0);
}
