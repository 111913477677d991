//! `rlx onnx-test DIR… [--device cpu|cuda]`: run ONNX backend test cases (the suite root or
//! single case folders), one line per case, then `N passed, M failed (U unsupported)`;
//! `--failures-list FILE` writes the failing cases with their reason category.
use crate::CliError;
use rlx::prelude::Device;
use rlx_onnx::suite;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub fn run(dirs: &[PathBuf], device: Device, failures: Option<&Path>) -> Result<(), CliError> {
    let mut cases = vec![];
    for d in dirs {
        let found = suite::case_dirs(d).map_err(|e| CliError::Usage(e.to_string()))?;
        if found.is_empty() {
            return Err(CliError::Usage(format!(
                "{}: no model.onnx in it or in its subfolders",
                d.display()
            )));
        }
        cases.extend(found);
    }
    let full = suite::run_cases_full(&cases, device);
    // On a GPU a pass that ran some nodes on the CPU says which (the dispatch report's view).
    let mut leaned: BTreeMap<String, usize> = BTreeMap::new();
    let mut passes_with_fallback = 0;
    for (name, r) in &full {
        if r.fallback.is_empty() {
            println!("{name}: {}", r.outcome);
        } else {
            println!(
                "{name}: {} [cpu fallback: {}]",
                r.outcome,
                r.fallback.join("; ")
            );
            if r.outcome.passed() {
                passes_with_fallback += 1;
                for f in &r.fallback {
                    let kind = f.split(" (").next().unwrap_or(f).to_string();
                    *leaned.entry(kind).or_default() += 1;
                }
            }
        }
    }
    let results: Vec<(String, suite::Outcome)> =
        full.into_iter().map(|(n, r)| (n, r.outcome)).collect();
    println!("{}", suite::summary(&results));
    if device != Device::Cpu {
        let mut top: Vec<_> = leaned.into_iter().collect();
        top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let top: Vec<String> = top
            .iter()
            .take(12)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        println!(
            "{passes_with_fallback} of the passing cases ran some node on the CPU (op kinds: {})",
            if top.is_empty() {
                "none".to_string()
            } else {
                top.join(", ")
            }
        );
    }
    if let Some(path) = failures {
        // The CI list (crates/rlx-onnx/tests/data/node_expected_failures.txt): name, category.
        let mut text = String::from(
            "# ONNX node-suite cases that do not pass on the CPU: name <TAB> reason category.\n\
             # Regenerate: rlx onnx-test <suite> --device cpu --failures-list <this file>\n",
        );
        for (name, o) in results.iter().filter(|r| !r.1.passed()) {
            text += &format!("{name}\t{}\n", o.category());
        }
        std::fs::write(path, text)
            .map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
    }
    Ok(())
}
