//! The `onnx_from_bytes` fuzz target's body over ONNX backend node-suite models (every 40th
//! of `~/.cache/rlx/onnx-node`, a spread of op families) and 3000 seeded mutations of them
//! (bit flips, byte writes, truncations, insertions, huge length fields). Skipped with a
//! message when the suite is not unpacked. Run with `cd fuzz && cargo test --test
//! onnx_from_bytes`; `RLX_SEED` replays a run.
use rlx_fuzz::onnx::{onnx_from_bytes, OnnxOutcome};
use rlx_testutil::Rng;
use std::path::PathBuf;
mod mutate;
use mutate::mutate;

fn suite_dir() -> Option<PathBuf> {
    let home = std::env::var_os("HOME")?;
    let dir = PathBuf::from(home).join(".cache/rlx/onnx-node");
    dir.is_dir().then_some(dir)
}

/// Every 40th node-suite model by name (sorted, so the same ones on every machine).
fn seeds() -> Option<Vec<(String, Vec<u8>)>> {
    let Some(dir) = suite_dir() else {
        println!("skipped: the ONNX node suite is not unpacked at ~/.cache/rlx/onnx-node");
        return None;
    };
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    let seeds: Vec<_> = names
        .into_iter()
        .step_by(40)
        .filter_map(|n| {
            let b = std::fs::read(dir.join(&n).join("model.onnx")).ok()?;
            Some((n, b))
        })
        .collect();
    assert!(seeds.len() >= 30, "only {} seeds", seeds.len());
    Some(seeds)
}

#[test]
fn seeds_import_or_are_refused() {
    let Some(seeds) = seeds() else { return };
    let imported = seeds
        .iter()
        .filter(|(_, b)| matches!(onnx_from_bytes(b), OnnxOutcome::Imported { .. }))
        .count();
    println!("{imported} of {} seeds imported", seeds.len());
    // Most of the suite imports; a seed rlx refuses (an unsupported type) is still a seed.
    assert!(imported * 2 > seeds.len());
}

#[test]
fn mutations_are_errors_or_sound_models() {
    let Some(seeds) = seeds() else { return };
    let mut rng = Rng::new("onnx_mutations_are_errors_or_sound_models");
    let (mut imported, mut refused) = (0, 0);
    for i in 0..3000 {
        let mut b = seeds[i % seeds.len()].1.clone();
        mutate(&mut rng, &mut b);
        match onnx_from_bytes(&b) {
            OnnxOutcome::Refused => refused += 1,
            OnnxOutcome::Imported { .. } => imported += 1,
        }
    }
    println!("{imported} imported, {refused} refused");
    assert!(imported > 0 && refused > 0);
}
