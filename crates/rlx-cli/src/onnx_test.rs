//! `rlx onnx-test DIR… [--device cpu|cuda]`: run ONNX backend test cases (the suite root or
//! single case folders), one line per case, then `N passed, M failed (U unsupported)`;
//! `--failures-list FILE` writes the failing cases with their reason category.
use crate::CliError;
use rlx::prelude::Device;
use rlx_onnx::suite;
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
    let results = suite::run_cases(&cases, device);
    for (name, outcome) in &results {
        println!("{name}: {outcome}");
    }
    println!("{}", suite::summary(&results));
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
