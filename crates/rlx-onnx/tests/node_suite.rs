//! CI guard: the whole ONNX backend node suite on the CPU. Fails when a case that is not in
//! `tests/data/node_expected_failures.txt` fails (a regression, or a new case), and prints the
//! listed cases that now pass so the list can be shrunk. Skips with a message only when the
//! suite cannot be fetched (scripts/fetch_onnx_suite.sh, which scripts/fetch_models.sh calls).
use rlx_onnx::suite::{self, Outcome};
use rlx_runtime::Device;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn suite_root() -> Option<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/fetch_onnx_suite.sh");
    let out = Command::new("bash").arg(&script).output();
    match out {
        Ok(o) if o.status.success() => {
            let p = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
            p.is_dir().then_some(p)
        }
        Ok(o) => {
            eprintln!(
                "skipping: {} failed: {}",
                script.display(),
                String::from_utf8_lossy(&o.stderr)
            );
            None
        }
        Err(e) => {
            eprintln!("skipping: cannot run {}: {e}", script.display());
            None
        }
    }
}

/// case name → reason category, from the committed list.
fn expected_failures() -> BTreeMap<String, String> {
    let text = include_str!("data/node_expected_failures.txt");
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| match l.split_once('\t') {
            Some((n, r)) => (n.trim().to_string(), r.trim().to_string()),
            None => (l.trim().to_string(), String::new()),
        })
        .collect()
}

#[test]
fn node_suite_on_cpu_has_no_unexpected_failures() {
    let Some(root) = suite_root() else {
        return;
    };
    let dirs = suite::case_dirs(&root).expect("list the suite");
    assert!(
        dirs.len() > 1000,
        "only {} cases under {}",
        dirs.len(),
        root.display()
    );
    let t = std::time::Instant::now();
    let results = suite::run_cases(&dirs, Device::Cpu);
    let expected = expected_failures();
    let mut unexpected = vec![];
    let mut now_pass = vec![];
    let mut categories: BTreeMap<String, usize> = BTreeMap::new();
    for (name, o) in &results {
        if !o.passed() {
            *categories.entry(o.category()).or_default() += 1;
        }
        match (o, expected.contains_key(name)) {
            (Outcome::Pass, true) => now_pass.push(name.clone()),
            (Outcome::Pass, false) | (_, true) => {}
            (o, false) => unexpected.push(format!("{name}: {o}")),
        }
    }
    println!("{} in {:.1?}", suite::summary(&results), t.elapsed());
    // How many passing cases rely on an input value baked in at import (a shape, axes or
    // pads fed as an input): the graph is then valid for that value only.
    let specialized = (results.iter().zip(&dirs))
        .filter(|((_, o), d)| {
            o.passed() && suite::prepare(d).is_ok_and(|p| !p.model.specialized.is_empty())
        })
        .count();
    println!("  {specialized} of the passing cases are specialised on an input value");
    let mut top: Vec<_> = categories.into_iter().collect();
    top.sort_by_key(|b| std::cmp::Reverse(b.1));
    for (cat, n) in top.iter().take(15) {
        println!("  {n:>4}  {cat}");
    }
    if !now_pass.is_empty() {
        println!(
            "{} listed cases now pass (remove them from tests/data/node_expected_failures.txt):",
            now_pass.len()
        );
        for n in &now_pass {
            println!("  {n}");
        }
    }
    assert!(
        unexpected.is_empty(),
        "{} cases fail that are not in node_expected_failures.txt:\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
}

/// Byte-mutated suite models (every 7th case, a few seeded mutations each) load to a model
/// or a typed error, never a panic.
#[test]
fn mutated_suite_models_never_panic() {
    let Some(root) = suite_root() else {
        return;
    };
    let mut rng = rlx_testutil::Rng::new("mutated_suite_models_never_panic");
    let dirs = suite::case_dirs(&root).expect("list the suite");
    let mut panics = vec![];
    for d in dirs.iter().step_by(7) {
        let Ok(bytes) = std::fs::read(d.join("model.onnx")) else {
            continue;
        };
        for _ in 0..4 {
            let mut b = bytes.clone();
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(b.len().max(1));
                if let Some(v) = b.get_mut(i) {
                    *v = rng.next_u64() as u8;
                }
            }
            let r =
                std::panic::catch_unwind(|| rlx_onnx::load_bytes(&b, None, "mutated").map(|_| ()));
            if r.is_err() {
                panics.push(suite::case_name(d));
            }
        }
    }
    assert!(panics.is_empty(), "panicked on mutations of: {panics:?}");
}
